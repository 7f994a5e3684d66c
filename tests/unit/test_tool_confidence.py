"""Which tool of a likely backend: the tool-level confidence, the 409 that asks which tool was meant,
and, with an LLM, the model's choice where retrieval could not settle it (no Ray, no model)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np
import pytest

from router.errors import AmbiguousRoute, NoRelevantBackend, UnknownCapability
from router.llm.client import Choice, ServerCandidate
from router.models import QueryRequest, RouteRequest
from router.request import Request
from router.settings import RoutingSettings
from router.stages.confidence import SHIPPED_TOOL, TOOL_FEATURES, ConfidenceModel, tool_features
from router.stages.settle import FOR_READING
from router.values import Capability
from tests.unit.fake_executor import ok
from tests.unit.helpers import TIMEZONE_SCHEMA, catalog, small_catalogs
from tests.unit.router_world import ONLY_TIME, World, answers, query, route, world
from tests.unit.test_abstention import SURE, UNSURE, with_model
from tests.unit.test_confidence import S

NO_ARGS = {"type": "object", "properties": {}}
NOTES = catalog("notes", "personal notes: remember what the user says and recall it",
                *(Capability(backend="notes", name=name, description=text, input_schema=NO_ARGS, read_only=True)
                  for name, text in (
                    ("list_notes", "List every note"),
                    ("clear_notes", "Delete every note"),
                    ("count_notes", "Count the notes"))))
QUESTION = "what notes do I have"


def tool_model(bias: float, **weights: float) -> ConfidenceModel:
    k = len(TOOL_FEATURES)
    coef = np.zeros(k)
    for name, w in weights.items():
        coef[TOOL_FEATURES.index(name)] = w
    return ConfidenceModel(np.zeros(k), np.ones(k), coef, bias, np.zeros(0), np.zeros(0), 0.5, {}, TOOL_FEATURES)


TOOL_SURE, TOOL_UNSURE = tool_model(10.0), tool_model(-10.0)


def notes_world(tools: ConfidenceModel, backends: ConfidenceModel = SURE, **settings: object) -> World:
    w = with_model(world(answers(notes=ok("answer from notes")), catalogs=[NOTES, *small_catalogs()],
                         settings=settings), backends)
    w.router.decider.scorer.tool_confidence = tools
    return w


class Chooser:
    """Stands in for the LLM client's `choose_server`: answers what the test says, records what it saw."""

    def __init__(self, choice: Choice) -> None:
        self.choice = choice
        self.seen: list[Sequence[ServerCandidate]] = []

    async def choose_server(self, question: str, candidates: Sequence[ServerCandidate]) -> Choice:
        self.seen.append(candidates)
        return self.choice


def column(rows: np.ndarray, name: str) -> np.ndarray:
    return rows[:, TOOL_FEATURES.index(name)]


# -- the features and the shipped parameters --------------------------------------------------


def test_tool_features_describe_a_candidate_among_its_own_backends_others() -> None:
    scores = [S(0.6, 8.0, 0.9), S(0.5, 9.0, 0.8), S(0.2, 1.0, 0.3), S(0.1, 0.0, 0.2)]
    rows = tool_features(scores, ["a", "b", "a", "c"], {"a": 4, "b": 1, "c": 2})
    # a's best leads a's other candidate, not b's; b and c are alone, so the lead is over the last one.
    assert column(rows, "tool_lead") == pytest.approx([0.6, 0.6, -0.6, 0.0])
    assert column(rows, "tool_dense_lead") == pytest.approx([0.4, 0.4, -0.4, 0.0])
    assert column(rows, "log_tools") == pytest.approx(np.log([4, 1, 4, 2]))
    assert column(rows, "tools_in_top") == pytest.approx([1 / 3, 0.0, 1 / 3, 0.0])
    assert column(rows, "bm25_scaled") == pytest.approx(np.array([8.0, 9.0, 1.0, 0.0]) / np.log1p(7))


