from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from router.retrieval.catalog import Ranked
from router.retrieval.hybrid import Hit
from router.settings import RoutingSettings, ScoreWeights
from router.stages.confidence import FEATURES, ConfidenceModel
from router.stages.decide import too_close
from router.stages.scoring import (
    ANY_INTENT,
    PerfSnapshot,
    Scorer,
    health_score,
    lookup_perf,
    perf_score,
)
from router.values import BackendStatus, Capability


def ranked(
    backend: str,
    score: float,
    *,
    name: str | None = None,
    dense: float = 0.5,
    bm25: float = 1.0,
    intents: tuple[str, ...] = (),
    read_only: bool = True,
) -> Ranked:
    # Each backend's tool is a different one unless a test names them alike (then they are copies).
    cap = Capability(backend=backend, name=name or f"t_{backend}", intents=intents, read_only=read_only)
    return Ranked(cap, Hit(0, dense, bm25, dense, 1.0 if bm25 else 0.0, score), score)


def dense_model(at: float) -> ConfidenceModel:
    """A model whose confidence depends only on the cosine: 0.5 at `at`, steep around it."""
    coef = np.zeros(len(FEATURES))
    coef[FEATURES.index("dense")] = 40.0
    k = len(FEATURES)
    return ConfidenceModel(np.zeros(k), np.ones(k), coef, -40.0 * at, np.zeros(0), np.zeros(0), 0.5, {})


def status(name: str, health: str) -> BackendStatus:
    return BackendStatus(name=name, kind="mcp_stdio", transport="stdio", health=health)  # type: ignore[arg-type]


def snap(
    backend: str, intent: str = ANY_INTENT, *, count: int = 10, rate: float = 1.0, mean_ms: float = 0.0
) -> PerfSnapshot:
    return PerfSnapshot(
        backend=backend,
        intent=intent,
        count=count,
        success_rate_10=rate,
        mean_latency_ms_10=mean_ms,
        success_rate=rate,
        mean_latency_ms=mean_ms,
        p95_latency_ms=mean_ms,
        p95_latency_ms_10=mean_ms,
    )


def test_perf_score_is_point_five_without_history() -> None:
    assert perf_score(None) == 0.5
    assert perf_score(snap("a", count=0, rate=0.0, mean_ms=9999)) == 0.5


@pytest.mark.parametrize(
    ("rate", "mean_ms", "expected"),
    [
        (1.0, 0.0, 1.0),
        (0.8, 1000.0, 0.7 * 0.8 + 0.3 * 0.8),
        (0.5, 2500.0, 0.7 * 0.5 + 0.3 * 0.5),
        (1.0, 10_000.0, 0.7),  # latency penalty is capped at 5 s
        (0.0, 5000.0, 0.0),
    ],
)
def test_perf_score_blends_recent_success_rate_and_latency(
    rate: float, mean_ms: float, expected: float
) -> None:
    s = snap("a", rate=rate, mean_ms=mean_ms)
    assert perf_score(s) == pytest.approx(expected)
    assert s.score == pytest.approx(expected)


@pytest.mark.parametrize(
    ("health", "expected"),
    [("healthy", 1.0), ("degraded", 0.5), ("starting", 0.5), ("down", 0.0), ("ejected", 0.0)],
)
def test_health_score_by_state(health: str, expected: float) -> None:
    assert health_score(status("a", health)) == expected


def test_unknown_health_scores_point_five() -> None:
    assert health_score(None) == 0.5


def test_lookup_perf_prefers_the_intent_and_falls_back_to_all_intents() -> None:
    per_intent = snap("a", "code-review", rate=0.2)
    overall = snap("a", ANY_INTENT, rate=0.9)
    perf = {
        ("a", "code-review"): per_intent,
        ("a", ANY_INTENT): overall,
        ("a", "general"): snap("a", "general", count=0),
    }
    assert lookup_perf(perf, "a", "code-review") is per_intent
    assert lookup_perf(perf, "a", "document-qa") is overall
    assert lookup_perf(perf, "a", "general") is overall  # an empty per-intent history does not count
    assert lookup_perf(perf, "b", "general") is None


