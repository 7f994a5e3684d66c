"""The example store, the nearest-neighbour evidence and its blend into the score, without Ray."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from router.learning.evidence import ExampleIndex
from router.learning.examples import Example, ExampleStore, accepts_feedback
from router.retrieval.catalog import Ranked
from router.retrieval.hybrid import Hit
from router.settings import LearningSettings, RouterSettings, RoutingSettings
from router.stages.scoring import Scorer
from router.values import Capability


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def ex(name: str, label: int, vector: np.ndarray, backend: str = "b", question: str = "q") -> Example:
    return Example(backend=backend, kind="tool", name=name, label=label, question=question, vector=vector)


def test_store_keeps_examples_across_reopening_and_drops_the_oldest_beyond_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "state" / "feedback.sqlite"
    store = ExampleStore(path, cap=2)
    for i in range(3):
        store.add([ex("t", 1, unit(1, i, 0), question=f"q{i}")])
    store.add([ex("other", -1, unit(0, 1, 0), backend="c")])
    store.close()
    reopened = ExampleStore(path, cap=2)
    kept = reopened.for_backend("b")
    assert [e.question for e in kept] == ["q1", "q2"]
    assert kept[0].vector.dtype == np.float32
    np.testing.assert_allclose(kept[1].vector, unit(1, 2, 0))
    assert [(e.backend, e.label) for e in reopened.all()] == [("b", 1), ("b", 1), ("c", -1)]


def test_feedback_given_again_on_a_request_replaces_what_it_gave_before(tmp_path: Path) -> None:
    store = ExampleStore(tmp_path / "f.sqlite", cap=200)
    routed = replace(ex("t", 1, unit(1, 0)), source="routed", request_id="r1")
    store.add([routed, replace(ex("t", 1, unit(0, 1), question="other"), request_id="r2")])

    def wrong(request_id: str) -> list[Example]:
        return [replace(ex("t", -1, unit(1, 0)), request_id=request_id),
                replace(ex("u", 1, unit(1, 0)), request_id=request_id)]

    for _ in range(50):  # a caller replaying its feedback on one request
        store.add(wrong("r1"))
    kept = store.all()
    assert sorted((e.name, e.label, e.request_id, e.source) for e in kept) == [
        ("t", -1, "r1", "feedback"), ("t", 1, "r2", "feedback"), ("u", 1, "r1", "feedback")]


def test_a_routed_example_arriving_after_the_callers_feedback_on_its_request_does_not_undo_it(
        tmp_path: Path) -> None:
    # a replica sends routed examples a moment after the answer: a quick "wrong" was cancelled by the late "+1"
    store = ExampleStore(tmp_path / "f.sqlite", cap=200)
    store.add([replace(ex("t", -1, unit(1, 0)), request_id="r1")])
    store.add([replace(ex("t", 1, unit(1, 0)), source="routed", request_id="r1"),
               replace(ex("t", 1, unit(0, 1)), source="routed", request_id="r2")])
    assert sorted((e.label, e.request_id, e.source) for e in store.all()) == [
        (-1, "r1", "feedback"), (1, "r2", "routed")]


def test_a_write_that_fails_is_rolled_back_and_the_store_keeps_working(tmp_path: Path) -> None:
    # it left the connection inside a transaction: every later write failed, and deletions were never committed
    path = tmp_path / "f.sqlite"
    store = ExampleStore(path, cap=10)
    store.add([ex("t", 1, unit(1, 0), question="kept")])
    with pytest.raises(sqlite3.IntegrityError):
        store.add([ex("t", 1, unit(0, 1), question="half of a failed batch"), ex("t", 2, unit(0, 1))])
    store.add([ex("u", 1, unit(0, 1), backend="c", question="after")])
    assert store.delete_backend("c") == 1
    store.close()
    assert [e.question for e in ExampleStore(path, cap=10).all()] == ["kept"]


def test_a_capability_over_its_cap_loses_the_oldest_example_of_whoever_holds_the_most(tmp_path: Path) -> None:
    store = ExampleStore(tmp_path / "f.sqlite", cap=4)
    store.add([replace(ex("t", 1, unit(1, 0), question=f"alice {i}"), principal="alice") for i in range(2)])
    for i in range(20):  # one principal's flood of examples for the same capability
        store.add([replace(ex("t", -1, unit(0, 1), question=f"mallory {i}"), principal="mallory")])
    assert [e.question for e in store.all()] == ["alice 0", "alice 1", "mallory 18", "mallory 19"]
    alone = ExampleStore(tmp_path / "g.sqlite", cap=2)  # one principal (or none): the oldest go first
    for i in range(3):
        alone.add([ex("t", 1, unit(1, 0), question=f"q{i}")])
    assert [e.question for e in alone.all()] == ["q1", "q2"]


def test_a_file_written_before_request_ids_opens_and_takes_them(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript("""CREATE TABLE examples (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL,
            kind TEXT NOT NULL, name TEXT NOT NULL, label INTEGER NOT NULL, question TEXT NOT NULL,
            vector BLOB NOT NULL, source TEXT NOT NULL, principal TEXT, created REAL NOT NULL,
            document TEXT NOT NULL DEFAULT '');""")
        db.execute("INSERT INTO examples VALUES (NULL, 'b', 'tool', 't', 1, 'old', ?, 'feedback', NULL, 1.0, '')",
                   (unit(1, 0).tobytes(),))
    store = ExampleStore(path, cap=10)
    store.add([replace(ex("t", -1, unit(0, 1), question="new"), request_id="r1")])
    assert [(e.question, e.request_id) for e in store.all()] == [("old", None), ("new", "r1")]


def test_store_deletes_per_backend_and_bumps_its_version(tmp_path: Path) -> None:
    store = ExampleStore(tmp_path / "f.sqlite", cap=10)
    store.add([ex("t", 1, unit(1, 0)), ex("u", 1, unit(0, 1), backend="c")])
    before = store.version
    assert store.delete_backend("b") == 1
    assert store.version > before
    assert [e.backend for e in store.all()] == ["c"]
    assert store.delete_backend("nobody") == 0
    store.add([ex("t", 1, unit(1, 0), backend="c"), ex("denied", 1, unit(1, 0), backend="c")])
    # An operator whose policy covers part of a backend deletes the examples of that part only.
    assert store.delete_backend("c", ["t", "u"]) == 2 and [e.name for e in store.all()] == ["denied"]
    assert store.delete_backend("c", []) == 0


def test_a_close_positive_example_pulls_up_and_a_close_negative_pushes_down() -> None:
    settings = LearningSettings(weight=0.5, min_similarity=0.5)
    index = ExampleIndex([ex("good", 1, unit(1, 0.1, 0)), ex("bad", -1, unit(1, 0, 0.1)),
                          ex("far", 1, unit(0, 0, 1))], settings)
    evidence = index.evidence(unit(1, 0, 0))
    assert evidence["b/tool/good"].score > 0.9 and evidence["b/tool/good"].contribution == pytest.approx(
        0.5 * evidence["b/tool/good"].score, abs=1e-3)
    assert evidence["b/tool/bad"].score < -0.9
    far = evidence["b/tool/far"]
    assert far.score == 0.0 and far.contribution == 0.0 and far.examples == 1 and far.nearest == pytest.approx(0.0)


def test_mixed_verdicts_cancel_and_the_nearest_similarity_scales_the_score() -> None:
    settings = LearningSettings(weight=1.0, min_similarity=0.5)
    mixed = ExampleIndex([ex("t", 1, unit(1, 0.05)), ex("t", -1, unit(1, -0.05))], settings)
    assert abs(mixed.evidence(unit(1, 0))["b/tool/t"].score) < 1e-3
    one = ExampleIndex([ex("t", 1, unit(1, 1))], settings)  # cosine 0.707 to (1, 0)
    ev = one.evidence(unit(1, 0))["b/tool/t"]
    assert ev.nearest == pytest.approx(0.7071, abs=1e-3)
    assert ev.score == pytest.approx((0.7071 - 0.5) / 0.5, abs=1e-3)


def test_no_evidence_without_a_vector_or_with_vectors_of_another_model() -> None:
    index = ExampleIndex([ex("t", 1, unit(1, 0))], LearningSettings())
    assert index.evidence(None) == {}
    assert index.evidence(unit(1, 0, 0)) == {}
    assert ExampleIndex([], LearningSettings()).evidence(unit(1, 0)) == {}


def ranked(name: str, score: float) -> Ranked:
    cap = Capability(backend="b", name=name)
    return Ranked(cap, Hit(0, 0.5, 1.0, 0.5, 1.0, score), score)


def test_the_learned_contribution_is_added_to_match_and_shown_in_the_breakdown() -> None:
    index = ExampleIndex([ex("second", 1, unit(1, 0.1)), ex("first", -1, unit(1, -0.1))],
                         LearningSettings(weight=0.5, min_similarity=0.5))
    evidence = index.evidence(unit(1, 0))
    scorer, both = Scorer(RoutingSettings()), [ranked("first", 0.6), ranked("second", 0.55)]
    plain = scorer.score(both, "general", {}, {})
    learned = scorer.score(both, "general", {}, {}, evidence=evidence)
    assert [c.capability.name for c in plain] == ["first", "second"]
    assert [c.capability.name for c in learned] == ["second", "first"]
    top = learned[0].scores
    assert top.examples == 1 and top.nearest_example == pytest.approx(0.995, abs=1e-3)
    assert top.match == pytest.approx(0.55 + top.learned, abs=1e-3) and top.learned > 0.4
    assert learned[1].scores.learned < -0.4


def test_feedback_is_taken_on_loopback_by_default_and_the_switch_overrides() -> None:
    assert accepts_feedback(RouterSettings())
    assert not accepts_feedback(RouterSettings.model_validate({"server": {"host": "0.0.0.0"}}))
    assert accepts_feedback(RouterSettings.model_validate(
        {"server": {"host": "0.0.0.0"}, "learning": {"accept_feedback": True}}))
    assert not accepts_feedback(RouterSettings.model_validate({"learning": {"accept_feedback": False}}))