def test_the_shipped_tool_model_loads_and_the_default_threshold_is_its_own() -> None:
    model = ConfidenceModel.shipped_tool()
    assert model.names == TOOL_FEATURES and model.coef.shape == (len(TOOL_FEATURES),)
    assert RoutingSettings().min_tool_confidence == pytest.approx(model.threshold)
    assert json.loads(SHIPPED_TOOL.read_text())["features"] == list(TOOL_FEATURES)
    with pytest.raises(ValueError, match="features"):
        ConfidenceModel.from_json(model.to_json())  # tool parameters are not backend-level ones


def test_the_shipped_tool_model_is_surer_the_further_a_tool_leads_its_backends_others() -> None:
    model = ConfidenceModel.shipped_tool()
    sizes = {"a": 5}
    previous = -1.0
    for gap in np.linspace(0.0, 0.5, 11):
        rows = tool_features([S(0.5, 4.0, 0.6), S(0.5 - gap, 4.0, 0.6 - gap)], ["a", "a"], sizes)
        p = float(model.predict(rows)[0])
        assert p >= previous - 1e-12
        previous = p
    tie = float(model.predict(tool_features([S(0.5, 4.0, 0.6), S(0.5, 4.0, 0.6)], ["a", "a"], sizes))[0])
    assert previous > tie


# -- the decision -------------------------------------------------------------------------------


async def test_a_likely_backend_whose_tools_are_not_told_apart_is_a_409_listing_them() -> None:
    w = notes_world(TOOL_UNSURE)
    dry = await route(w.router, RouteRequest(question=QUESTION))
    assert dry.decision == "ambiguous" and "backend 'notes' fits" in dry.message
    assert "routing.min_tool_confidence" in dry.message
    with pytest.raises(AmbiguousRoute) as info:
        await query(w.router, QueryRequest(question=QUESTION))
    listed = info.value.details["candidates"]
    assert info.value.status_code == 409
    assert {c["backend"] for c in listed} == {"notes"} and len(listed) == 3
    assert all(c["scores"]["tool_confidence"] < 0.01 for c in listed)
    assert w.executor.calls == []  # neither a guess among its tools nor a weaker backend


async def test_a_clear_tool_of_a_likely_backend_is_called() -> None:
    w = notes_world(TOOL_SURE)
    resp = await query(w.router, QueryRequest(question=QUESTION))
    assert resp.backend == "notes"
    assert resp.routing is not None and resp.routing.chosen is not None
    assert resp.routing.chosen.scores.tool_confidence > 0.99


async def test_a_named_backend_is_called_on_its_best_tool_unless_that_acts_on_a_guess() -> None:
    def notes_on_echo(read_only: bool) -> World:  # the notes tools, served by a configured backend
        tools = (dataclasses.replace(c, backend="echo", read_only=read_only) for c in NOTES.capabilities)
        w = with_model(world(catalogs=[*small_catalogs()[:3], catalog("echo", NOTES.description, *tools)]), SURE)
        w.router.decider.scorer.tool_confidence = TOOL_UNSURE
        return w

    w = notes_on_echo(read_only=True)
    assert (await query(w.router, QueryRequest(question=QUESTION, backend="echo"))).backend == "echo"
    w = notes_on_echo(read_only=False)
    with pytest.raises(AmbiguousRoute, match="may change something"):
        await query(w.router, QueryRequest(question=QUESTION, backend="echo"))
    assert w.executor.calls == []


async def test_a_named_tool_is_not_in_doubt() -> None:
    w = notes_world(TOOL_UNSURE)
    resp = await query(w.router, QueryRequest(question=QUESTION, tool="count_notes"))
    assert (resp.backend, resp.capability) == ("notes", "count_notes")


async def test_a_named_tool_below_the_cut_is_found_on_whichever_backend_has_it() -> None:
    one = {"max_attempts": 1, "parallel_k": 1, "consensus_k": 1}
    w = with_model(world(settings={"routing": {"candidates": 1}, "resilience": one}), SURE)
    resp = await query(w.router, QueryRequest(question=ONLY_TIME, tool="multiply",  # below the 2 kept
                                                 arguments={"a": 2, "b": 3}))
    assert (resp.backend, resp.capability) == ("calc", "multiply")
    with pytest.raises(UnknownCapability, match="no backend has a tool, prompt, resource or flow named 'divide'"):
        await query(w.router, QueryRequest(question=ONLY_TIME, tool="divide"))