def test_composite_uses_default_weights_half_match_three_tenths_health_one_fifth_perf() -> None:
    settings = RoutingSettings()
    perf = {("a", ANY_INTENT): snap("a", rate=0.8, mean_ms=1000.0)}
    [c] = Scorer(settings).score([ranked("a", 0.6)], "general", {"a": status("a", "degraded")}, perf)
    p = 0.7 * 0.8 + 0.3 * 0.8
    assert c.scores.match == pytest.approx(0.6)
    assert c.scores.health == 0.5
    assert c.scores.perf == pytest.approx(p, abs=1e-4)
    assert c.scores.composite == pytest.approx(0.5 * 0.6 + 0.3 * 0.5 + 0.2 * p, abs=1e-4)


def test_custom_weights_change_the_composite() -> None:
    settings = RoutingSettings(weights=ScoreWeights(match=1.0, health=0.0, perf=0.0))
    [c] = Scorer(settings).score([ranked("a", 0.42)], "general", {"a": status("a", "down")}, {})
    assert c.scores.composite == pytest.approx(0.42)


def test_intent_bonus_applies_when_backend_or_capability_declares_the_intent() -> None:
    settings = RoutingSettings(intent_bonus=0.1)
    scorer = Scorer(settings, backend_intents={"a": ("code-review",), "c": ("general",)})
    candidates = scorer.score([ranked("a", 0.5, name="x"), ranked("b", 0.5, name="y", intents=("code-review",)),
                               ranked("c", 0.5)], "code-review", {}, {})
    by_backend = {c.capability.backend: c.scores for c in candidates}
    assert by_backend["a"].intent_bonus == 0.1 and by_backend["a"].match == pytest.approx(0.6)
    assert by_backend["b"].intent_bonus == 0.1
    assert by_backend["c"].intent_bonus == 0.0 and by_backend["c"].match == pytest.approx(0.5)
    assert candidates[-1].capability.backend == "c"


def test_a_failing_backend_ranks_below_an_equally_relevant_healthy_one() -> None:
    settings = RoutingSettings()
    statuses = {"flaky": status("flaky", "healthy"), "solid": status("solid", "healthy")}
    perf = {
        ("flaky", ANY_INTENT): snap("flaky", rate=0.1, mean_ms=4000.0),
        ("solid", ANY_INTENT): snap("solid", rate=1.0, mean_ms=50.0),
    }
    out = Scorer(settings).score([ranked("flaky", 0.9), ranked("solid", 0.9)], "general", statuses, perf)
    assert [c.capability.backend for c in out] == ["solid", "flaky"]


def test_a_down_backend_ranks_below_an_equally_relevant_healthy_one() -> None:
    statuses = {"down1": status("down1", "down"), "up1": status("up1", "healthy")}
    out = Scorer(RoutingSettings()).score([ranked("down1", 0.9), ranked("up1", 0.9)], "general", statuses, {})
    assert [c.capability.backend for c in out] == ["up1", "down1"]
    assert out[0].scores.composite - out[1].scores.composite == pytest.approx(0.3, abs=1e-4)


def test_score_breakdown_reports_the_retrieval_components() -> None:
    r = Ranked(Capability(backend="a", name="t"), Hit(0, 0.81234, 3.21, 0.9, 0.7, 0.82), 0.82)
    [c] = Scorer(RoutingSettings()).score([r], "general", {}, {})
    s = c.scores
    assert (s.dense, s.bm25, s.dense_norm, s.bm25_norm, s.hybrid) == (0.8123, 3.21, 0.9, 0.7, 0.82)
    info = c.info(1)
    assert (info.rank, info.backend, info.capability, info.kind) == (1, "a", "t", "tool")


def test_match_is_the_blended_retrieval_score_and_the_breakdown_keeps_both_parts() -> None:
    # hybrid 0.8 on a server scoring 0.4, blended 0.65 / 0.35 -> 0.66
    r = Ranked(Capability(backend="a", name="t"), Hit(0, 0.7, 2.0, 1.0, 0.6, 0.8), 0.66, 0.4)
    [c] = Scorer(RoutingSettings()).score([r], "general", {}, {})
    assert (c.scores.hybrid, c.scores.server, c.scores.match) == (0.8, 0.4, 0.66)


