"""Abstention: below `routing.min_confidence` the router declines (404) instead of guessing, a runner-up
is tried only when its own confidence clears the threshold, and a clearly right tool whose arguments
cannot be derived is a 422 naming it, not a weaker tool."""

from __future__ import annotations

import numpy as np
import pytest

from router.errors import ArgumentsRequired, NoRelevantBackend, RouterError
from router.models import QueryRequest, RouteRequest
from router.request import Request
from router.stages.confidence import FEATURES, ConfidenceModel
from tests.unit.fake_executor import fail
from tests.unit.router_world import BOTH_CLOCKS, ONLY_TIME, World, answers, query, route, world
from tests.unit.test_core import server_clock_catalogs


def model(**weights: float) -> ConfidenceModel:
    """A logistic model on raw features: `bias` plus the named features' weights."""
    k = len(FEATURES)
    coef = np.zeros(k)
    for name, w in weights.items():
        if name != "bias":
            coef[FEATURES.index(name)] = w
    return ConfidenceModel(np.zeros(k), np.ones(k), coef, weights.get("bias", 0.0), np.zeros(0), np.zeros(0), 0.5, {})


SURE = model(bias=10.0)  # every candidate ~1.0
UNSURE = model(bias=-10.0)  # every candidate ~0.0
ONLY_THE_LEADER = model(lead=400.0)  # the best by retrieval ~1.0, every runner-up ~0.0


def with_model(w: World, m: ConfidenceModel) -> World:
    w.router.decider.scorer.confidence = m
    return w


async def test_the_router_abstains_when_no_candidate_is_confident_enough() -> None:
    w = with_model(world(), UNSURE)
    dry = await route(w.router, RouteRequest(question=ONLY_TIME))
    assert dry.decision == "no_match"
    assert dry.confidence < 0.01 and dry.candidates  # the closest are still listed
    assert "time/tool/get_current_time" in dry.message and "routing.min_confidence" in dry.message
    with pytest.raises(NoRelevantBackend) as info:
        await query(w.router, QueryRequest(question=ONLY_TIME))
    assert info.value.status_code == 404
    assert info.value.details["candidates"][0]["scores"]["confidence"] < 0.01
    assert w.executor.calls == []


async def test_the_threshold_decides_between_answering_and_abstaining() -> None:
    m = model(bias=0.0)  # exactly 0.5 for every candidate
    sure = with_model(world(settings={"routing": {"min_confidence": 0.5}}), m)
    assert (await route(sure.router, RouteRequest(question=ONLY_TIME))).decision == "route"
    strict = with_model(world(settings={"routing": {"min_confidence": 0.51}}), m)
    assert (await route(strict.router, RouteRequest(question=ONLY_TIME))).decision == "no_match"
    close = with_model(world(settings={"routing": {"min_confidence": 0.504}}), m)
    declined = await route(close.router, RouteRequest(question=ONLY_TIME))
    assert "has confidence 0.500 < routing.min_confidence 0.504" in declined.message  # not "0.50 < ... 0.50"


async def test_the_confidence_shows_in_the_route_and_the_routing_metadata() -> None:
    w = with_model(world(), ONLY_THE_LEADER)
    dry = await route(w.router, RouteRequest(question=ONLY_TIME))
    assert dry.decision == "route" and dry.confidence > 0.99
    assert dry.candidates[0].scores.confidence == dry.confidence
    assert all(c.scores.confidence < 0.01 for c in dry.candidates[1:])
    resp = await query(w.router, QueryRequest(question=ONLY_TIME))
    assert resp.routing is not None and resp.routing.chosen is not None
    assert resp.routing.confidence == resp.routing.chosen.scores.confidence > 0.99


async def test_a_runner_up_below_the_threshold_is_not_tried_when_the_best_fails() -> None:
    w = with_model(world(answers(time=fail("tool_failed", "bad zone"))), ONLY_THE_LEADER)
    with pytest.raises(RouterError):
        await query(w.router, QueryRequest(question=BOTH_CLOCKS))
    assert [c.backend for c in w.executor.calls] == ["time"]


async def test_a_confident_runner_up_is_still_the_fallback_when_the_best_fails() -> None:
    w = with_model(world(answers(time=fail("tool_failed", "bad zone"))), SURE)
    resp = await query(w.router, QueryRequest(question=BOTH_CLOCKS))
    assert resp.backend == "clock"
    assert [c.backend for c in w.executor.calls] == ["time", "clock"]


async def test_a_backend_that_is_down_still_falls_back_to_a_confident_runner_up() -> None:
    w = with_model(world(), SURE)
    w.stats.health["time"] = "down"
    resp = await query(w.router, QueryRequest(question=BOTH_CLOCKS))
    assert resp.backend == "clock"


async def test_a_clear_best_match_without_its_arguments_is_a_422_not_a_weaker_tool() -> None:
    # "What time is it" names no time zone: get_current_time cannot be called; server_time could be,
    # and is within any margin, but the router is not confident that it is what was asked for.
    w = with_model(world(settings={"routing": {"callable_margin": 1.0}}, catalogs=server_clock_catalogs()),
                   ONLY_THE_LEADER)
    decision = await w.router.decide(Request(question="What time is it"))
    assert [c.capability.name for c in decision.candidates[:2]] == ["get_current_time", "server_time"]
    with pytest.raises(ArgumentsRequired) as info:
        await query(w.router, QueryRequest(question="What time is it"))
    assert info.value.status_code == 422
    assert info.value.details["tool"] == "get_current_time" and info.value.details["missing"] == "timezone"
    assert info.value.details["input_schema"]["required"] == ["timezone"]
    assert w.executor.calls == []


async def test_a_confident_close_runner_up_is_called_when_the_best_needs_arguments() -> None:
    w = with_model(world(settings={"routing": {"callable_margin": 1.0}}, catalogs=server_clock_catalogs()), SURE)
    resp = await query(w.router, QueryRequest(question="What time is it"))
    assert (resp.backend, resp.capability) == ("clock", "server_time")


async def test_a_backend_named_by_the_caller_is_called_whatever_the_confidence() -> None:
    w = with_model(world(), UNSURE)
    resp = await query(w.router, QueryRequest(question=ONLY_TIME, backend="time"))
    assert resp.backend == "time"


@pytest.mark.parametrize("question", ["÷Ø", "🙂🙂", "?!", "x y z"])
async def test_a_question_without_a_word_or_a_number_is_declined_however_sure_retrieval_is(question: str) -> None:
    # Whatever such a question is closest to is chance; a tool called for it answers noise or an error.
    w = with_model(world(), SURE)
    dry = await route(w.router, RouteRequest(question=question))
    assert (dry.decision, dry.status, dry.calls) == ("no_match", 404, [])
    with pytest.raises(NoRelevantBackend, match="no word and no number") as info:
        await query(w.router, QueryRequest(question=question))
    assert info.value.message == dry.message and w.executor.calls == []
    # A caller who names the tool is not second-guessed, and a number is something to route by.
    named = await query(w.router, QueryRequest(question=question, backend="time", tool="get_current_time",
                                               arguments={"timezone": "UTC"}))
    assert named.capability == "get_current_time"
    assert (await route(w.router, RouteRequest(question="2+2"))).status != 404
