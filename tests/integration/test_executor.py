"""RayExecutor against a real backend actor, over both of its paths: the same-node channel, and Ray
actor calls (where calls made while one is in flight travel together). On both, cancelling one call
stops it at the MCP server without touching the others, and a restarted actor is found again."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
import ray

from actors.registry import ensure_backend_actor
from deployments.executor import RayExecutor
from router.config import RouterSettings
from router.models import CallOutcome, Capability
from router.strategies import CallContext
from tests.conftest import EXAMPLES, stdio

CTX = CallContext(question="capital of Peru?", intent="general")


@pytest.fixture
def backend(ray_local: Any) -> Any:
    name = f"slow-{uuid.uuid4().hex[:6]}"
    settings = RouterSettings.model_validate({
        "backends": [stdio(name, EXAMPLES / "servers" / "faulty.py", "--latency-ms", "300", "--jitter", "0")],
        "server": {"namespace": "mcp-router-test"}})
    spec = settings.backends[0]
    actor = asyncio.run(ensure_backend_actor(spec, settings))
    ray.get(actor.start.remote(20.0))
    yield name, actor
    ray.get(actor.shutdown.remote())
    ray.kill(actor)


def tool(backend: str, name: str) -> Capability:
    return Capability(backend=backend, name=name)


async def stats(executor: RayExecutor, backend: str) -> dict[str, int]:
    outcome = await executor.call(tool(backend, "stats"), {}, timeout_s=10, context=CTX)
    assert outcome.ok, outcome.error
    return json.loads(outcome.text or "{}")


def test_calls_made_while_one_is_in_flight_travel_together(backend: tuple[str, Any]) -> None:
    name, actor = backend
    executor = RayExecutor("mcp-router-test", {name: actor}, same_node_channel=False)

    async def run() -> list[Any]:
        calls = [executor.call(tool(name, "answer"), {"query": f"q{i}"}, timeout_s=10, context=CTX)
                 for i in range(6)]
        return await asyncio.gather(*calls)

    outcomes = asyncio.run(run())
    assert [o.text for o in outcomes] == ["42"] * 6 and all(o.ok for o in outcomes)
    # The first went alone; the five made in the same turn, while it was in flight, went as one call.
    assert executor.transport(name) == "ray"
    assert executor._routes[name].via.gathered == 5  # type: ignore[union-attr]


@pytest.mark.parametrize("same_node_channel", [True, False], ids=["channel", "ray"])
def test_cancelling_one_of_several_calls_stops_only_it_at_the_server(backend: tuple[str, Any],
                                                                      same_node_channel: bool) -> None:
    name, actor = backend
    executor = RayExecutor("mcp-router-test", {name: actor}, same_node_channel=same_node_channel)

    async def run() -> tuple[list[Any], dict[str, int], dict[str, int]]:
        before = await stats(executor, name)
        tasks = [asyncio.create_task(executor.call(tool(name, "answer"), {"query": f"q{i}"}, timeout_s=10,
                                                   context=CTX)) for i in range(3)]
        await asyncio.sleep(0.1)
        if not same_node_channel:
            assert executor._routes[name].via.gathered >= 2  # type: ignore[union-attr]  # 1 and 2 together
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
    assert executor.transport(name) == ("channel" if same_node_channel else "ray")


def test_the_channel_carries_concurrent_calls_and_reconnects_after_the_actor_restarts(
        backend: tuple[str, Any]) -> None:
    name, actor = backend
    executor = RayExecutor("mcp-router-test", {name: actor})

    async def answers(n: int) -> list[Any]:
        return await asyncio.gather(*(executor.call(tool(name, "answer"), {"query": f"q{i}"}, timeout_s=20,
                                                    context=CTX) for i in range(n)))

    async def run() -> tuple[list[Any], list[Any]]:
        first = await answers(6)
        assert executor.transport(name) == "channel"
        old_channel = executor._routes[name].via
        slow = await executor.call(tool(name, "configure"), {"latency_ms": 5000}, timeout_s=10, context=CTX)
        assert slow.ok, slow.error  # the calls below are still running when the actor dies
        in_flight = [asyncio.create_task(executor.call(tool(name, "answer"), {"query": f"k{i}"}, timeout_s=20,
                                                       context=CTX)) for i in range(8)]
        await asyncio.sleep(0.1)
        ray.kill(actor, no_restart=False)  # the process dies; Ray restarts it with a new socket
        await asyncio.gather(*in_flight)  # all eight lose the channel at once and retry
        for _ in range(100):  # the executor retries while the actor restarts, which then reconnects to its server
            ok = (await executor.call(tool(name, "stats"), {}, timeout_s=20, context=CTX)).ok
            if ok and executor._routes[name].via is not old_channel:
                break
            await asyncio.sleep(0.2)
        return first, await answers(3)

    first, after_restart = asyncio.run(run())
    assert all(o.ok and o.text == "42" for o in first)
    assert all(o.ok and o.text == "42" for o in after_restart), [o.error for o in after_restart]
    assert executor.transport(name) == "channel"
    assert executor.opened == 2  # the calls that failed together opened one new channel between them


@ray.remote(num_cpus=0)
class ActorWithoutChannel:
    """An actor from before the channel existed: it has `call` and nothing else."""

    async def call(self, capability: Capability, arguments: dict[str, Any], timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        return CallOutcome(backend=capability.backend, capability=capability.name, ok=True, latency_ms=0.0,
                           text="through ray")


def test_an_actor_that_offers_no_channel_is_called_through_ray(ray_local: Any) -> None:
    executor = RayExecutor("mcp-router-test", {"old": ActorWithoutChannel.remote()})
    outcome = asyncio.run(executor.call(tool("old", "answer"), {}, timeout_s=10, context=CTX))
    assert outcome.ok and outcome.text == "through ray"
    assert executor.transport("old") == "ray"