def test_relevance_is_a_confidence_at_or_above_the_threshold() -> None:
    # Confidence here grows with the cosine alone: 0.5 at 0.3.
    scorer = Scorer(RoutingSettings(min_confidence=0.5), confidence=dense_model(0.3))
    out = scorer.score([ranked("sure", 0.5, dense=0.45), ranked("edge", 0.5, dense=0.3),
                        ranked("unsure", 0.5, dense=0.1)], "general", {}, {})
    by = {c.capability.backend: c for c in out}
    assert {name: c.relevant for name, c in by.items()} == {"sure": True, "edge": True, "unsure": False}
    assert by["sure"].scores.confidence > 0.9 and by["edge"].scores.confidence == 0.5
    assert by["unsure"].scores.confidence < 0.1


def test_health_orders_candidates_but_does_not_change_their_confidence() -> None:
    items = [ranked("up", 0.5, dense=0.4), ranked("down", 0.5, dense=0.4)]
    scorer = Scorer(RoutingSettings(), confidence=dense_model(0.3))
    out = scorer.score(items, "general", {"down": status("down", "down")}, {})
    assert [c.capability.backend for c in out] == ["up", "down"]
    assert out[0].scores.confidence == out[1].scores.confidence


def test_the_shipped_model_gives_every_candidate_a_confidence() -> None:
    items = [ranked("a", 0.9, dense=0.6, bm25=9.0), ranked("b", 0.2, dense=0.1, bm25=0.0)]
    out = Scorer(RoutingSettings()).score(items, "general", {}, {})
    a, b = out
    assert 0.0 <= b.scores.confidence < a.scores.confidence <= 1.0


def test_no_ranked_items_gives_no_candidates() -> None:
    assert Scorer(RoutingSettings()).score([], "general", {}, {}) == []


def test_perf_score_uses_only_the_last_ten_calls() -> None:
    recovered = PerfSnapshot(
        backend="a",
        intent=ANY_INTENT,
        count=100,
        success_rate_10=1.0,
        mean_latency_ms_10=0.0,
        success_rate=0.1,
        mean_latency_ms=5000.0,
        p95_latency_ms=9000.0,
        p95_latency_ms_10=0.0,
    )
    assert perf_score(recovered) == 1.0


def test_copies_of_one_tool_on_several_backends_share_the_best_copys_confidence() -> None:
    items = [ranked("a", 0.9, name="answer", dense=0.6, bm25=2.0), ranked("b", 0.85, name="answer", dense=0.58),
             ranked("c", 0.3, name="other", dense=0.2, bm25=0.0)]
    out = {c.capability.backend: c for c in Scorer(RoutingSettings()).score(items, "general", {}, {})}
    assert out["a"].scores.confidence == out["b"].scores.confidence > out["c"].scores.confidence


def test_without_embeddings_relevance_is_a_shared_keyword() -> None:
    items = [ranked("a", 0.9, dense=0.0, bm25=2.0), ranked("b", 0.1, dense=0.0, bm25=0.0)]
    scorer = Scorer(RoutingSettings(min_confidence=0.99))
    out = {c.capability.backend: c for c in scorer.score(items, "general", {}, {}, dense=False)}
    assert out["a"].relevant and not out["b"].relevant


def test_a_capability_that_may_act_is_called_only_when_likely_enough_to_be_meant() -> None:
    # Confidence grows with the cosine: about 0.12 at 0.25, 0.99 at 0.45. The tool is the backend's only one.
    scorer = Scorer(RoutingSettings(min_confidence=0.05, min_action_confidence=0.5), confidence=dense_model(0.3))
    weak = [ranked("w", 0.5, dense=0.25, read_only=False)]
    [guess] = scorer.score(weak, "general", {}, {})
    assert not guess.relevant and guess.unsure_action and guess.contending
    [reads] = scorer.score([ranked("w", 0.5, dense=0.25)], "general", {}, {})  # the same, read-only
    assert reads.relevant and not reads.unsure_action
    [sure] = scorer.score([ranked("w", 0.5, dense=0.45, read_only=False)], "general", {}, {})
    assert sure.relevant and not sure.unsure_action
    [named] = scorer.score(weak, "general", {}, {}, tool_chosen=True)  # the caller named it
    assert named.relevant and not named.unsure_action


