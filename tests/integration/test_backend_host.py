"""Backends sharing a host actor (`actors.host`) on a local Ray: each keeps its own connection and limits,
a slow or failing one holds up no other, the pool packs them by kind, and a backend whose configuration
changed moves to a new host while the others in its old host keep serving."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import ray

from actors.executor import ActorTable, RayExecutor
from actors.host import BackendRef
from actors.pool import BackendPool, create_backend_host, spec_fingerprint
from mcp_router.cli.local import free_port
from router.settings import RouterSettings
from router.values import CallContext, Capability
from tests.conftest import EXAMPLES, stdio, stop_process, wait_listening

CTX = CallContext(question="q", intent="general")
FAULTY = EXAMPLES / "servers" / "faulty.py"


def answer(backend: str) -> Capability:
    return Capability(backend=backend, name="answer")


def test_a_slow_and_a_failing_backend_hold_up_no_other_in_their_host(ray_local: Any) -> None:
    settings = RouterSettings.model_validate({"backends": [
        stdio("slow", FAULTY, "--name", "slow", "--latency-ms", "1500", "--jitter", "0", max_concurrency=2),
        stdio("broken", FAULTY, "--name", "broken", "--fail-rate", "1"),
        stdio("fast", FAULTY, "--name", "fast", "--answer", "fast")]})
    members = [(f"{s.name}@{spec_fingerprint(s)}", s) for s in settings.backends]
    host = create_backend_host(members, settings.resilience)
    refs = {s.name: BackendRef(host, m) for m, s in members}
    executor = RayExecutor(ActorTable(dict(refs)))

    async def run() -> tuple[list[str], list[Any]]:
        await asyncio.gather(*(r.start.remote(20.0) for r in refs.values()))
        done: list[str] = []

        async def call(name: str) -> Any:
            outcome = await executor.call(answer(name), {"query": "x"}, timeout_s=30, context=CTX)
            done.append(name)
            return outcome

        # The slow backend's two slots are taken and two more calls queue for them; the broken one fails
        # until it is ejected. The fast one answers all along.
        slow = [asyncio.create_task(call("slow")) for _ in range(4)]
        await asyncio.sleep(0.2)
        others = await asyncio.gather(*(call(n) for n in ["broken"] * 6 + ["fast"] * 10))
        await asyncio.gather(*slow)
        return done, others

    try:
        done, others = asyncio.run(run())
        assert done.index("slow") > max(i for i, n in enumerate(done) if n == "fast")
        assert all(o.ok and o.text == "fast" for o in others if o.backend == "fast")
        assert not any(o.ok for o in others if o.backend == "broken")
        statuses = ray.get(host.get_statuses.remote([m for m, _ in members]))
        by_name = {s.name: s for s in statuses.values()}
        assert by_name["broken"].health == "ejected" and by_name["fast"].health == "healthy"
        assert by_name["fast"].consecutive_failures == 0
    finally:
        ray.get(host.stop.remote())
        ray.kill(host)


@contextlib.contextmanager
def faulty_http(name: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(FAULTY), "--name", name, "--answer", name, "--http", str(port)])
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


def test_one_principals_flood_of_slow_calls_does_not_queue_anothers_call_behind_it(ray_local: Any) -> None:
    """The flood is larger than the host's slots for backend calls were (its backends' plus 32): it waits in
    the fair call slots, not in Ray's queue in arrival order, and reading the backend's state waits for none."""
    settings = RouterSettings.model_validate({"backends": [
        stdio("slow", FAULTY, "--name", "slow", "--latency-ms", "400", "--jitter", "0", max_concurrency=2)]})
    member = f"slow@{spec_fingerprint(settings.backends[0])}"
    host = create_backend_host([(member, settings.backends[0])], settings.resilience)
    executor = RayExecutor(ActorTable({"slow": BackendRef(host, member)}))

    async def run() -> tuple[list[str], float]:
        await BackendRef(host, member).start.remote(20.0)
        done: list[str] = []

        async def call(principal: str) -> None:
            context = CallContext(question="q", intent="general", principal=principal)
            outcome = await executor.call(answer("slow"), {"query": "x"}, timeout_s=30, context=context)
            assert outcome.ok, outcome.error
            done.append(principal)

        flood = [asyncio.create_task(call("alice")) for _ in range(40)]  # both slots, and 38 calls waiting
        await asyncio.sleep(0.3)
        bob = asyncio.create_task(call("bob"))
        started = time.monotonic()
        await host.get_statuses.remote([member])
        status_s = time.monotonic() - started
        await asyncio.gather(bob, *flood)
        return done, status_s

    try:
        done, status_s = asyncio.run(run())
        # Bob's call takes the first slot freed (with first come, first served it would end last, 41st).
        assert done.index("bob") <= 3, done
        assert status_s < 1.0, status_s  # behind the flood it would wait seconds
    finally:
        ray.get(host.stop.remote())
        ray.kill(host)


def test_the_pool_packs_backends_by_kind_and_moves_a_changed_one(ray_local: Any) -> None:
    with faulty_http("stay") as stay, faulty_http("moving") as moving:
        def settings(timeout_s: float) -> RouterSettings:
            return RouterSettings.model_validate({"backends": [
                {"name": "stay", "kind": "mcp_http", "url": stay},
                {"name": "moving", "kind": "mcp_http", "url": moving, "timeout_s": timeout_s},
                # Flow backends on a port nothing listens on: network backends too.
                *({"name": f"f{i}", "kind": "flowise", "url": "http://127.0.0.1:9", "connect_timeout_s": 1}
                  for i in range(3)),
                *(stdio(f"s{i}", FAULTY, "--name", f"s{i}") for i in range(2))],
                "server": {"hosting": {"backends_per_host": 2}}})

        first, second = settings(30), settings(20)
        pool = BackendPool("host-test", "v1", hosting=first.server.hosting)

        async def run() -> None:
            refs, _ = await pool.acquire(first.enabled_backends, first.resilience, 1.0)
            hosts = {n: id(r.host) for n, r in refs.items()}
            # Network backends two to a host, in configuration order; stdio ones one to a host.
            assert hosts["stay"] == hosts["moving"] and hosts["f0"] == hosts["f1"] != hosts["f2"]
            assert len({hosts["s0"], hosts["s1"], hosts["stay"], hosts["f0"], hosts["f2"]}) == 5
            await asyncio.gather(*(r.start.remote(20.0) for r in refs.values()))
            table = ActorTable(dict(refs), lambda: _acquire(pool, second))
            executor = RayExecutor(table)
            assert (await executor.call(answer("moving"), {"query": "x"}, timeout_s=30, context=CTX)).text == "moving"
            moved, _ = await pool.acquire(second.enabled_backends, second.resilience, 2.0)
            assert moved["moving"] is not refs["moving"] and moved["stay"] is refs["stay"]
            # Retired from its host (drained and stopped there), while its neighbour keeps serving. A caller
            # still holding the old reference is sent to the new one.
            for _ in range(50):
                if not await refs["stay"].host.get_statuses.remote([refs["moving"].member]):
                    break
                await asyncio.sleep(0.1)
            outcome = await executor.call(answer("moving"), {"query": "x"}, timeout_s=30, context=CTX)
            assert outcome.ok and outcome.text == "moving" and table.get("moving") is moved["moving"], outcome.error
            assert (await executor.call(answer("stay"), {"query": "x"}, timeout_s=30, context=CTX)).text == "stay"

        try:
            asyncio.run(run())
        finally:
            asyncio.run(pool.shutdown())


async def _acquire(pool: BackendPool, settings: RouterSettings) -> dict[str, Any]:
    refs, _ = await pool.acquire(settings.enabled_backends, settings.resilience, 2.0)
    return refs


def test_a_retired_backend_takes_no_new_call_while_its_calls_in_flight_drain(ray_local: Any) -> None:
    """A call in flight finishes where it runs; one arriving during the drain goes to the successor, so the
    drain ends with the calls it had and no call is cut by the stop (and taken for unsent by the kill)."""
    def settings(timeout_s: float) -> RouterSettings:
        return RouterSettings.model_validate({"backends": [stdio(
            "slow", FAULTY, "--name", "slow", "--latency-ms", "4000", "--jitter", "0", timeout_s=timeout_s)]})

    first, second = settings(30), settings(20)
    pool = BackendPool("drain-test", "v1")

    async def run() -> None:
        refs, _ = await pool.acquire(first.enabled_backends, first.resilience, 1.0)
        await refs["slow"].start.remote(20.0)
        table = ActorTable(dict(refs), lambda: _acquire(pool, second))
        executor = RayExecutor(table)
        in_flight = asyncio.create_task(executor.call(answer("slow"), {"query": "x"}, timeout_s=30, context=CTX))
        await asyncio.sleep(0.3)
        moved, _ = await pool.acquire(second.enabled_backends, second.resilience, 2.0)
        await asyncio.sleep(0.3)  # the old backend's retirement reaches its host
        during = await executor.call(answer("slow"), {"query": "x"}, timeout_s=30, context=CTX)
        assert during.ok, during.error
        assert table.get("slow") is moved["slow"]  # sent to the successor, not to the draining backend
        assert (await in_flight).ok

    try:
        asyncio.run(run())
    finally:
        asyncio.run(pool.shutdown())


def test_a_replica_of_an_older_build_is_not_given_a_backend_the_current_build_removed(ray_local: Any) -> None:
    def flows(*names: str) -> RouterSettings:
        return RouterSettings.model_validate({"backends": [
            {"name": n, "kind": "flowise", "url": "http://127.0.0.1:9", "connect_timeout_s": 1} for n in names]})

    old, current = flows("kept", "removed"), flows("kept")
    pool = BackendPool("generation-test", "v1")

    async def run() -> None:
        now, _ = await pool.acquire(current.enabled_backends, current.resilience, 2.0)
        # An old replica (a redeploy's, still serving) asks again after finding its actors gone.
        earlier, _ = await pool.acquire(old.enabled_backends, old.resilience, 1.0)
        assert earlier == {"kept": now["kept"]}

    try:
        asyncio.run(run())
    finally:
        asyncio.run(pool.shutdown())
