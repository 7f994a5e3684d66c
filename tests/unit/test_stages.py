"""Each stage of the router core alone, on frozen values: analyse, decide, plan, execute's hedge delay, respond."""

from __future__ import annotations

import dataclasses
import time

import pytest

from router.errors import AmbiguousRoute, ArgumentsRequired, NoRelevantBackend, ToolFailed, UnknownIntent
from router.models import AttemptInfo, QueryRequest
from router.request import Request
from router.retrieval.intent import IntentClassifier
from router.settings import ResilienceSettings
from router.stages.analyse import Analyser
from router.stages.decide import Decider, Live, View
from router.stages.execute import hedge_delay_ms
from router.stages.plan import plan
from router.stages.respond import respond
from router.stages.scoring import ANY_INTENT, PerfSnapshot
from router.stages.serving import Arguments
from router.strategies import StrategyResult
from router.values import Analysis, CallOutcome, Decision
from tests.unit.helpers import embed_texts, fake_embed
from tests.unit.router_world import ONLY_TIME, UNRELATED, Stats, query, world


async def analysis_of(question: str) -> Analysis:
    w = world()
    return await w.router.analyser.analyse(question, dense=True)


async def test_analyse_embeds_a_question_once_and_lets_an_override_replace_only_the_intent() -> None:
    calls: list[list[str]] = []

    async def embed(texts: list[str]):  # type: ignore[no-untyped-def]
        calls.append(texts)
        return embed_texts(texts)

    w = world()
    analyser = Analyser(w.router.analyser.classifier, embed, cache_size=16)
    first = await analyser.analyse(ONLY_TIME, dense=True)
    again = await analyser.analyse(ONLY_TIME, dense=True, intent="document-qa")
    assert calls == [[ONLY_TIME]]
    assert again.intent == "document-qa" and again.intent_source == "override"
    assert again.vector is first.vector
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.intent = "general"  # type: ignore[misc]
    with pytest.raises(UnknownIntent):
        await analyser.analyse(ONLY_TIME, dense=True, intent="astrology")


async def test_analyse_without_dense_retrieval_embeds_nothing() -> None:
    analyser = Analyser(IntentClassifier(world().router.settings.intents, {}), fake_embed, cache_size=4)
    assert (await analyser.analyse("hello", dense=False)).vector is None


async def test_decide_ranks_on_live_state_and_gives_a_verdict_without_calling_anything() -> None:
    w = world()
    decider = Decider(w.router.settings)
    stats = Stats()
    view = View(w.router.index, w.router.catalogs)
    d = decider.decide(await analysis_of(ONLY_TIME), view, Live(statuses=stats.statuses()),
                       Request(question=ONLY_TIME))
    assert d.verdict == "route" and d.candidates[0].capability.key == "time/tool/get_current_time"
    stats.health["time"] = "down"
    down = decider.decide(await analysis_of(ONLY_TIME), view, Live(statuses=stats.statuses()),
                          Request(question=ONLY_TIME))
    assert down.candidates[0].scores.health == 0.0 < d.candidates[0].scores.health
    assert w.executor.calls == []
    nothing = decider.decide(await analysis_of(UNRELATED), view, Live(statuses=stats.statuses()),
                             Request(question=UNRELATED))
    assert nothing.verdict == "no_match"


async def test_plan_turns_verdicts_and_missing_arguments_into_refusals_without_raising() -> None:
    w = world()
    decider = Decider(w.router.settings)
    statuses = Stats().statuses()
    d = decider.decide(await analysis_of(ONLY_TIME), View(w.router.index, w.router.catalogs), Live(statuses=statuses),
                       Request(question=ONLY_TIME))
    ok = plan(d, Arguments(Request(question=ONLY_TIME)), statuses, w.router.settings)
    assert ok.refusal is None and ok.calls[0].arguments == {"timezone": "Asia/Tokyo"} and ok.mode == "fallback"

    no_match = dataclasses.replace(d, verdict="no_match", message="nothing fits")
    assert isinstance(plan(no_match, Arguments(Request(question="x")), statuses, w.router.settings).refusal,
                      NoRelevantBackend)
    ambiguous = dataclasses.replace(d, verdict="ambiguous", message="too close")
    assert isinstance(plan(ambiguous, Arguments(Request(question="x")), statuses, w.router.settings).refusal,
                      AmbiguousRoute)
    only_time_tool = dataclasses.replace(d, candidates=d.candidates[:1])
    missing = plan(only_time_tool, Arguments(Request(question="what time is it")), statuses, w.router.settings)
    assert isinstance(missing.refusal, ArgumentsRequired) and missing.refusal.details["tool"] == "get_current_time"


