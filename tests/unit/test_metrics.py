"""The router's metrics and audit count what was done, whatever the caller asked to be shown."""

from __future__ import annotations

from typing import Any

from deployments.caller import Caller
from deployments.metrics import RouterMetrics
from deployments.service import RouterService
from router.models import QueryRequest
from router.security.identity import Principal
from router.security.policy import Access
from router.settings import Policy
from tests.unit.fake_executor import fail
from tests.unit.router_world import BOTH_CLOCKS, answers, world


class Counted:
    def __init__(self) -> None:
        self.counted: list[tuple[float, dict[str, str]]] = []

    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        self.counted.append((value, tags or {}))

    def observe(self, *_: Any, **__: Any) -> None:
        pass


class Metrics(RouterMetrics):
    """Ray's metrics counted in memory."""

    def __init__(self) -> None:
        super().__init__(False)
        self.enabled = True
        self.requests, self.latency, self.fallbacks, self.hedges, self.cache_hits = (Counted() for _ in range(5))


async def test_a_fallback_is_counted_and_audited_when_the_caller_asked_for_no_routing_metadata() -> None:
    # it counted no fallback (nor a cached answer, nor a hedge) and audited no arguments: both read the metadata
    w = world(answers(time=fail("backend_failed", "boom")))
    metrics = Metrics()
    service = RouterService(settings=w.router.settings, router=w.router, learning=None,  # type: ignore[arg-type]
                            perf_actor=None, directory=None, selector=None, chat_service=None,  # type: ignore[arg-type]
                            limiter=None, metrics=metrics, query_embed=None)  # type: ignore[arg-type]
    caller = Caller(Access(Principal("anonymous", "operator", "anonymous"), Policy()), "r1")
    response = await service.query(QueryRequest(question=BOTH_CLOCKS, backend="time", fallback_on_override=True,
                                                include_routing_metadata=False), caller)
    assert response.backend == "clock" and response.routing is None
    assert metrics.fallbacks.counted == [(1, {"mode": "fallback"})]  # type: ignore[attr-defined]
    assert caller.route["arguments"] == {"timezone": "Asia/Tokyo"}


def test_a_backends_ejections_are_counted_once_in_its_host_after_the_count_decays_too(monkeypatch: Any) -> None:
    # Counted by every replica from the backend's status before: once per replica, and not again after the
    # detector's count decayed until it passed its old value.
    import ray.util.metrics

    from actors.host import BackendHost
    from router.settings import RouterSettings

    counted = Counted()
    monkeypatch.setattr(ray.util.metrics, "Counter", lambda *_, **__: counted)
    settings = RouterSettings.model_validate({"backends": [
        {"name": "docs", "kind": "mcp_http", "url": "http://127.0.0.1:9/mcp"}]})
    host = BackendHost([("docs@1", settings.backends[0])], settings.resilience, metrics=True)
    detector = host.members["docs@1"].detector
    detector._eject(0.0, set())
    detector.ejections = 0  # decayed after a healthy period
    detector._eject(1.0, set())
    assert counted.counted == [(1.0, {"backend": "docs"})] * 2
    assert BackendHost([("docs@1", settings.backends[0])], settings.resilience).members["docs@1"].detector.on_eject \
        is None
