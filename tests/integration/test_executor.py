"""RayExecutor against a real backend actor: one Ray actor call per backend call. A fast call never
waits behind a slow one, cancelling one call stops it at the MCP server without touching the
others, a restarting actor is waited for, and a replaced actor is found again through the pool."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import replace
from typing import Any

import pytest
import ray

from actors.executor import ActorTable, RayExecutor
from actors.pool import BackendPool, create_backend_actor
from router.settings import RouterSettings
from router.values import CallContext, Capability
from tests.conftest import EXAMPLES, TEST_SERVERS, stdio

CTX = CallContext(question="capital of Peru?", intent="general")


@pytest.fixture
def backend(ray_local: Any) -> Any:
    name = f"slow-{uuid.uuid4().hex[:6]}"
    settings = RouterSettings.model_validate({
        "backends": [stdio(name, EXAMPLES / "servers" / "faulty.py", "--latency-ms", "300", "--jitter", "0")]})
    actor = create_backend_actor(settings.backends[0], settings.resilience)
    ray.get(actor.start.remote(20.0))
    yield name, actor
    ray.get(actor.shutdown.remote())
    ray.kill(actor.host)


def tool(backend: str, name: str) -> Capability:
    return Capability(backend=backend, name=name)


async def stats(executor: RayExecutor, backend: str) -> dict[str, int]:
    outcome = await executor.call(tool(backend, "stats"), {}, timeout_s=10, context=CTX)
    assert outcome.ok, outcome.error
    return json.loads(outcome.text or "{}")


def test_a_fast_call_returns_while_a_slow_call_to_the_same_backend_is_still_running(ray_local: Any) -> None:
    settings = RouterSettings.model_validate({"backends": [stdio("dyn", TEST_SERVERS / "dynamic.py")]})
    actor = create_backend_actor(settings.backends[0], settings.resilience)
    ray.get(actor.start.remote(20.0))
    executor = RayExecutor(ActorTable({"dyn": actor}))

    async def run() -> tuple[float, Any, Any]:
        started = time.monotonic()
        slow = asyncio.create_task(executor.call(tool("dyn", "sleep_for"), {"seconds": 2.0}, timeout_s=10,
                                                 context=CTX))
        fast = await executor.call(tool("dyn", "sleep_for"), {"seconds": 0.01}, timeout_s=10, context=CTX)
        fast_s = time.monotonic() - started
        return fast_s, fast, await slow

    try:
        fast_s, fast, slow = asyncio.run(run())
    finally:
        ray.get(actor.shutdown.remote())
        ray.kill(actor.host)
    assert fast.ok and slow.ok and slow.text == "slept 2.0 s"
    assert fast_s < 1.0, f"the 10 ms call took {fast_s:.2f} s"


def test_cancelling_one_of_several_calls_stops_only_it_at_the_server(backend: tuple[str, Any]) -> None:
    name, actor = backend
    executor = RayExecutor(ActorTable({name: actor}))

    async def run() -> tuple[list[Any], dict[str, int], dict[str, int]]:
        before = await stats(executor, name)
        tasks = [asyncio.create_task(executor.call(tool(name, "answer"), {"query": f"q{i}"}, timeout_s=10,
                                                   context=CTX)) for i in range(3)]
        await asyncio.sleep(0.1)
        tasks[1].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        for _ in range(50):
            after = await stats(executor, name)
            if after["cancelled"] > before["cancelled"]:
                break
            await asyncio.sleep(0.1)
        return done, before, after

    done, before, after = asyncio.run(run())
    assert isinstance(done[1], asyncio.CancelledError)
    assert done[0].ok and done[2].ok and done[2].text == "42"
    assert after["cancelled"] - before["cancelled"] == 1
    assert after["succeeded"] - before["succeeded"] >= 2


def test_calls_in_flight_when_the_actor_restarts_are_retried_on_it_unless_they_may_act(
        backend: tuple[str, Any]) -> None:
    name, actor = backend
    executor = RayExecutor(ActorTable({name: actor}))
    reads = replace(tool(name, "answer"), read_only=True)
    acts = tool(name, "answer")  # not declared read-only or idempotent: Ray cannot say whether it ran

    async def run() -> list[Any]:
        in_flight = [asyncio.create_task(executor.call(reads if i % 2 else acts, {"query": f"k{i}"}, timeout_s=30,
                                                       context=CTX)) for i in range(8)]
        await asyncio.sleep(0.1)
        ray.kill(actor.host, no_restart=False)  # the process dies; Ray restarts it, which reconnects to its server
        return await asyncio.gather(*in_flight)

    outcomes = asyncio.run(run())
    assert all(o.ok and o.text == "42" for o in outcomes[1::2]), [o.error for o in outcomes]
    assert all(not o.ok and o.may_have_acted and "not sent again" in (o.error or "") for o in outcomes[::2]), \
        [o.error for o in outcomes]


def test_an_actor_gone_for_good_is_replaced_by_asking_the_pool_once(ray_local: Any) -> None:
    settings = RouterSettings.model_validate({"backends": [stdio("calc", EXAMPLES / "servers" / "calculator.py")]})
    pool = BackendPool("executor-test", "v1")

    async def run() -> tuple[list[Any], ActorTable]:
        async def acquire() -> dict[str, Any]:
            handles, _ = await pool.acquire(settings.enabled_backends, settings.resilience, 1.0)
            return handles

        table = ActorTable(await acquire(), acquire)
        executor = RayExecutor(table)
        old = table.get("calc")
        await pool.shutdown()  # every actor stops for good, as when the pool's replica is replaced
        outcomes = await asyncio.gather(*(executor.call(tool("calc", "calculate"), {"query": f"2 + {i}"}, timeout_s=30,
                                                        context=CTX) for i in range(5)))
        assert table.get("calc") is not old
        await pool.shutdown()
        return outcomes, table

    outcomes, table = asyncio.run(run())
    assert [o.text.rsplit("=", 1)[-1].strip() for o in outcomes] == [str(2 + i) for i in range(5)], [
        o.error for o in outcomes]
    assert table.reacquired == 1


@ray.remote(num_cpus=0)
class _Owner:
    """Owns a backend's host, as the pool does: when it dies, Ray ends the host with it."""

    def __init__(self, settings: RouterSettings) -> None:
        self.settings = settings

    async def start(self) -> Any:
        ref = create_backend_actor(self.settings.backends[0], self.settings.resilience)
        await ref.start.remote(20.0)
        return ref


