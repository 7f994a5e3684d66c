"""BackendPool: the one owner of an application's backends (in their host actors) and its performance actor.

It runs as a Serve deployment of one replica inside the application (`deployments.app`), so its
actors are created, replaced and destroyed with the application: they are not detached, and Ray
ends an owned actor when its owner ends. Backends share host processes (`actors.host`), packed by
kind (`server.hosting`): network backends many to a host, stdio ones (each with its server's process)
one to a host by default. Router replicas ask the pool for a reference to each backend of their
configuration and then call it directly (one Ray actor call per backend call):

    backends, performance = await pool.acquire.remote(settings.enabled_backends, settings.resilience, generation)

Serve replaces every replica of an application when it is rebuilt (`serve deploy` with changed
arguments or code), the pool's included, so a redeploy replaces every backend: the new pool starts
fresh actors while the old one drains its own (calls in flight finish, bounded) and stops them, MCP
sessions and child processes with them. When the application is deleted or the router stopped, the
same graceful stop runs, and Ray ends any actor whose owner is gone. Within one pool, each backend is
keyed by a fingerprint of its spec and the router's code: replicas of another configuration get
their own backend (in a new host; the old one takes no new call, is drained and stopped in its host,
and a host ends with its last backend), and replicas of an older build (lower `generation`) get the
current ones, never a resurrected old one nor one the current build removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

import ray
from pydantic import SecretStr
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.feedback import create_feedback_actor
from actors.host import BackendHostActor, BackendRef
from actors.performance import PerformanceActor
from router.settings import BackendSpec, HostingSettings, LearningSettings, ResilienceSettings, SecuritySettings

log = logging.getLogger("mcp_router.pool")
# Calls a host lets in beyond those its backends run at once: they wait in each backend's fair call slots,
# ordered by caller, not in Ray's queue in arrival order (where one caller's flood would hold everyone's, and
# the replicas' status reads with them). Not a concurrency group for the reads: Ray runs each group on an event
# loop of its own, and a backend's state lives on one.
_WAITING = 1024
_DRAIN_S = 30.0  # the longest a replaced actor's calls in flight may keep it alive
_STOP_S = 5.0


def spec_fingerprint(spec: BackendSpec, code_version: str = "") -> str:
    """Changes whenever the backend's configuration (or the router's code) changes."""
    def reveal(value: Any) -> str:
        return value.get_secret_value() if isinstance(value, SecretStr) else str(value)

    dumped = json.dumps([spec.model_dump(), code_version], sort_keys=True, default=reveal)
    return hashlib.sha256(dumped.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class _Owned:
    fingerprint: str
    ref: BackendRef
    node: str | None = None  # the node its host is pinned to


class BackendPool:
    def __init__(self, app_name: str, code_version: str, security: SecuritySettings | None = None,
                 state_dir: str | None = None, hosting: HostingSettings | None = None, metrics: bool = False) -> None:
        self.app_name = app_name
        self.metrics = metrics  # the hosts count their backends' ejections
        self.hosting = hosting or HostingSettings()
        # The security settings take part in each actor's fingerprint: changing them replaces the actors.
        self.code_version = code_version + (security.model_dump_json() if security is not None else "")
        self.security = security
        self.state_dir = state_dir
        self._backends: dict[str, _Owned] = {}
        self._performance: Any = None
        self._feedback: Any = None
        self._rate_limits: Any = None
        self._generation = 0.0
        self._hosts_made = 0
        self._lock = asyncio.Lock()
        self._retiring: set[asyncio.Task[None]] = set()

    async def acquire(self, specs: list[BackendSpec], resilience: ResilienceSettings,
                      generation: float) -> tuple[dict[str, BackendRef], Any]:
        """Every spec's backend (placed in a host, or replaced, as needed) and the performance actor."""
        async with self._lock:
            current = generation >= self._generation
            self._generation = max(self._generation, generation)
            out: dict[str, BackendRef] = {}
            new: list[tuple[str, BackendSpec]] = []
            alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
            for spec in specs:
                owned = self._backends.get(spec.name)
                fingerprint = spec_fingerprint(spec, self.code_version)
                if owned is not None and owned.node is not None and owned.node not in alive:
                    # Its host was pinned to a node that is gone, and cannot come back elsewhere: place it again.
                    log.warning("backend %s: its node is gone; placing it again", spec.name)
                    del self._backends[spec.name]
                    owned = None
                if owned is not None and (owned.fingerprint == fingerprint or not current):
                    out[spec.name] = owned.ref
                    continue
                if not current:  # a replica of an older build asking for a backend the current one does not have
                    continue     # (removed since): made now, it would run until the application ends
                if owned is not None:
                    log.info("backend %s changed; replacing it", spec.name)
                    self._retire(owned.ref)
                new.append((f"{spec.name}@{fingerprint}", spec))
            nodes = sorted(alive)
            for members in self._pack(new):
                self._hosts_made += 1  # round robin over the nodes, continued from earlier hosts
                node = nodes[self._hosts_made % len(nodes)] if nodes else None
                host = create_backend_host(members, resilience, self.security, self.state_dir, node, self.metrics)
                for member, spec in members:
                    ref = BackendRef(host, member)
                    self._backends[spec.name] = _Owned(member.split("@", 1)[1], ref, node)
                    out[spec.name] = ref
            if self._performance is None:
                self._performance = create_performance_actor(resilience, f"{self.app_name}:performance-history")
            return out, self._performance

    async def feedback(self, state_dir: str, learning: LearningSettings) -> Any:
        """The owner of the labelled examples (one per application, created on first use)."""
        async with self._lock:
            if self._feedback is None:
                self._feedback = create_feedback_actor(state_dir, learning)
            return self._feedback

    def rate_limits(self) -> Any:
        """The shared rate-limit buckets of the application's replicas (created on first use)."""
        if self._rate_limits is None:
            from actors.limits import RateLimitActor

            self._rate_limits = RateLimitActor.remote()  # type: ignore[attr-defined]
        return self._rate_limits

    def _pack(self, new: list[tuple[str, BackendSpec]]) -> list[list[tuple[str, BackendSpec]]]:
        """New backends in hosts: stdio ones `stdio_backends_per_host` to a host, the others
        `backends_per_host`, in configuration order."""
        groups: list[list[tuple[str, BackendSpec]]] = []
        for stdio, size in ((True, self.hosting.stdio_backends_per_host), (False, self.hosting.backends_per_host)):
            kind = [m for m in new if (m[1].kind == "mcp_stdio") == stdio]
            groups += [kind[i:i + size] for i in range(0, len(kind), size)]
        return groups

    def _retire(self, ref: BackendRef) -> None:
        task = asyncio.get_running_loop().create_task(_retire(ref))
        self._retiring.add(task)  # held until done: the loop keeps only weak references to tasks
        task.add_done_callback(self._retiring.discard)

    async def shutdown(self) -> None:
        """Drain every host's backends (their calls in flight finish, bounded), then stop them cleanly: MCP
        sessions closed, stdio and launched servers ended."""
        hosts = {id(o.ref.host): o.ref.host for o in self._backends.values()}
        self._backends.clear()
        await asyncio.gather(*(_stop_host(h) for h in hosts.values()), *self._retiring, return_exceptions=True)
        if self._performance is not None:
            with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
                await asyncio.wait_for(self._performance.flush.remote(), _STOP_S)
            ray.kill(self._performance, no_restart=True)
            self._performance = None
        if self._feedback is not None:  # every write is committed: nothing to flush
            ray.kill(self._feedback, no_restart=True)
            self._feedback = None
        if self._rate_limits is not None:
            ray.kill(self._rate_limits, no_restart=True)
            self._rate_limits = None