async def test_a_backend_with_one_capability_leaves_no_doubt_which() -> None:
    w = with_model(world(), SURE)
    w.router.decider.scorer.tool_confidence = TOOL_UNSURE
    dry = await route(w.router, RouteRequest(question="What time is it in Tokyo?"))
    assert dry.decision == "route" and dry.candidates[0].backend in ("time", "clock")
    assert dry.candidates[0].scores.tool_confidence == 1.0


async def test_the_threshold_decides_between_calling_and_asking_which_tool() -> None:
    half = tool_model(0.0)  # exactly 0.5 for every tool
    assert (await route(notes_world(half, routing={"min_tool_confidence": 0.5}).router,
        RouteRequest(question=QUESTION))).decision == "route"
    assert (await route(notes_world(half, routing={"min_tool_confidence": 0.51}).router,
        RouteRequest(question=QUESTION))).decision == "ambiguous"


ZONES = catalog("zones", "time zones: the current time anywhere, and converting times between zones",
                Capability(backend="zones", name="current_time", description="Current time in a time zone",
                           input_schema=TIMEZONE_SCHEMA, read_only=True),
                Capability(backend="zones", name="convert_time", description="Convert a time between time zones",
                           read_only=True,
                           input_schema={"type": "object", "required": ["source_timezone", "time", "target_timezone"],
                                         "properties": {"source_timezone": {"type": "string"},
                                                        "time": {"type": "string", "description": "HH:MM"},
                                                        "target_timezone": {"type": "string"}}}))


async def test_of_a_backends_unclear_tools_the_one_the_questions_values_fit_is_called() -> None:
    w = with_model(world(answers(zones=ok("11:00 in Tokyo")), catalogs=[ZONES, *small_catalogs()[2:]]), SURE)
    w.router.decider.scorer.tool_confidence = TOOL_UNSURE
    asked = RouteRequest(question="What time is it in Tokyo?")
    assert (await w.router.decide(Request.dry_run(asked))).verdict == "ambiguous"  # retrieval alone cannot tell
    shown = await route(w.router, asked)  # the dry run shows what the query then does
    assert (shown.decision, shown.status, shown.calls) == ("route", 200, ["zones/current_time"])
    resp = await query(w.router, QueryRequest(question="What time is it in Tokyo?"))
    assert (resp.backend, resp.capability) == ("zones", "current_time")
    assert w.executor.calls[0].arguments == {"timezone": "Asia/Tokyo"}
    assert resp.routing is not None and resp.routing.arguments_source == "extracted: timezone"
    # Without a city neither tool takes the question: still a question of which tool.
    with pytest.raises(AmbiguousRoute):
        await query(w.router, QueryRequest(question="What time is it?"))


# -- with an LLM ----------------------------------------------------------------------------------


def with_llm(w: World, choice: Choice) -> Chooser:
    chooser = Chooser(choice)
    w.router.llm = chooser  # type: ignore[assignment]
    return chooser


async def test_the_model_picks_the_tool_retrieval_could_not_tell_and_it_is_called() -> None:
    w = notes_world(TOOL_UNSURE)
    chooser = with_llm(w, Choice("server", server="notes", tool="count_notes", reasoning="counting"))
    resp = await query(w.router, QueryRequest(question=QUESTION))
    assert (resp.backend, resp.capability) == ("notes", "count_notes")
    assert resp.routing is not None and resp.routing.decision == "llm"
    offered = {name: tools for name, _, tools in chooser.seen[0]}
    assert sorted(offered["notes"]) == ["clear_notes", "count_notes", "list_notes"]