def snapshot(backend: str, success: float, latency: float) -> PerfSnapshot:
    return PerfSnapshot(backend=backend, intent="*", count=10, success_rate_10=success, mean_latency_ms_10=latency,
                        success_rate=success, mean_latency_ms=latency, p95_latency_ms=latency,
                        p95_latency_ms_10=latency, p50_latency_ms=latency)


def test_copies_of_one_capability_are_one_choice_served_by_the_healthiest_fastest() -> None:
    # The same tool on three backends; retrieval ranks the copies apart (their texts name their backends).
    copies = [ranked("flaky", 0.9, name="answer", dense=0.5), ranked("slow", 0.8, name="answer", dense=0.4),
              ranked("fast", 0.7, name="answer", dense=0.3)]
    perf = {("flaky", "*"): snapshot("flaky", 0.7, 20.0), ("slow", "*"): snapshot("slow", 1.0, 38.0),
            ("fast", "*"): snapshot("fast", 1.0, 20.0)}
    out = Scorer(RoutingSettings(), confidence=dense_model(0.3)).score(copies, "general", {}, perf)
    assert [c.capability.backend for c in out] == ["fast", "slow", "flaky"]
    # One choice: the same retrieval scores and confidences for every copy (the best-ranked one's).
    assert {(c.scores.match, c.scores.confidence, c.scores.tool_confidence) for c in out} == {
        (out[0].scores.match, out[0].scores.confidence, out[0].scores.tool_confidence)}
    down = Scorer(RoutingSettings(), confidence=dense_model(0.3)).score(
        copies, "general", {"fast": status("fast", "down")}, perf)
    assert [c.capability.backend for c in down][:2] == ["slow", "flaky"]


def test_a_copy_with_no_history_comes_after_one_as_sure_that_has_served() -> None:
    copies = [ranked("new", 0.9, name="answer"), ranked("proven", 0.8, name="answer")]
    perf = {("proven", "*"): snapshot("proven", 1.0, 50.0)}
    out = Scorer(RoutingSettings(), confidence=dense_model(0.3)).score(copies, "general", {}, perf)
    assert [c.capability.backend for c in out] == ["proven", "new"]
    flaky = {("proven", "*"): snapshot("proven", 0.5, 50.0)}  # one that fails half its calls is not surer
    out = Scorer(RoutingSettings(), confidence=dense_model(0.3)).score(copies, "general", {}, flaky)
    assert [c.capability.backend for c in out] == ["new", "proven"]


def test_too_close_compares_a_choice_with_the_next_different_capability_whichever_is_above() -> None:
    scorer = Scorer(RoutingSettings(), confidence=dense_model(0.3))
    out = scorer.score([ranked("a", 0.9, name="get_time"), ranked("b", 0.85, name="get_time"),
                        ranked("c", 0.8, name="world_clock")], "general", {}, {})
    first, copy, other = out
    # A copy placed first on purpose, its composite below the other tool's: one choice, scored by its best copy.
    below = dataclasses.replace(copy, scores=copy.scores.model_copy(update={"composite": 0.1}), placed="session")
    assert not too_close(out, 0.0) and not too_close([below, first, other], 0.0)
    assert not too_close([below, other], 0.0)  # placed above a higher composite: not a tie
    assert too_close([first, dataclasses.replace(other, scores=first.scores)], 0.0)  # an exact tie
    assert too_close(out, 0.2) and not too_close(out, 0.01)
    # A tool of the same name that is not the same tool is another choice.
    namesake = dataclasses.replace(other, capability=dataclasses.replace(other.capability, name="get_time",
                                                                        description="Time in a city."))
    assert too_close([first, namesake], 0.2)