def create_backend_host(members: list[tuple[str, BackendSpec]], resilience: ResilienceSettings,
                        security: SecuritySettings | None = None, state_dir: str | None = None,
                        node_id: str | None = None, metrics: bool = False) -> Any:
    """A host actor for `members` (`name@fingerprint`, spec), on `node_id` (restarted there after a crash;
    when the node is gone, the pool places its backends again), else where Ray spreads it."""
    # Neither Ray's SPREAD nor a soft node affinity holds: two hosts made at once went to one node of two,
    # and a soft affinity asked from an actor (as the pool asks) landed on the other node five times in six.
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False) if node_id else "SPREAD"
    # No task events: Ray would otherwise report every call to the GCS (for its state API), which on
    # the request path costs CPU the router needs (Serve turns them off for its replicas too).
    return BackendHostActor.options(
        num_cpus=0, max_restarts=-1, max_task_retries=0, scheduling_strategy=strategy, enable_task_events=False,
        max_concurrency=sum(spec.max_concurrency for _, spec in members) + _WAITING,
    ).remote(members, resilience, security, state_dir, metrics)


def create_backend_actor(spec: BackendSpec, resilience: ResilienceSettings, security: SecuritySettings | None = None,
                         state_dir: str | None = None) -> BackendRef:
    """One backend in a host of its own (`ray.kill(ref.host)` ends it)."""
    member = f"{spec.name}@{spec_fingerprint(spec)}"
    return BackendRef(create_backend_host([(member, spec)], resilience, security, state_dir), member)


def create_performance_actor(resilience: ResilienceSettings, snapshot_key: str) -> Any:
    return PerformanceActor.options(
        num_cpus=0, max_restarts=-1, max_task_retries=-1, max_concurrency=64, enable_task_events=False,
    ).remote(resilience, snapshot_key)


async def _retire(ref: BackendRef) -> None:
    """The backend drained and stopped in its host; the host stopped with its last backend."""
    try:
        # its drain, then its stop: a session's close and a launched server's end, each bounded
        left = await asyncio.wait_for(ref.host.retire.remote(ref.member), _DRAIN_S + 4 * _STOP_S)
    except (ray.exceptions.RayError, TimeoutError) as exc:
        # Not known to be the host's last: its other backends, and their calls, are not ended with it.
        log.warning("the replaced backend %s did not stop in time (%s); its host is left running", ref.name, exc)
        return
    if left == 0:
        ray.kill(ref.host, no_restart=True)
    log.info("the replaced backend %s stopped", ref.name)


async def _stop_host(host: Any) -> None:
    with contextlib.suppress(ray.exceptions.RayError, TimeoutError):  # its drain, then its backends' stop
        await asyncio.wait_for(host.stop.remote(), _DRAIN_S + 4 * _STOP_S)
    ray.kill(host, no_restart=True)