async def test_the_dry_run_says_the_model_would_be_asked_and_does_not_ask_it() -> None:
    w = notes_world(TOOL_UNSURE)
    chooser = with_llm(w, Choice("server", server="notes", tool="count_notes", reasoning="counting"))
    shown = await route(w.router, RouteRequest(question=QUESTION))
    assert (shown.decision, shown.status) == ("ambiguous", 409)  # retrieval's own answer
    assert shown.message.endswith("/v1/query would first ask the configured LLM to choose among the candidates")
    assert chooser.seen == []


async def test_a_server_the_model_picks_without_a_tool_still_asks_which_tool() -> None:
    w = notes_world(TOOL_UNSURE)
    with_llm(w, Choice("server", server="notes", reasoning="a notes question"))
    with pytest.raises(AmbiguousRoute) as info:
        await query(w.router, QueryRequest(question=QUESTION))
    assert "not one of its tools" in info.value.message
    assert {c["backend"] for c in info.value.details["candidates"]} == {"notes"}
    assert w.executor.calls == []


async def test_a_server_the_model_picks_without_a_tool_does_not_make_its_likeliest_tool_act_on_a_guess() -> None:
    writers = catalog("notes", NOTES.description,
                      *(dataclasses.replace(c, read_only=False) for c in NOTES.capabilities))
    w = with_model(world(answers(notes=ok("done")), catalogs=[writers, *small_catalogs()]), UNSURE)
    w.router.decider.scorer.tool_confidence = tool_model(-0.4)  # 0.4: clear enough to read, not to act
    with_llm(w, Choice("server", server="notes", reasoning="a notes question"))
    with pytest.raises(AmbiguousRoute, match="not one of its tools"):
        await query(w.router, QueryRequest(question=QUESTION))
    assert w.executor.calls == []
    w = notes_world(tool_model(-0.4), backends=UNSURE)  # the same tools, only reading: the model's server is enough
    with_llm(w, Choice("server", server="notes", reasoning="a notes question"))
    assert (await query(w.router, QueryRequest(question=QUESTION))).backend == "notes"


async def test_when_nothing_is_likely_enough_the_model_may_choose_among_the_closest() -> None:
    w = notes_world(TOOL_SURE, backends=UNSURE)
    chooser = with_llm(w, Choice("server", server="notes", tool="list_notes", reasoning="notes"))
    resp = await query(w.router, QueryRequest(question=QUESTION))
    assert (resp.backend, resp.capability) == ("notes", "list_notes")
    assert chooser.seen  # the closest candidates were offered although none reached the threshold


async def test_a_call_taking_nothing_from_the_question_that_the_model_chose_is_made() -> None:
    # Without a model, an argument-free tool on a weak match is not called for a word it does not name ("Paris");
    # a model that read the question and chose it is not second-guessed.
    question = "what notes do I have about Paris"
    weak = notes_world(TOOL_SURE, backends=UNSURE, routing={"min_confidence": 0.0})
    with pytest.raises(NoRelevantBackend, match=r"takes nothing from the question.* about 'paris'"):
        await query(weak.router, QueryRequest(question=question))
    w = notes_world(TOOL_SURE, backends=UNSURE)
    with_llm(w, Choice("server", server="notes", tool="list_notes", reasoning="notes"))
    resp = await query(w.router, QueryRequest(question=question))
    assert (resp.backend, resp.capability) == ("notes", "list_notes")


async def test_when_nothing_is_likely_enough_the_model_may_agree_or_ask() -> None:
    w = notes_world(TOOL_SURE, backends=UNSURE)
    with_llm(w, Choice("none", reasoning="nothing here bakes bread"))
    with pytest.raises(NoRelevantBackend, match="nothing here bakes bread"):
        await query(w.router, QueryRequest(question=QUESTION))
    with_llm(w, Choice("ambiguous", question="Your notes or the time?", reasoning="both"))
    with pytest.raises(NoRelevantBackend, match="Your notes or the time"):
        await query(w.router, QueryRequest(question=QUESTION))
    assert w.executor.calls == []


