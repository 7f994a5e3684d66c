"""One caller never sees, slows or breaks another, without Ray: what a principal sees of a backend, what
one caller's errors do to the backend's shared state, caches, budgets and bounds of work."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry import baggage, trace

from actors.directory import BackendDirectory
from actors.executor import ActorTable
from deployments.caller import Caller
from deployments.middleware import TraceContext
from deployments.service import RouterService
from router.errors import ErrorKind, NoRelevantBackend, PayloadTooLarge, RateLimited
from router.learning.decisions import RecentDecision
from router.llm.selection import ToolSelector
from router.models import QueryRequest, RouteRequest
from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.security.identity import Principal
from router.security.policy import Access
from router.settings import AuthSettings, Policy, RouterSettings
from router.stages.scoring import health_score
from router.strategies import STRATEGIES
from router.strategies.base import ChargedExecutor
from router.values import BackendStatus, CallOutcome, Capability, CapabilityId, Catalog
from tests.unit.fake_executor import ScriptedExecutor, fail, ok
from tests.unit.helpers import embed_texts, fake_embed, small_catalogs
from tests.unit.router_world import ONLY_TIME, answers, query, world
from tests.unit.test_strategies import harness, plan
from tests.unit.test_tools import SMALL, catalogs, index


def access(policy: dict[str, Any], name: str = "bob") -> Access:
    return Access(Principal(name, "pol", "api_key"), Policy.model_validate(policy))


# -- what a principal sees of a backend ----------------------------------------------------------


def test_a_principal_sees_counts_held_flagged_and_cleaned_only_of_capabilities_it_may_use() -> None:
    catalog = Catalog(backend="time", version="1", description="clock", capabilities=(
        Capability(backend="time", name="get_current_time"), Capability(backend="time", name="convert_time"),
        Capability(backend="time", name="zones", kind="resource", read_only=True)))
    status = BackendStatus(
        name="time", kind="mcp_stdio", transport="stdio", health="healthy", tool_count=2, resource_count=1,
        held_tools=({"tool": "convert_time", "kind": "tool", "reason": "definition changed"},),
        flagged_tools=({"tool": "convert_time", "kind": "tool", "rules": ["hidden text"]},),
        sanitized=("the server's description", "convert_time: description"),
        catalog_error="catalog of backend 'time' rejected: tool 'convert_time' is too long")
    bob = access({"deny": ["time/convert_time"]}).backend_info(status, catalog)
    assert (bob.tool_count, bob.resource_count) == (1, 1)
    assert bob.held_tools == [] and bob.flagged_tools == [] and bob.sanitized == ["the server's description"]
    assert "convert_time" not in bob.model_dump_json()
    # A denied tool whose name holds ":" (or is "server") was shown by the part of its name before the colon.
    colons = access({"deny": ["time/admin:*", "time/server"]}).backend_info(replace(
        status, sanitized=("admin:drop_all: description", "server: description", "admin: title")), catalog)
    assert colons.sanitized == ["admin: title"]
    everything = access({}).backend_info(status, catalog)  # an unrestricted principal sees it all
    assert everything.tool_count == 2 and everything.held_tools[0].tool == "convert_time"


async def test_an_allow_list_that_leaves_out_a_description_only_backend_still_routes() -> None:
    described = Catalog(backend="flows", version="1", description="Runs the support flow for tickets",
                        capabilities=())
    w = world(catalogs=[*small_catalogs(), described])
    only_time = access({"allow": ["time/*"]})
    response = await query(w.router, QueryRequest(question=ONLY_TIME), only_time)
    assert response.backend == "time"
    view = w.router.view(only_time)
    assert view.index is not None and "flows" not in view.catalogs
    assert {c.backend for c in view.index.texts.capabilities} == {"time"}


async def test_a_restricted_view_is_built_off_the_request_path_when_the_catalog_changes(monkeypatch: Any) -> None:
    w = world()
    only_time = access({"allow": ["time/*"]})
    await query(w.router, QueryRequest(question=ONLY_TIME), only_time)
    assert len(w.router.decider._ranked) > 0  # kept for the index being served, dropped with it below
    index = w.router.index
    assert index is not None
    newer = index.with_alphas(0.7, 0.7)  # a new index for the same catalogs
    catalogs = list(w.router.catalogs.values())
    build = w.router.views_for(catalogs, newer)
    await asyncio.to_thread(build)  # as the directory runs it, before serving the index

    def on_the_loop(*args: Any, **kwargs: Any) -> CatalogIndex:
        raise AssertionError("a view built on the request path")

    monkeypatch.setattr(CatalogIndex, "restricted", on_the_loop)
    w.router.set_catalogs(catalogs, newer)
    assert len(w.router.decider._ranked) == 0 and len(w.router.decider._taught) == 0
    view = w.router.view(only_time)
    assert view.index is not None and view.index.tools.alpha == 0.7
    assert (await query(w.router, QueryRequest(question=ONLY_TIME), only_time)).backend == "time"


async def test_a_flow_stand_in_keeps_its_flow_in_a_principals_view() -> None:
    described = Catalog(backend="flows", version="1", description="Runs the support flow for tickets",
                        capabilities=())
    settings = RouterSettings()
    texts = CatalogTexts.build([*small_catalogs(), described], {"flows": "flow-1"})
    full = CatalogIndex(texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense), settings.routing)
    view = full.restricted(lambda c: c.backend in ("flows", "time"), {"flows", "time"})
    stand_in = next(c for c in view.texts.capabilities if c.backend == "flows")
    assert stand_in.server_level and stand_in.target == "flow-1" and stand_in.kind == "flow"
    assert view.tools.vectors(list(range(len(view)))).shape[0] == len(view)


# -- what one caller's calls do to what everyone shares -------------------------------------------


def outcome(kind: ErrorKind | None, sent: bool = True) -> CallOutcome:
    return CallOutcome(backend="time", capability="convert_time", ok=kind is None, latency_ms=3.0, error_kind=kind,
                       error=None if kind is None else "Invalid timezone: 'alice-secret-42'", sent=sent)


def test_the_performance_history_keeps_what_an_outcome_says_of_the_backend_itself() -> None:
    directory = BackendDirectory(RouterSettings(), ActorTable({}), None, None, on_index=lambda *_: None)
    for kind in (None, ErrorKind.TOOL_FAILED, ErrorKind.BACKEND_REJECTED_ARGUMENTS, ErrorKind.BACKEND_TIMEOUT,
                 ErrorKind.DEADLINE_EXCEEDED, ErrorKind.CANCELLED):
        directory.record("time", "general", outcome(kind), "alice")
    directory.record("time", "general", outcome(ErrorKind.BACKEND_UNAVAILABLE, sent=False))  # never sent
    assert [(ok, kind, caller) for _, _, _, _, ok, kind, caller in directory._pending] == [
        (True, None, "alice"), (True, "tool_failed", "alice"), (True, "backend_rejected_arguments", "alice"),
        (False, "backend_timeout", "alice")]


async def test_each_outcome_reaches_the_performance_history_with_its_caller() -> None:
    w = world()
    await query(w.router, QueryRequest(question=ONLY_TIME), access({}, "alice"))
    await query(w.router, QueryRequest(question=ONLY_TIME))
    assert [b for b, _, _ in w.stats.recorded].count("time") == 2
    assert [c for (b, _, _), c in zip(w.stats.recorded, w.stats.callers, strict=True) if b == "time"] == [
        "alice", None]


async def test_a_backend_ejected_on_one_callers_failures_is_still_sent_the_others_calls() -> None:
    """The backend's actor lets another caller's call probe it (test_backend_supervisor.py): the router sends
    it there, ranked as a backend in doubt, while the one whose failures ejected it is planned around it,
    and forced onto it only when it has nothing else, as without keys."""
    lone = BackendStatus(name="time", kind="mcp_stdio", transport="stdio", health="ejected",
                         ejected_until=time.time() + 60, ejected_by="mallory")
    everyones = dataclasses.replace(lone, ejected_by=None)
    assert lone.available_to("alice") and lone.available_to(None) and not lone.available_to("mallory")
    assert not everyones.available_to("alice")
    assert (health_score(lone), health_score(everyones)) == (0.5, 0.0)
    w = world()
    w.stats.lone = {"time": "mallory"}
    for who, forced in (("alice", False), ("mallory", True)):
        await query(w.router, QueryRequest(question=ONLY_TIME), access({}, who))
        call = w.executor.calls[-1]
        assert (call.backend, call.force) == ("time", forced), who


async def test_a_cached_answer_never_stands_in_for_other_arguments() -> None:
    w = world()
    asked = QueryRequest(question=ONLY_TIME, arguments={"timezone": "Asia/Tokyo"})
    first = await query(w.router, asked)
    w.stats.health["time"] = "down"
    again = await query(w.router, asked)
    assert again.routing is not None and again.routing.cached and again.answer == first.answer
    calls = len(w.executor.calls)
    other = await query(w.router, asked.model_copy(update={"arguments": {"timezone": "Europe/Paris"}}))
    assert other.routing is not None and not other.routing.cached  # sent to a backend, not the cache
    assert w.executor.calls[calls].arguments == {"timezone": "Europe/Paris"}


async def test_a_question_another_caller_asked_is_analysed_and_decided_afresh() -> None:
    """Every answer shows its stages' times: a cache shared across callers would tell one caller, by a fast
    analysis, that someone else had just asked the same words."""
    w = world()
    alice, bob = access({}, "alice"), access({}, "bob")
    await query(w.router, QueryRequest(question=ONLY_TIME), alice)
    searched: list[str] = []
    index = w.router.index
    assert index is not None
    search = index.search

    def counted(question: str, *args: Any, **kwargs: Any) -> Any:
        searched.append(question)
        return search(question, *args, **kwargs)

    index.search = counted  # type: ignore[method-assign]
    await query(w.router, QueryRequest(question=ONLY_TIME), bob)
    assert w.embedded.count([ONLY_TIME]) == 2 and searched == [ONLY_TIME]
    await query(w.router, QueryRequest(question=ONLY_TIME), alice)  # each caller's own entries still serve it
    assert w.embedded.count([ONLY_TIME]) == 2 and searched == [ONLY_TIME]


def test_a_policys_largest_deadline_applies_when_a_request_names_none() -> None:
    capped = access({"max_deadline_s": 5})
    assert capped.deadline(None, 30.0) == 5 and capped.deadline(2.0, 30.0) == 2.0
    assert access({}).deadline(None, 30.0) == 30.0


def test_a_principal_whose_policy_is_not_configured_may_do_nothing() -> None:
    nobody = Access.of(Principal("public", "public", "public"), AuthSettings())
    assert not nobody.allows("time", "get_current_time") and not nobody.policy.stats
    assert not nobody.policy.modes and not nobody.policy.chat and not nobody.policy.feedback


def test_a_new_key_is_not_an_operator_and_the_local_anonymous_caller_is() -> None:
    settings = AuthSettings.model_validate({"api_keys": [{"name": "ci", "sha256": "0" * 64}]})
    assert not settings.policies["default"].stats and settings.policies["operator"].stats
    assert settings.policies[settings.anonymous_policy].stats


# -- budgets: every call sent is charged ----------------------------------------------------------


class Budget:
    def __init__(self, calls: int) -> None:
        self.left = calls
        self.charged = 0

    async def charge(self, n: int) -> None:
        if self.left < n:
            raise RateLimited("'bob' is over its 2.0 backend calls/s", retry_after_s=1)
        self.left -= n
        self.charged += n


async def test_a_hedged_request_is_charged_for_every_call_it_sends() -> None:
    executor = ScriptedExecutor({"backup": ok("from backup")})
    executor.hang("primary")
    budget = Budget(10)
    h = harness(ChargedExecutor(executor, budget.charge), hedge_ms=20.0)  # type: ignore[arg-type]
    result = await STRATEGIES["hedged"](plan("primary", "backup"), h.ctx)
    assert result.outcome is not None and budget.charged == 2


async def test_a_hedge_over_the_budget_is_not_sent_and_the_first_call_still_answers() -> None:
    executor = ScriptedExecutor({"primary": ok("from primary"), "backup": ok("from backup")})
    gate = asyncio.Event()

    async def slow(call: Any) -> CallOutcome:
        await gate.wait()
        return await ok("from primary")(call)

    executor.script["primary"] = slow
    budget = Budget(1)
    h = harness(ChargedExecutor(executor, budget.charge), hedge_ms=20.0)  # type: ignore[arg-type]
    task = asyncio.ensure_future(STRATEGIES["hedged"](plan("primary", "backup"), h.ctx))
    await asyncio.sleep(0.1)
    gate.set()
    result = await task
    assert result.outcome is not None and result.outcome.text == "from primary"
    assert executor.called == ["primary"] and budget.charged == 1


async def test_a_request_that_can_send_nothing_is_a_429() -> None:
    w = world(answers(time=fail("backend_failed")))
    budget = Budget(0)
    with pytest.raises(RateLimited) as over:
        await query(w.router, QueryRequest(question=ONLY_TIME), charge=budget.charge)
    assert over.value.status_code == 429 and w.executor.called == []


# -- bounded work ----------------------------------------------------------------------------------


async def test_a_conversation_over_the_selection_cap_is_a_413_naming_it_before_any_work() -> None:
    embedded: list[int] = []

    async def counting(texts: list[str]) -> Any:
        embedded.append(len(texts))
        return await fake_embed(texts)

    selector = ToolSelector(SMALL, counting)
    huge = [{"role": "user", "content": "rain. " * 20_000}]  # 120 KB of clauses
    started = time.perf_counter()
    with pytest.raises(PayloadTooLarge, match=r"tool_selection\.max_conversation_bytes"):
        await selector.select(index(catalogs()), huge)
    assert time.perf_counter() - started < 0.1 and embedded == []


async def test_selection_ranks_at_most_max_steps_steps_of_a_long_request() -> None:
    embedded: list[int] = []

    async def counting(texts: list[str]) -> Any:
        embedded.append(len(texts))
        return await fake_embed(texts)

    selector = ToolSelector(SMALL.model_copy(update={"max_steps": 3}), counting)
    many = [{"role": "user", "content": " then ".join(f"step {i} forecast rain" for i in range(40))}]
    await selector.select(index(catalogs()), many)
    assert embedded == [1 + 3]  # the whole conversation and three steps


async def test_route_requests_and_questions_are_bounded_everywhere() -> None:
    with pytest.raises(ValueError, match="less than or equal to 100"):
        RouteRequest(question="hi", k=101)


async def test_an_operator_sees_no_decision_of_a_tool_its_policy_denies() -> None:
    settings = RouterSettings.model_validate({"server": {"auth": {"policies": {
        "ops": {"allow": ["fs"], "deny": ["fs/read_secrets"], "stats": True}}}}})
    ops = Access.of(Principal("ops-bot", "ops", "api_key"), settings.server.auth)
    rows = [{"backend": "fs", "capability": "read_secrets", "question": "print the password file"},
            {"backend": "fs", "capability": "read_file", "question": "read notes"},
            {"backend": None, "capability": None, "question": "declined"},
            {"backend": "fs", "capability": "read_file", "question": "failed on both",
             "calls": ["fs/read_file", "fs/read_secrets"]}]
    # a question the router asked about names its closest candidates: seen only where they all may be
    asked = [RecentDecision(request_id=q, question=q, vector=None, chosen=None, outcome="refused",
                            candidates=tuple(CapabilityId("fs", "tool", n) for n in names)).row()
             for q, names in (("salary of Jane Doe", ("read_secrets", "read_file")), ("which notes", ("read_file",)))]
    rows += asked
    assert asked[0]["candidates"] == ["fs/read_secrets", "fs/read_file"]

    async def latest(limit: int) -> list[dict[str, Any]]:
        return rows

    service = RouterService.__new__(RouterService)
    service.router = SimpleNamespace(visible_backends=lambda access: ["fs"])  # type: ignore[assignment]
    service.learning = SimpleNamespace(latest=latest)  # type: ignore[assignment]
    shown = await service.decisions(50, Caller(ops))
    assert [r["question"] for r in shown] == ["read notes", "declined", "which notes"]


async def test_an_operators_stats_count_only_the_capabilities_its_policy_allows() -> None:
    w = world()
    ops = Access(Principal("ops-bot", "ops", "api_key"), Policy(allow=["calc"], deny=["calc/multiply"], stats=True))

    async def stats() -> dict[str, Any]:
        return {"series": []}

    service = RouterService.__new__(RouterService)
    service.router = w.router
    service.perf_actor = SimpleNamespace(stats=SimpleNamespace(remote=stats))  # type: ignore[assignment]
    service.directory = SimpleNamespace(statuses=w.stats.statuses, index_built_at=0.0,  # type: ignore[assignment]
                                        provisional=0)
    index = (await service.stats(Caller(ops)))["index"]
    calc = w.router.catalogs["calc"]
    assert "multiply" in {c.name for c in calc.capabilities}
    assert index["backends"] == 1 and list(index["versions"]) == ["calc"]
    assert index["capabilities"] == len(calc.capabilities) - 1


async def test_a_callers_baggage_never_travels_on_to_backends() -> None:
    """Only the W3C trace context is joined: a backend or collector reading baggage (a tenant, a role) would
    otherwise take the caller's word for it."""
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["baggage"] = dict(baggage.get_all())
        seen["trace_id"] = trace.get_current_span().get_span_context().trace_id

    headers = [(b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
               (b"baggage", b"tenant=admin,role=operator")]
    await TraceContext(app)({"type": "http", "headers": headers}, None, None)
    assert seen == {"baggage": {}, "trace_id": 0x0af7651916cd43dd8448eb211c80319c}


async def test_a_refusal_names_its_request_only_when_feedback_on_it_would_find_it() -> None:
    w = world()
    nothing = access({"allow": ["nowhere/*"]})  # a view with nothing in it
    with pytest.raises(NoRelevantBackend) as refused:
        await query(w.router, QueryRequest(question="?!"), nothing)
    assert "request_id" not in refused.value.details
    with pytest.raises(NoRelevantBackend) as declined:
        await query(w.router, QueryRequest(question="?!"))
    assert "request_id" in declined.value.details
