"""Creating and finding the router's named, detached actors in the app's namespace.

Any replica on any node finds a backend by name (``backend:<name>``); a detached actor whose
configuration no longer matches the config file is replaced.
"""

from __future__ import annotations

import logging
from typing import Any

import ray

from actors.backend import BackendActor, spec_fingerprint
from actors.performance import PERF_ACTOR_NAME, PerformanceActor
from router.config import BackendSpec, RouterSettings

log = logging.getLogger("mcp_router.registry")
_HEADROOM = 32  # actor concurrency beyond backend calls, for status and catalog requests


def backend_actor_name(name: str) -> str:
    return f"backend:{name}"


def get_backend_actor(name: str, namespace: str) -> Any:
    return ray.get_actor(backend_actor_name(name), namespace=namespace)


async def ensure_backend_actor(spec: BackendSpec, settings: RouterSettings) -> Any:
    """The live actor for `spec`, created if missing and replaced if its configuration changed."""
    ns = settings.server.namespace
    name = backend_actor_name(spec.name)
    try:
        actor = ray.get_actor(name, namespace=ns)
        if await actor.spec_fingerprint.remote() == spec_fingerprint(spec):
            return actor
        log.info("backend %s changed its configuration; replacing its actor", spec.name)
        ray.kill(actor, no_restart=True)
    except ValueError:
        pass  # not created yet
    except ray.exceptions.RayActorError:
        pass  # died for good; a new one takes the name
    # No task events: Ray would otherwise report every call to the GCS (for its state API), which on
    # the request path costs CPU the router needs (Serve turns them off for its replicas too).
    return BackendActor.options(
        name=name, namespace=ns, lifetime="detached", get_if_exists=True, num_cpus=0,
        max_restarts=-1, max_task_retries=0, max_concurrency=spec.max_concurrency + _HEADROOM,
        scheduling_strategy="SPREAD", enable_task_events=False,
    ).remote(spec, settings.resilience)


def ensure_performance_actor(settings: RouterSettings) -> Any:
    ns = settings.server.namespace
    return PerformanceActor.options(
        name=PERF_ACTOR_NAME, namespace=ns, lifetime="detached", get_if_exists=True, num_cpus=0,
        max_restarts=-1, max_task_retries=-1, max_concurrency=64, enable_task_events=False,
    ).remote(settings.resilience, f"{ns}:performance-history")


def kill_router_actors(settings: RouterSettings, *, include_performance: bool = True) -> None:
    """Remove the app's detached actors (they outlive the Serve app by design)."""
    ns = settings.server.namespace
    names = [backend_actor_name(b.name) for b in settings.backends]
    if include_performance:
        names.append(PERF_ACTOR_NAME)
    for name in names:
        try:
            actor = ray.get_actor(name, namespace=ns)
        except ValueError:
            continue
        # A clean stop first: backends close their MCP sessions (and stdio subprocesses), the
        # performance actor writes its last snapshot.
        try:
            ray.get(actor.flush.remote() if name == PERF_ACTOR_NAME else actor.shutdown.remote(), timeout=5)
        except ray.exceptions.RayError:
            pass
        ray.kill(actor, no_restart=True)