def test_calls_in_flight_when_the_host_dies_with_its_owner_are_not_sent_again_if_they_may_act(
        ray_local: Any) -> None:
    name = f"slow-{uuid.uuid4().hex[:6]}"
    settings = RouterSettings.model_validate({
        "backends": [stdio(name, EXAMPLES / "servers" / "faulty.py", "--latency-ms", "500", "--jitter", "0")]})
    owner = _Owner.remote(settings)
    successor = create_backend_actor(settings.backends[0], settings.resilience)
    reads = replace(tool(name, "answer"), read_only=True)
    acts = tool(name, "answer")

    async def run() -> tuple[list[Any], ActorTable]:
        await successor.start.remote(20.0)

        async def acquire() -> dict[str, Any]:
            return {name: successor}

        table = ActorTable({name: await owner.start.remote()}, acquire)
        executor = RayExecutor(table)
        in_flight = [asyncio.create_task(executor.call(reads if i % 2 else acts, {"query": f"o{i}"}, timeout_s=30,
                                                       context=CTX)) for i in range(6)]
        await asyncio.sleep(0.2)  # every call is at the server, which answers after 0.5 s
        ray.kill(owner)  # the host dies with its owner, in the middle of the calls: no drain
        return await asyncio.gather(*in_flight), table

    try:
        outcomes, table = asyncio.run(run())
    finally:
        ray.get(successor.shutdown.remote())
        ray.kill(successor.host)
    assert table.get(name) is successor and table.reacquired == 1
    assert all(o.ok and o.text == "42" for o in outcomes[1::2]), [o.error for o in outcomes]
    assert all(not o.ok and o.may_have_acted and "not sent again" in (o.error or "") for o in outcomes[::2]), \
        [o.error for o in outcomes]
