"""Feedback on a query's request id, through the router core with a local store, without Ray."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from router.errors import (
    FeedbackRefused,
    InvalidRequest,
    NoRelevantBackend,
    RouterError,
    ToolFailed,
    UnknownBackend,
    UnknownCapability,
    UnknownRequest,
)
from router.learning.decisions import (
    RecentDecision,
    chat_examples,
    chat_question,
    check_allowed,
    feedback_examples,
)
from router.learning.evidence import ExampleIndex
from router.learning.examples import Example, ExampleStore
from router.models import ChatRequest, ChatResponse, FeedbackRequest, QueryRequest, RouteRequest
from router.settings import LearningSettings, RouterSettings
from router.values import CapabilityId
from tests.unit.fake_executor import fail
from tests.unit.helpers import embed_texts, small_catalogs
from tests.unit.router_world import BOTH_CLOCKS, MIN_CONFIDENCE, ONLY_TIME, UNRELATED, answers, query, route, world


class LocalLearning:
    """A LearningView over an ExampleStore in one process."""

    def __init__(self, path: Path, settings: LearningSettings, min_confidence: float = MIN_CONFIDENCE) -> None:
        self.settings = settings
        self.min_confidence = min_confidence
        self.store = ExampleStore(path, settings.max_examples_per_capability)
        self.decisions: dict[str, RecentDecision] = {}
        self.examples = ExampleIndex([], settings, min_confidence)

    def index(self) -> ExampleIndex:
        return self.examples

    def remember(self, decision: RecentDecision) -> None:
        self.decisions[decision.request_id] = decision

    def learn(self, examples: Sequence[Example]) -> None:
        self.store.add(examples)
        self.examples = ExampleIndex(self.store.all(), self.settings, self.min_confidence)


CATALOGS = {c.backend: c for c in small_catalogs()}


def decision(**kw: Any) -> RecentDecision:
    return RecentDecision(request_id="r1", question="what time is it", vector=embed_texts(["what time is it"])[0],
                          chosen=CapabilityId("time", "tool", "get_current_time"),
                          candidates=(CapabilityId("time", "tool", "get_current_time"),
                                      CapabilityId("clock", "tool", "world_clock")), **kw)


async def test_feedback_on_a_request_id_changes_the_next_decision_for_a_similar_question(tmp_path: Path) -> None:
    w = world()
    learning = LocalLearning(tmp_path / "f.sqlite", LearningSettings(weight=1.0, min_similarity=0.3))
    w.router.learning = learning
    first = await query(w.router, QueryRequest(question=ONLY_TIME))
    assert first.backend == "time" and first.routing is not None and first.routing.request_id
    remembered = learning.decisions[first.routing.request_id]
    assert remembered.chosen == ("time", "tool", "get_current_time")
    examples = feedback_examples(remembered, FeedbackRequest(request_id=first.routing.request_id, correct=False,
                                                             backend="clock"), w.router.catalogs, None)
    learning.learn(examples)
    assert [(e.backend, e.label, e.source) for e in examples] == [("time", -1, "feedback"), ("clock", 1, "feedback")]
    assert {e.request_id for e in examples} == {first.routing.request_id}  # given again, it replaces these
    assert "world clock" in examples[1].document.lower()
    again = await query(w.router, QueryRequest(question="What time is it in Tokyo now?"))
    assert again.backend == "clock"
    assert again.routing is not None and again.routing.chosen is not None
    assert again.routing.chosen.scores.examples == 1 and again.routing.chosen.scores.learned > 0
    unrelated = await query(w.router, QueryRequest(question="add 2 and 40"))
    assert unrelated.backend == "calc"


async def test_a_failed_request_is_remembered_with_the_call_that_failed(tmp_path: Path) -> None:
    """The operators' list shows what was called (and an operator whose policy denies that tool does not see
    the row); feedback still treats it as a request nothing answered."""
    w = world(answers(calc=fail("tool_failed", "division by zero")))
    learning = LocalLearning(tmp_path / "f.sqlite", LearningSettings())
    w.router.learning = learning
    with pytest.raises(ToolFailed):
        await query(w.router, QueryRequest(question="add 3 and 4"))
    (remembered,) = learning.decisions.values()
    assert remembered.chosen is None and remembered.outcome == "failed"
    row = remembered.row()
    assert (row["backend"], row["capability"], row["error"]) == ("calc", "add", "tool_failed")
    assert row["calls"][0] == "calc/add"
    # Every call the plan held is listed, not the first alone: an operator must be allowed them all.
    both = world(answers(time=fail("backend_timeout"), clock=fail("backend_timeout")))
    both.router.learning = learning
    with pytest.raises(RouterError):
        await query(both.router, QueryRequest(question=BOTH_CLOCKS, arguments={"timezone": "Asia/Tokyo"}))
    failed = next(d for d in learning.decisions.values() if d.question == BOTH_CLOCKS).row()
    assert set(failed["calls"]) == {"time/get_current_time", "clock/world_clock"}


async def test_a_long_question_is_remembered_by_its_vector_and_its_first_characters(tmp_path: Path) -> None:
    """50,000 remembered decisions of questions at the request limit (32 KiB) would hold 1.6 GB."""
    w = world()
    learning = LocalLearning(tmp_path / "f.sqlite", LearningSettings())
    w.router.learning = learning
    long = ONLY_TIME + " " + "and tell me more " * 2000
    answer = await query(w.router, QueryRequest(question=long))
    assert answer.routing is not None
    remembered = learning.decisions[answer.routing.request_id]
    assert remembered.question == long[:2000] and remembered.vector is not None


async def test_routed_calls_become_examples_only_when_switched_on(tmp_path: Path) -> None:
    for on in (False, True):
        w = world(settings={"learning": {"learn_from_routed": on}})
        learning = LocalLearning(tmp_path / f"{on}.sqlite", LearningSettings())
        w.router.learning = learning
        await query(w.router, QueryRequest(question=ONLY_TIME))
        stored = learning.store.all()
        assert [(e.backend, e.source) for e in stored] == ([("time", "routed")] if on else [])


def test_correct_feedback_is_one_positive_example() -> None:
    out = feedback_examples(decision(principal="alice"), FeedbackRequest(request_id="r1", correct=True), CATALOGS,
                            "alice")
    assert [(e.key, e.label, e.principal) for e in out] == [("time/tool/get_current_time", 1, "alice")]


def test_feedback_on_another_principals_request_is_answered_as_an_unknown_request() -> None:
    with pytest.raises(UnknownRequest, match="request_id"):
        feedback_examples(decision(principal="alice"), FeedbackRequest(request_id="r1", correct=True), CATALOGS,
                          "bob")


def test_wrong_with_a_named_tool_is_a_negative_and_a_positive() -> None:
    out = feedback_examples(decision(), FeedbackRequest(request_id="r1", correct=False, tool="multiply"),
                            CATALOGS, None)
    assert [(e.key, e.label) for e in out] == [("time/tool/get_current_time", -1), ("calc/tool/multiply", 1)]


def test_bad_feedback_is_a_4xx_naming_the_field() -> None:
    cases = [
        (None, FeedbackRequest(request_id="nope", correct=True), UnknownRequest, "request_id"),
        (decision(), FeedbackRequest(request_id="r1", correct=False, backend="nowhere"), UnknownBackend, "backend"),
        (decision(), FeedbackRequest(request_id="r1", correct=False, backend="calc", tool="divide"),
         UnknownCapability, "tool"),
        (decision(), FeedbackRequest(request_id="r1", correct=True, backend="calc"), InvalidRequest, "backend"),
        (decision(), FeedbackRequest(request_id="r1", correct=False, backend="calc"), InvalidRequest, "tool"),
        (decision(), FeedbackRequest(request_id="r1", correct=False, backend="time"), InvalidRequest, "backend"),
    ]
    for remembered, req, error, field in cases:
        with pytest.raises(error) as info:
            feedback_examples(remembered, req, CATALOGS, None)
        assert field in info.value.message and 400 <= info.value.status_code < 500


def test_the_tools_an_llm_called_successfully_become_positive_examples_of_the_last_user_turn() -> None:
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                                    {"role": "user", "content": "what is 2 times 3"}])
    response = ChatResponse(answer="6", servers=["calc"], turns=2, max_turns_reached=False, reroute=False,
                            selection={}, tool_calls=[
                                {"backend": "calc", "capability": "multiply", "ok": True},
                                {"backend": "calc", "capability": "multiply", "ok": True},
                                {"backend": "calc", "capability": "add", "ok": False}])
    out = chat_examples(request, response, embed_texts(["what is 2 times 3"])[0], CATALOGS, None)
    assert [(e.key, e.label, e.source, e.question) for e in out] == [
        ("calc/tool/multiply", 1, "chat", "what is 2 times 3")]


def test_a_chat_turn_of_content_parts_is_learned_as_its_text_and_no_longer_than_a_remembered_question() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 900_000}}
    for content, question in (([{"type": "text", "text": "what is 2 times 3"}, image], "what is 2 times 3"),
                              ("x" * 60_000, "x" * 2000)):
        request = ChatRequest(messages=[{"role": "user", "content": content}])
        assert chat_question(request) == question
    # A last turn of an image alone teaches nothing: its tools were called for it, not for the turn before.
    images_last = ChatRequest(messages=[{"role": "user", "content": "what is 2 times 3"},
                                        {"role": "assistant", "content": "6"}, {"role": "user", "content": [image]}])
    assert chat_question(images_last) == ""
    assert chat_question(ChatRequest(messages=[{"role": "user", "content": [image]}])) == ""


def test_feedback_is_refused_with_403_when_the_switch_is_off() -> None:
    off = RouterSettings.model_validate({"learning": {"accept_feedback": False}})
    with pytest.raises(FeedbackRefused) as info:
        check_allowed(off)
    assert info.value.status_code == 403 and "accept_feedback" in info.value.message
    check_allowed(RouterSettings())  # loopback by default: taken


async def test_a_capability_retrieval_ranks_below_the_cut_competes_when_examples_vouch_for_it(tmp_path: Path) -> None:
    narrow = {"routing": {"candidates": 1},
              "resilience": {"max_attempts": 1, "parallel_k": 1, "consensus_k": 1}}  # retrieval keeps 2
    w = world(settings=narrow)
    question = "add 2 and 40"
    plain = await route(w.router, RouteRequest(question=question, k=1))
    assert plain.candidates[0].backend == "calc"
    ranked = w.router.index.search(question, embed_texts([question])[0], 2) if w.router.index else []
    assert "echo" not in {r.capability.backend for r in ranked}
    learning = LocalLearning(tmp_path / "f.sqlite", LearningSettings(weight=2.0, min_similarity=0.3))
    # A correction: the calculator was wrong for this very question, echo right (a confirmation of echo
    # alone would not displace a backend nobody has judged).
    learning.learn([Example(backend="calc", kind="tool", name="add", label=-1, question=question,
                            vector=embed_texts([question])[0]),
                    Example(backend="echo", kind="tool", name="echo", label=1, question=question,
                            vector=embed_texts([question])[0])])
    w.router.learning = learning
    learned = await route(w.router, RouteRequest(question=question, k=1))
    top = learned.candidates[0]
    assert (top.backend, top.capability) == ("echo", "echo") and top.scores.learned == pytest.approx(2.0)
    # It enters at the cut's retrieval score: only its examples lift it.
    assert top.scores.match == pytest.approx(min(r.score for r in ranked) + 2.0, abs=1e-3)


async def test_a_declined_question_carries_a_request_id_and_feedback_names_what_should_have_answered(
        tmp_path: Path) -> None:
    w = world()
    learning = LocalLearning(tmp_path / "f.sqlite", LearningSettings())
    w.router.learning = learning
    with pytest.raises(NoRelevantBackend) as info:
        await query(w.router, QueryRequest(question=UNRELATED))
    request_id = info.value.details["request_id"]
    remembered = learning.decisions[request_id]
    assert remembered.chosen is None and remembered.candidates
    assert remembered.retrieval_confidence is not None and remembered.retrieval_confidence < MIN_CONFIDENCE
    out = feedback_examples(remembered, FeedbackRequest(request_id=request_id, correct=False, backend="echo"),
                            w.router.catalogs, None)
    # What should have answered, and that the closest candidate was not it.
    assert [(e.key, e.label) for e in out] == [("echo/tool/echo", 1), (remembered.candidates[0].key, -1)]
    # Where retrieval was unsure: the example counts towards a learned default.
    assert out[0].top_confidence == remembered.retrieval_confidence
    with pytest.raises(InvalidRequest, match="called nothing"):
        feedback_examples(remembered, FeedbackRequest(request_id=request_id, correct=True), w.router.catalogs, None)
    with pytest.raises(InvalidRequest, match="called nothing"):
        feedback_examples(remembered, FeedbackRequest(request_id=request_id, correct=False), w.router.catalogs, None)


async def test_examples_record_how_sure_retrieval_was_when_they_were_given(tmp_path: Path) -> None:
    w = world()
    learning = LocalLearning(tmp_path / "f.sqlite", LearningSettings())
    w.router.learning = learning
    answer = await query(w.router, QueryRequest(question=ONLY_TIME))
    assert answer.routing is not None and answer.routing.request_id and answer.routing.chosen is not None
    remembered = learning.decisions[answer.routing.request_id]
    [confirmed] = feedback_examples(remembered, FeedbackRequest(request_id=answer.routing.request_id, correct=True),
                                    w.router.catalogs, None)
    assert confirmed.confidence == pytest.approx(answer.routing.chosen.scores.confidence)
    assert confirmed.top_confidence == pytest.approx(remembered.retrieval_confidence)


async def test_a_backend_nobody_judged_keeps_its_questions_from_one_taught_for_similar_ones(tmp_path: Path) -> None:
    w = world()
    learning = LocalLearning(tmp_path / "f.sqlite", LearningSettings(weight=4.0, min_similarity=0.3))
    w.router.learning = learning
    assert (await route(w.router, RouteRequest(question=ONLY_TIME))).candidates[0].backend == "time"
    # The world clock was confirmed for a similar question; the time server was never judged.
    learning.learn([Example(backend="clock", kind="tool", name="world_clock", label=1, question="local time Tokyo",
                            vector=embed_texts(["What is the local time in Tokyo now?"])[0])])
    dry = await route(w.router, RouteRequest(question=ONLY_TIME))
    clock = next(c for c in dry.candidates if c.backend == "clock")
    assert dry.candidates[0].backend == "time" and clock.scores.learned > 0
    assert clock.scores.match > dry.candidates[0].scores.match  # the examples alone would have swapped them
    # Once the time server is judged wrong for this very question, the examples decide.
    learning.learn([Example(backend="time", kind="tool", name="get_current_time", label=-1, question=ONLY_TIME,
                            vector=embed_texts([ONLY_TIME])[0])])
    assert (await route(w.router, RouteRequest(question=ONLY_TIME))).candidates[0].backend == "clock"