def test_the_hedge_delay_comes_from_the_intents_history_else_the_backends_else_the_others_else_the_default() -> None:
    def snap(intent: str, count: int, p50: float, p95: float) -> PerfSnapshot:
        return PerfSnapshot(backend="b", intent=intent, count=count, success_rate_10=1.0, mean_latency_ms_10=p50,
                            success_rate=1.0, mean_latency_ms=p50, p95_latency_ms=p95, p95_latency_ms_10=p95,
                            p50_latency_ms=p50)

    res = ResilienceSettings()  # default 200 ms, at least 20 ms
    whole = snap(ANY_INTENT, 40, 20.0, 200.0)  # a slow tail: one call in ten takes ten times the median
    assert hedge_delay_ms({}, "b", "general", res) == 200.0
    assert hedge_delay_ms({("b", "general"): snap("general", 3, 50.0, 60.0)}, "b", "general", res) == 200.0
    # No history of its own: the longest delay of the backends that have one.
    others = {("x", ANY_INTENT): dataclasses.replace(whole, backend="x"),
              ("y", ANY_INTENT): dataclasses.replace(whole, backend="y", p50_latency_ms=10.0, p95_latency_ms=25.0),
              ("z", ANY_INTENT): dataclasses.replace(whole, backend="z", count=4, p95_latency_ms=900.0)}
    assert hedge_delay_ms({**others, ("b", ANY_INTENT): snap(ANY_INTENT, 4, 10.0, 11.0)}, "b", "general", res) == 60.0
    # Too few calls for this intent: the backend's whole history, whose tail is cut at three medians.
    assert hedge_delay_ms({("b", "general"): snap("general", 3, 50.0, 60.0), ("b", ANY_INTENT): whole},
                          "b", "general", res) == 60.0
    assert hedge_delay_ms({("b", "general"): snap("general", 5, 30.0, 40.0), ("b", ANY_INTENT): whole},
                          "b", "general", res) == 40.0
    assert hedge_delay_ms({("b", "general"): snap("general", 9, 5.0, 8.0)}, "b", "general", res) == 20.0


async def test_respond_names_a_single_failure_and_carries_the_stage_timings_of_a_success() -> None:
    w = world()
    asked = Request(question=ONLY_TIME)
    view = View(w.router.index, w.router.catalogs)
    d: Decision = Decider(w.router.settings).decide(await analysis_of(ONLY_TIME), view,
                                                    Live(statuses=Stats().statuses()), asked)
    call = plan(d, Arguments(asked), Stats().statuses(), w.router.settings).calls[0]
    failed = StrategyResult(outcome=None, call=None, attempts=[AttemptInfo(
        backend="time", capability="get_current_time", outcome="error", latency_ms=1.0, error_type="tool_failed",
        error="bad zone")])
    error = respond(failed, d, 0.0, asked)
    assert isinstance(error, ToolFailed) and "bad zone" in error.message

    outcome = CallOutcome(backend="time", capability="get_current_time", ok=True, latency_ms=2.0, text="12:00")
    stages = {"analyse": 1.0, "decide": 0.5, "plan": 0.1, "execute": 2.0}
    response = respond(StrategyResult(outcome=outcome, call=call, attempts=[]), d, time.monotonic(), asked, stages)
    assert not isinstance(response, Exception) and response.routing is not None
    assert list(response.routing.stages_ms) == ["analyse", "decide", "plan", "execute", "respond"]
    assert response.answer == "12:00" and response.routing.arguments == {"timezone": "Asia/Tokyo"}


async def test_a_query_reports_every_stage_once() -> None:
    response = await query(world().router, QueryRequest(question=ONLY_TIME))
    assert response.routing is not None
    assert set(response.routing.stages_ms) == {"analyse", "decide", "plan", "execute", "respond"}
    assert response.routing.decision_ms >= response.routing.stages_ms["decide"]
