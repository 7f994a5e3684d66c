"""BackendHost: one Ray actor process hosting several backends, each its own `BackendSupervisor`.

A backend costs what its connection costs, not a process: the pool (`actors.pool`) packs backends into
hosts (`server.hosting`). Each backend keeps its own state in its host (connection, catalog cache,
health, outlier detector and half-open probe, in-flight limit) and its calls run as their own tasks, so
one backend's failure or slowness never holds up another's calls. Router replicas reach a hosted backend
through a `BackendRef`, which they call exactly as they would an actor of its own:

    ref = BackendRef(host, "calculator@1f2e...")
    outcome = await ref.call.remote(capability, {"query": "..."}, 10.0, call_context)

A host's members are fixed when it is created, so that a host Ray restarts after a crash comes back with
the same backends (their calls in flight fail, and are retried as for any restarted actor). A member the
pool retires (its backend's configuration changed) is drained and stopped in its host; the host ends
with its last member.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import pickle
import time
from collections.abc import AsyncIterator
from typing import Any

import ray

from actors.backend import BackendSupervisor
from router.settings import BackendSpec, ResilienceSettings, SecuritySettings
from router.values import BackendStatus, CallOutcome, Catalog

_DRAIN_S = 30.0  # the longest a retired member's calls in flight may keep it


def freeze_startup_heap() -> None:
    """Put what a process holds once started (its imports, settings, model, index) out of the garbage
    collector's reach. A full collection walked all of it: 100-140 ms on the 2-core machine, once every
    few hundred requests, during which every request or call the process was serving waited. It now walks
    only what came later (about 2 ms). Reference counting still frees a frozen object nothing refers to."""
    gc.collect()
    gc.freeze()


class MemberGone(RuntimeError):
    """The backend is no longer in this host (retired): ask the pool for its current place."""


class BackendHost:
    def __init__(self, members: list[tuple[str, BackendSpec]], resilience: ResilienceSettings,
                 security: SecuritySettings | None = None, state_dir: str | None = None, metrics: bool = False) -> None:
        self.members = {member: BackendSupervisor(spec, resilience, security, state_dir) for member, spec in members}
        if metrics:  # counted where ejections happen, once, not by every replica that reads the backend's status
            from ray.util.metrics import Counter

            ejections = Counter("mcp_router_ejections_total", "Backend ejections", tag_keys=("backend",))
            for supervisor in self.members.values():
                supervisor.detector.on_eject = functools.partial(ejections.inc, tags={"backend": supervisor.spec.name})
        self._leaving: set[str] = set()  # retired members draining: they take no new call
        freeze_startup_heap()

    def _member(self, member: str) -> BackendSupervisor:
        found = self.members.get(member)
        if found is None:
            raise MemberGone(f"backend {member.split('@', 1)[0]!r} is no longer hosted here")
        return found

    def _taking_calls(self, member: str) -> BackendSupervisor:
        # A retired member refuses new calls while its calls in flight drain, before anything is sent: the
        # caller asks the pool for its successor, and the drain ends when those in flight do. Accepted, a
        # call could outlive the drain and be cut by the stop, or by the kill after it, which the caller takes
        # for "never ran" and sends again (actors.executor).
        if member in self._leaving:
            raise MemberGone(f"backend {member.split('@', 1)[0]!r} is being replaced")
        return self._member(member)

    # -- one member, as its own actor would answer ---------------------------------------------

    async def call(self, member: str, packed: bytes) -> CallOutcome:
        args, kwargs = pickle.loads(packed)  # packed by `_Packed`: values of the router's own code, as Ray's are
        return await self._taking_calls(member).call(*args, **kwargs)

    async def start(self, member: str, wait_s: float = 0.0) -> BackendStatus:
        return await self._member(member).start(wait_s)

    async def get_status(self, member: str) -> BackendStatus:
        return await self._member(member).get_status()

    async def catalog(self, member: str, known_version: str | None = None) -> Catalog | None:
        return await self._member(member).catalog(known_version)

    async def refresh(self, member: str) -> Catalog | None:
        return await self._member(member).refresh()

    async def relay(self, member: str, *args: Any) -> AsyncIterator[dict[str, Any]]:
        async for event in self._member(member).relay(*args):
            yield event

    async def watch(self, member: str) -> AsyncIterator[dict[str, Any]]:
        async for notification in self._member(member).watch():
            yield notification

    def answer(self, member: str, *args: Any) -> bool:
        return self._member(member).answer(*args)

    async def identity(self, member: str) -> dict[str, Any] | None:
        return await self._member(member).identity()

    async def shutdown(self, member: str) -> None:
        await self._member(member).shutdown()

    # -- many members in one call (a replica's once-a-second status and catalog reads) ----------

    async def start_all(self, members: list[str], wait_s: float) -> None:
        await asyncio.gather(*(self._member(m).start(wait_s) for m in members if m in self.members))

    async def get_statuses(self, members: list[str]) -> dict[str, BackendStatus]:
        return {m: await self.members[m].get_status() for m in members if m in self.members}

    async def catalogs(self, known: dict[str, str | None]) -> dict[str, Catalog]:
        found = {m: await self.members[m].catalog(v) for m, v in known.items() if m in self.members}
        return {m: c for m, c in found.items() if c is not None}

    # -- membership ----------------------------------------------------------------------------

    async def retire(self, member: str) -> int:
        """Drain the member (its calls in flight finish, bounded), stop it and forget it; the members left."""
        supervisor = self.members.get(member)
        if supervisor is not None:
            self._leaving.add(member)
            await _drained([supervisor])
            with contextlib.suppress(Exception):
                await supervisor.shutdown()
            self.members.pop(member, None)
            self._leaving.discard(member)
        return len(self.members)

    async def stop(self) -> None:
        """Every member drained (calls in flight finish, bounded) and stopped cleanly: MCP sessions closed,
        stdio and launched servers ended."""
        await _drained(list(self.members.values()))
        await asyncio.gather(*(s.shutdown() for s in self.members.values()), return_exceptions=True)


async def _drained(supervisors: list[BackendSupervisor]) -> None:
    """Until none of them has a call in flight, for at most `_DRAIN_S`."""
    deadline = time.monotonic() + _DRAIN_S
    while time.monotonic() < deadline:
        if not any(s.status().inflight for s in supervisors):
            return
        await asyncio.sleep(0.5)


class BackendRef:
    """A hosted backend as a router replica calls it: `ref.call.remote(...)` is `host.call.remote(member, ...)`,
    and `ref.relay.options(num_returns="streaming")` works as on an actor handle."""

    def __init__(self, host: Any, member: str) -> None:
        self.host = host
        self.member = member

    @property
    def name(self) -> str:
        return self.member.split("@", 1)[0]

    def __getattr__(self, method: str) -> _Bound:
        if method.startswith("__"):  # pickling looks these up before `host` is set
            raise AttributeError(method)
        return (_Packed if method == "call" else _Bound)(getattr(self.host, method), self.member)

    def __reduce__(self) -> tuple[Any, ...]:
        return (BackendRef, (self.host, self.member))


class _Bound:
    def __init__(self, method: Any, member: str) -> None:
        self._method = method
        self._member = member

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._method.remote(self._member, *args, **kwargs)

    def options(self, **options: Any) -> _Bound:
        return type(self)(self._method.options(**options), self._member)


class _Packed(_Bound):
    """A backend call's values travel as one argument, pickled once: Ray's serializer takes each argument on its
    own and pickles each dataclass among them through cloudpickle, which made a call's round trip about 0.7 ms
    longer on the 2-core machine (docs/benchmarks.md, "Ray and Serve costs")."""

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._method.remote(self._member, pickle.dumps((args, kwargs), protocol=pickle.HIGHEST_PROTOCOL))


def member_gone(error: BaseException) -> bool:
    """Whether a failed call found its backend retired from its host (a stale reference)."""
    return isinstance(error, ray.exceptions.RayTaskError) and isinstance(error.cause, MemberGone)


BackendHostActor = ray.remote(BackendHost)