MEMO = catalog("memo", "a memo pad: remember what the user says and recall it later",
               Capability(backend="memo", name="recall_memos", description="Recall what was remembered",
                          input_schema=NO_ARGS, read_only=True),
               Capability(backend="memo", name="add_memo", description="Add a memo", input_schema=NO_ARGS))
REMEMBER = "Remember that the meeting moved to Friday"


def memo_world(**settings: object) -> World:
    w = with_model(world(answers(memo=ok("noted")), catalogs=[MEMO, *small_catalogs()], settings=settings), SURE)
    w.router.decider.scorer.tool_confidence = TOOL_SURE
    return w


async def test_asked_to_remember_the_reader_gives_way_to_the_tools_that_may_store_it() -> None:
    w = memo_world()
    decided = await w.router.decide(Request.dry_run(RouteRequest(question=REMEMBER)))
    assert decided.verdict == "route" and decided.candidates[0].capability.name == "recall_memos"  # it only reads
    shown = await route(w.router, RouteRequest(question=REMEMBER))
    assert (shown.decision, shown.status) == ("ambiguous", 409)
    assert shown.candidates[0].capability == "add_memo" and shown.candidates[0].placed
    with pytest.raises(AmbiguousRoute) as info:
        await query(w.router, QueryRequest(question=REMEMBER))
    assert "memo/tool/recall_memos, only reads" in info.value.message and "add_memo" in info.value.message
    assert [c["capability"] for c in info.value.details["candidates"]] == ["add_memo"]
    assert w.executor.calls == []  # nothing acts on a guess


@pytest.mark.parametrize("question", ["List the memos", "What memo is there?", "Please show the memo"])
async def test_a_question_that_only_asks_is_answered_by_the_reader_not_the_closer_writer(question: str) -> None:
    w = memo_world()
    w.router.decider.scorer.tool_confidence = tool_model(-0.4)  # 0.4: clear enough, too unsure to act on
    decided = await w.router.decide(Request.dry_run(RouteRequest(question=question)))
    assert decided.candidates[0].capability.name == "add_memo" and decided.candidates[0].unsure_action
    resp = await query(w.router, QueryRequest(question=question))
    assert (resp.capability, resp.routing.candidates[0].placed) == ("recall_memos", FOR_READING)
    assert [call.capability for call in w.executor.calls] == ["recall_memos"]
    with pytest.raises(AmbiguousRoute, match="add_memo may change something, and it is not likely enough"):
        await query(w.router, QueryRequest(question="Add a memo"))  # a request to act is still asked about


async def test_a_question_about_a_tool_its_server_says_may_act_does_not_call_it() -> None:
    # The memo server marks recall_memos read-only, so by its word add_memo may change something: a question that
    # only asks is not a request to add one, however sure retrieval is of the tool.
    w = memo_world()
    question = "What does add memo do?"
    decided = await w.router.decide(Request.dry_run(RouteRequest(question=question)))
    assert decided.candidates[0].capability.name == "add_memo" and decided.candidates[0].relevant
    shown = await route(w.router, RouteRequest(question=question))
    assert "add_memo" not in " ".join(shown.calls)
    ruled = next(c for c in shown.candidates if c.capability == "add_memo")
    assert ruled.ruled_out == "it may change something, and the question only asks ('what')"
    await query(w.router, QueryRequest(question=question))
    assert w.executor.calls and all(call.capability != "add_memo" for call in w.executor.calls)


async def test_with_an_llm_the_model_chooses_among_the_tools_that_may_store_it() -> None:
    w = memo_world()
    chooser = with_llm(w, Choice("server", server="memo", tool="add_memo", reasoning="to store it"))
    shown = await route(w.router, RouteRequest(question=REMEMBER))
    assert shown.message.endswith("/v1/query would first ask the configured LLM to choose among the candidates")
    resp = await query(w.router, QueryRequest(question=REMEMBER))
    assert (resp.backend, resp.capability, resp.answer) == ("memo", "add_memo", "noted")
    assert "add_memo" in {tool for _, _, tools in chooser.seen[0] for tool in tools}