def test_a_default_learned_for_unsure_questions_makes_a_reader_callable_but_not_a_tool_that_acts() -> None:
    from router.learning.evidence import Evidence

    unsure = dense_model(0.9)  # retrieval far from sure of either
    default = Evidence(examples=2, nearest=0.1, score=0.0, contribution=0.5, default=0.5)
    near = Evidence(examples=2, nearest=0.95, score=0.8, contribution=1.6, nearest_own=0.95)
    # A neighbour just past `learning.min_similarity` (a chat's pick stored unchecked, say) vouches for a reader,
    # not for a tool that acts on this question.
    faint = Evidence(examples=1, nearest=0.41, score=0.01, contribution=0.02, nearest_own=0.41)
    reworded = Evidence(examples=1, nearest=0.85, score=0.6, contribution=1.2, nearest_own=0.85)  # said otherwise
    # Another caller's word on the request reworded vouches for a reader, not for an action of this caller's.
    theirs = Evidence(examples=1, nearest=0.85, score=0.6, contribution=1.2)
    for read_only, evidence, callable_ in ((True, default, True), (False, default, False), (False, near, True),
                                           (True, faint, True), (False, faint, False), (False, reworded, True),
                                           (True, theirs, True), (False, theirs, False)):
        [c] = Scorer(RoutingSettings(), confidence=unsure).score(
            [ranked("wolfram", 0.3, read_only=read_only)], "general", {}, {},
            evidence={"wolfram/tool/t_wolfram": evidence})
        assert c.relevant is callable_, (read_only, evidence)


def test_a_prompt_named_as_a_tool_of_its_backend_is_one_choice_with_it() -> None:
    # The fetch server offers `fetch` as a tool and as a prompt: "Fetch https://example.com" was "not clearly one of
    # its tools: fetch, fetch". The tool answers, as sure as the two together.
    def item(kind: str, name: str, score: float) -> Ranked:
        cap = Capability(backend="fetch", name=name, kind=kind, read_only=True)  # type: ignore[arg-type]
        return Ranked(cap, Hit(0, 0.6, 1.0, 0.6, 1.0, score), score)

    sizes = {"fetch": 3}
    rest = [item("tool", "fetch", 0.88), item("tool", "other", 0.5)]
    out = Scorer(RoutingSettings()).score([item("prompt", "fetch", 0.9), *rest], "general", {}, {}, sizes)
    apart = {c.capability.name: c for c in Scorer(RoutingSettings()).score(
        [item("prompt", "fetch_page", 0.9), *rest], "general", {}, {}, sizes)}  # another prompt: a rival
    assert [(c.capability.kind, c.capability.name) for c in out] == [("tool", "fetch"), ("tool", "other")]
    assert out[0].scores.tool_confidence == pytest.approx(
        apart["fetch"].scores.tool_confidence + apart["fetch_page"].scores.tool_confidence, abs=2e-4)
    assert out[0].scores.confidence == apart["fetch"].scores.confidence  # the backend's is the model's alone


def test_a_prompt_named_as_a_tool_is_one_choice_with_it_across_copies_and_adds_nothing_to_one_that_may_act() -> None:
    def item(backend: str, kind: str, score: float, read_only: bool = True, name: str = "fetch") -> Ranked:
        cap = Capability(backend=backend, name=name, kind=kind, read_only=read_only)  # type: ignore[arg-type]
        return Ranked(cap, Hit(0, 0.6, 1.0, 0.6, 1.0, score), score)

    # Two replicas, ranked crosswise: the first prompt's backend is not the first tool's.
    crossed = [item("b", "prompt", 0.9), item("a", "tool", 0.88), item("b", "tool", 0.87), item("a", "prompt", 0.86)]
    out = Scorer(RoutingSettings()).score(crossed, "general", {}, {}, {"a": 3, "b": 3})
    assert {c.capability.kind for c in out} == {"tool"}
    # A tool that may act is not made likelier to be meant by its prompt.
    sizes = {"m": 3}
    acting = [item("m", "prompt", 0.9), item("m", "tool", 0.88, read_only=False), item("m", "tool", 0.5, name="x")]
    merged = Scorer(RoutingSettings()).score(acting, "general", {}, {}, sizes)
    alone = Scorer(RoutingSettings()).score([item("m", "prompt", 0.9, name="other"), *acting[1:]], "general", {}, {},
                                            sizes)
    tool = {c.capability.name: c for c in merged}["fetch"]
    assert [c.capability.kind for c in merged] == ["tool", "tool"]
    assert tool.scores.tool_confidence == {c.capability.name: c for c in alone}["fetch"].scores.tool_confidence
