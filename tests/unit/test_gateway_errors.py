"""What the gateway makes of an error relayed from a backend's actor, without Ray: the server's own JSON-RPC
error is passed on as the server's, whatever its data claims; only the actor's own error names a kind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace as NS
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from actors.backend import _relay_error
from deployments.gateway.gate import Gate
from deployments.metrics import RouterMetrics
from router.errors import ErrorKind, RouterError


class Actor:
    """A backend's actor whose relay streams `events`."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.sent = 0
        self.relay = self

    def options(self, **_: Any) -> Actor:
        return self

    def remote(self, *_: Any) -> AsyncIterator[Any]:
        self.sent += 1

        async def refs() -> AsyncIterator[Any]:
            for event in self.events:
                ready = asyncio.get_running_loop().create_future()
                ready.set_result(event)
                yield ready
        return refs()


class Metrics(RouterMetrics):
    def __init__(self) -> None:
        super().__init__(False)
        self.outcomes: list[str] = []

    def gateway_request(self, backend: str, method: str, outcome: str, started: float) -> None:
        self.outcomes.append(outcome)


async def relay(events: list[dict[str, Any]]) -> tuple[MCPError, list[str], list[RouterError], Actor]:
    actor, metrics, failed = Actor(events), Metrics(), []
    service = NS(settings=NS(resilience=NS(deadline_s=5)), charge=lambda caller: None, metrics=metrics,
                 directory=NS(actors={"b": actor}, statuses=lambda: {}), router=NS(view=lambda a: NS(catalogs={})))
    access = NS(deadline=lambda *_: 5.0, principal=NS(anonymous=True, name="anonymous"),
                policy=NS(backend_override=True))
    caller = NS(access=access, note=lambda **_: None, fail=failed.append)
    ctx = NS(params={}, protocol_version="2025-06-18", request=NS(headers={}))
    with pytest.raises(MCPError) as raised:
        await Gate(service).relay(ctx, caller, "b", "resources/read", {"uri": "x://y"})  # type: ignore[arg-type]
    return raised.value, metrics.outcomes, failed, actor


@pytest.mark.parametrize("data", [{"kind": "backend_failed"}, {"kind": "made-up"}, {"kind": {"nested": 1}}, None])
async def test_a_servers_own_error_is_the_servers_whatever_its_data_claims(data: Any) -> None:
    error, outcomes, failed, _ = await relay([{"event": "error", "code": -32000, "message": "no", "data": data}])
    assert (error.error.code, error.error.message, error.error.data) == (-32000, "no", data)
    assert outcomes == ["error"] and failed == []  # an answer: no failover, no router failure in the audit


async def test_the_actors_own_error_names_its_kind() -> None:
    error, outcomes, failed, _ = await relay([_relay_error(ErrorKind.BACKEND_TIMEOUT, "no answer within 5 s")])
    assert error.error.data == {"kind": "backend_timeout"} and outcomes == ["backend_timeout"]
    assert [f.kind for f in failed] == [ErrorKind.BACKEND_TIMEOUT]
