"""What examples say beyond near-paraphrases: examples weighed by how much they told retrieval and by its
doubt, patterns of rejections, a default learned where retrieval is unsure, and the guard that keeps a
backend nobody judged in its place (no Ray, no model)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from router.learning.evidence import ExampleIndex
from router.learning.examples import Example, ExampleStore
from router.settings import LearningSettings

THRESHOLD = 0.08  # routing.min_confidence: below it retrieval is unsure
SETTINGS = LearningSettings(min_similarity=0.6, reject_after=3, reject_similarity=0.4, reject_weight=0.3,
                            default_after=2, default_weight=2.0)


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def ex(key: str, label: int, vector: np.ndarray, confidence: float | None = None,
       top_confidence: float | None = None) -> Example:
    backend, name = key.split("/")
    return Example(backend=backend, kind="tool", name=name, label=label, question="q", vector=vector,
                   confidence=confidence, top_confidence=top_confidence)


def index(*examples: Example) -> ExampleIndex:
    return ExampleIndex(list(examples), SETTINGS, THRESHOLD)


def test_a_confirmation_of_what_retrieval_knew_barely_counts_and_a_correction_counts_fully() -> None:
    q = unit(1, 0)
    known = index(ex("a/t", 1, unit(1, 0.05), confidence=0.95)).evidence(q)["a/tool/t"]
    news = index(ex("a/t", 1, unit(1, 0.05), confidence=0.05)).evidence(q)["a/tool/t"]
    unrecorded = index(ex("a/t", 1, unit(1, 0.05))).evidence(q)["a/tool/t"]
    assert 0 < known.score < 0.1 < 0.9 < news.score <= unrecorded.score
    # A wrong answer retrieval was sure of is a correction: it counts in full.
    assert index(ex("a/t", -1, unit(1, 0.05), confidence=0.95)).evidence(q)["a/tool/t"].score < -0.9


def test_similar_questions_speak_in_proportion_to_retrievals_doubt_and_the_question_itself_in_full() -> None:
    q = unit(1, 0, 0)
    similar = index(ex("a/t", 1, unit(1, 1, 0)))  # cosine 0.71: a similar question, not this one reworded
    kernel = (0.7071 - 0.6) / 0.4
    assert similar.evidence(q)["a/tool/t"].score == pytest.approx(kernel, abs=1e-3)  # no opinion of retrieval's
    assert similar.evidence(q, doubt=0.1)["a/tool/t"].score == pytest.approx(0.1 * kernel, abs=1e-3)
    assert similar.evidence(q, doubt=0.8)["a/tool/t"].score == pytest.approx(0.8 * kernel, abs=1e-3)
    # A correction of this very question (within paraphrase_similarity) counts whatever retrieval thought.
    corrected = index(ex("a/t", 1, unit(1, 0.05, 0), confidence=0.0), ex("b/t", -1, unit(1, 0.05, 0), confidence=0.95))
    sure = corrected.evidence(q, doubt=0.05)
    assert sure["a/tool/t"].score > 0.99 and sure["b/tool/t"].score < -0.94


def test_the_caller_s_own_examples_that_a_capability_was_right_are_told_apart() -> None:
    q = unit(1, 0)
    mine = dataclasses.replace(ex("a/t", 1, unit(1, 0.1)), principal="alice")
    theirs = dataclasses.replace(ex("a/t", 1, unit(1, 0.01)), principal="bob")
    wrong = dataclasses.replace(ex("a/t", -1, unit(1, 0)), principal="alice")
    both = index(mine, theirs, wrong)
    assert both.evidence(q, caller="alice")["a/tool/t"].nearest_own == pytest.approx(0.995, abs=1e-3)
    assert both.evidence(q, caller="bob")["a/tool/t"].nearest_own == pytest.approx(1.0, abs=1e-3)
    assert both.evidence(q, caller="carol")["a/tool/t"].nearest_own == -1.0  # none of hers
    assert both.evidence(q, caller="carol")["a/tool/t"].nearest == pytest.approx(1.0, abs=1e-3)
    # Anonymous callers are one caller.
    assert index(ex("a/t", 1, unit(1, 0))).evidence(q)["a/tool/t"].nearest_own == pytest.approx(1.0, abs=1e-3)


def test_farther_examples_that_agree_add_up_and_the_nearest_k_count() -> None:
    q = unit(1, 0, 0)
    one = index(ex("a/t", 1, unit(1, 1, 0))).evidence(q)["a/tool/t"].score
    two = index(ex("a/t", 1, unit(1, 1, 0)), ex("a/t", 1, unit(1, 0, 1))).evidence(q)["a/tool/t"].score
    assert two == pytest.approx(1 - (1 - one) ** 2, abs=1e-3) and two > one
    few = LearningSettings(min_similarity=0.6, neighbours=1)
    assert ExampleIndex([ex("a/t", 1, unit(1, 1, 0)), ex("a/t", 1, unit(1, 0, 1))], few).evidence(q)[
        "a/tool/t"].score == pytest.approx(one, abs=1e-3)


def test_three_rejections_of_a_backend_for_similar_questions_push_all_its_tools_down() -> None:
    q = unit(1, 0, 0)
    near = [unit(1, 1.7, 0), unit(1, 0, 1.7), unit(1, 1.2, 1.2)]  # cosines about 0.5: beyond min_similarity
    two = index(*(ex("a/t", -1, v) for v in near[:2])).evidence(q)
    assert two["a/tool/t"].contribution == 0.0 and two["a/tool/t"].rejections == 2
    three = index(*(ex("a/t", -1, v) for v in near)).evidence(q)
    assert three["a/tool/t"].rejections == 3
    assert three["a/tool/t"].contribution == pytest.approx(-0.3 * 3 / 4, abs=1e-3)
    assert three["a/tool/other"].contribution == pytest.approx(-0.3 * 3 / 4, abs=1e-3)  # no example of its own
    assert "b/tool/t" not in three
    # An acceptance there offsets a rejection; far-away rejections do not count.
    assert index(*(ex("a/t", -1, v) for v in near), ex("a/u", 1, unit(1, 0.2, 0))).evidence(q)[
        "a/tool/t"].rejections == 2
    assert index(*(ex("a/t", -1, unit(0, 1, v)) for v in (0, 1, 2))).evidence(q)["a/tool/t"].rejections == 0


def test_a_backend_right_where_retrieval_was_unsure_becomes_the_default_for_such_questions() -> None:
    # Right twice on unrelated questions retrieval was unsure of (its best below the threshold).
    learned = index(ex("wolfram/ask", 1, unit(1, 0, 0), top_confidence=0.02),
                    ex("wolfram/ask", 1, unit(0, 1, 0), top_confidence=0.05),
                    ex("other/t", 1, unit(0, 0, 1), top_confidence=0.5))  # a confident decision: not an event
    q = unit(-1, -1, 1)  # near none of them
    unsure = learned.evidence(q, unsure=0.02)["wolfram/tool/ask"]
    share = 2 / 3  # its two right answers out of two, smoothed by one
    assert unsure.default == pytest.approx(2.0 * share * ((0.08 - 0.02) / 0.08) ** 0.5, abs=1e-3)
    assert unsure.contribution == pytest.approx(unsure.default, abs=1e-3)
    assert learned.evidence(q, unsure=0.3)["wolfram/tool/ask"].default == 0.0  # retrieval is sure enough
    assert learned.evidence(q)["wolfram/tool/ask"].default == 0.0
    once = index(ex("wolfram/ask", 1, unit(1, 0, 0), top_confidence=0.02))  # once is not yet a default
    assert once.evidence(unit(0, 1, 0), unsure=0.02)["wolfram/tool/ask"].default == 0.0


def test_a_backend_nobody_confirmed_keeps_its_place_unless_corrected_on_the_question_itself() -> None:
    q = unit(1, 0, 0)
    taught = index(ex("b/t", 1, unit(1, 0.3, 0)))  # another backend right for a similar question
    assert not taught.may_replace("a", "b/tool/t", q, unsure=0.5)
    confirmed = index(ex("b/t", 1, unit(1, 0.3, 0)), ex("a/u", 1, unit(0, 0, 1)))  # a was right elsewhere
    assert confirmed.may_replace("a", "b/tool/t", q, unsure=0.5)
    corrected = index(ex("b/t", 1, unit(1, 0.1, 0)), ex("a/t", -1, unit(1, 0.1, 0)))  # wrong on this question
    assert corrected.may_replace("a", "b/tool/t", q, unsure=0.5)
    similar = index(ex("b/t", 1, unit(1, 0.6, 0)), ex("a/t", -1, unit(1, 0.6, 0)))  # cosine 0.86: a similar one
    assert not similar.may_replace("a", "b/tool/t", q, unsure=0.5)
    # A pattern of rejections for similar questions pushes it down, but does not take this one from it:
    # those were another backend's questions, this may be its own.
    pattern = index(ex("b/t", 1, unit(1, 0.3, 0)),
                    *(ex("a/t", -1, v) for v in (unit(1, 1.7, 0), unit(1, 0, 1.7), unit(1, 1.2, 1.2))))
    assert pattern.evidence(q)["a/tool/t"].rejections == 3
    assert not pattern.may_replace("a", "b/tool/t", q, unsure=0.5)
    default = index(ex("b/t", 1, unit(0, 1, 0), top_confidence=0.01), ex("b/t", 1, unit(0, 0, 1), top_confidence=0.01))
    assert default.may_replace("a", "b/tool/t", q, unsure=0.01)
    assert not default.may_replace("a", "b/tool/t", q, unsure=0.5)


def test_a_store_written_before_the_confidence_columns_opens_and_gets_them(tmp_path: Path) -> None:
    path = tmp_path / "feedback.sqlite"
    old = sqlite3.connect(path)
    old.executescript("""CREATE TABLE examples (id INTEGER PRIMARY KEY AUTOINCREMENT, backend TEXT NOT NULL,
        kind TEXT NOT NULL, name TEXT NOT NULL, label INTEGER NOT NULL, question TEXT NOT NULL, vector BLOB NOT NULL,
        source TEXT NOT NULL, principal TEXT, created REAL NOT NULL, document TEXT NOT NULL DEFAULT '');""")
    old.execute("INSERT INTO examples (backend, kind, name, label, question, vector, source, created) "
                "VALUES ('a', 'tool', 't', 1, 'q', ?, 'feedback', 0)", (unit(1, 0).tobytes(),))
    old.commit()
    old.close()
    store = ExampleStore(path, cap=10)
    first = store.all()[0]
    assert (first.key, first.confidence, first.top_confidence) == ("a/tool/t", None, None)
    store.add([ex("a/t", -1, unit(0, 1), confidence=0.7, top_confidence=0.7)])
    assert [(e.confidence, e.top_confidence) for e in ExampleStore(path, cap=10).all()] == [(None, None), (0.7, 0.7)]


def test_after_a_change_of_model_the_examples_given_since_speak_and_the_stale_ones_do_not() -> None:
    stale = dataclasses.replace(ex("old/t", 1, unit(1, 0)), created=1.0)  # a two-dimensional model's, given first
    fresh = dataclasses.replace(ex("new/t", 1, unit(1, 0, 0)), created=2.0)
    both = index(stale, fresh)
    assert len(both) == 1 and set(both.evidence(unit(1, 0, 0))) == {"new/tool/t"}
