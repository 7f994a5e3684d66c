"""consensus: the majority's answer among read-only backends asked together, grouped by meaning."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from router.strategies import STRATEGIES
from router.strategies.consensus import group_answers
from tests.unit.fake_executor import ScriptedExecutor, fail, ok, timeout
from tests.unit.helpers import embed_texts, fake_embed
from tests.unit.test_strategies import chain, harness, plan


async def test_consensus_returns_the_majority_answer_and_lists_who_disagreed() -> None:
    h = harness(ScriptedExecutor({"a": ok("42"), "b": ok("41"), "c": ok("42")}))
    result = await STRATEGIES["consensus"](plan("a", "b", "c"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "42"
    assert result.call is not None and result.call.backend == "a"
    assert result.agreement == pytest.approx(2 / 3, abs=1e-4)
    assert result.disagreed == ["b"]
    assert result.answers is not None
    assert [(a.backend, a.answer, a.agrees) for a in result.answers] == [
        ("a", "42", True),
        ("b", "41", False),
        ("c", "42", True),
    ]
    assert sorted(h.executor.called) == ["a", "b", "c"]


async def test_consensus_groups_paraphrases_by_embedding_similarity() -> None:
    executor = ScriptedExecutor(
        {"a": ok("The capital is Paris"), "b": ok("Berlin"), "c": ok("capital: PARIS!")}
    )
    h = harness(executor, embed=fake_embed, consensus_similarity=0.85)
    result = await STRATEGIES["consensus"](plan("a", "b", "c"), h.ctx)
    assert result.agreement == pytest.approx(2 / 3, abs=1e-4)
    assert result.disagreed == ["b"]
    # without embeddings the same texts are three different answers
    h2 = harness(ScriptedExecutor(dict(executor.script)), embed=None)
    result2 = await STRATEGIES["consensus"](plan("a", "b", "c"), h2.ctx)
    assert result2.agreement == pytest.approx(1 / 3, abs=1e-4)
    assert result2.disagreed == ["b", "c"]


async def test_consensus_groups_by_text_when_the_model_cannot_embed_the_answers() -> None:
    async def broken(texts: list[str]) -> Any:
        raise RuntimeError("the model failed")

    h = harness(ScriptedExecutor({"a": ok("42"), "b": ok("41"), "c": ok("42")}), embed=broken)
    result = await STRATEGIES["consensus"](plan("a", "b", "c"), h.ctx)  # the backends answered: so does it
    assert result.outcome is not None and result.outcome.text == "42" and result.disagreed == ["b"]
    assert ("consensus_by_text", {"reason": "RuntimeError: the model failed"}) in h.steps


async def test_consensus_waits_for_the_answers_vectors_no_longer_than_the_deadline() -> None:
    async def hangs(texts: list[str]) -> Any:
        await asyncio.sleep(30)

    h = harness(ScriptedExecutor({"a": ok("42"), "b": ok("41"), "c": ok("42")}), embed=hangs, deadline_s=0.3)
    started = time.monotonic()
    result = await STRATEGIES["consensus"](plan("a", "b", "c"), h.ctx)
    assert time.monotonic() - started < 1.0 and result.outcome is not None and result.outcome.text == "42"
    assert [name for name, _ in h.steps][-1] == "consensus_by_text"


async def test_consensus_ignores_failed_backends_when_counting_agreement() -> None:
    h = harness(ScriptedExecutor({"a": fail(), "b": ok("yes"), "c": ok("yes")}))
    result = await STRATEGIES["consensus"](plan("a", "b", "c"), h.ctx)
    assert result.outcome is not None and result.outcome.backend == "b"
    assert result.agreement == 1.0
    assert result.disagreed == []
    assert ("a", "error") in chain(h)


async def test_consensus_tie_goes_to_the_best_ranked_backend() -> None:
    h = harness(ScriptedExecutor({"a": ok("left"), "b": ok("right")}))
    result = await STRATEGIES["consensus"](plan("a", "b"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "left"
    assert result.agreement == 0.5
    assert result.disagreed == ["b"]


async def test_consensus_asks_only_consensus_k_backends() -> None:
    h = harness(ScriptedExecutor({"a": ok("x"), "b": ok("x"), "c": ok("x")}), consensus_k=2)
    result = await STRATEGIES["consensus"](plan("a", "b", "c"), h.ctx)
    assert sorted(h.executor.called) == ["a", "b"]
    assert result.agreement == 1.0


async def test_consensus_with_no_success_returns_nothing() -> None:
    h = harness(ScriptedExecutor({"a": fail(), "b": timeout()}))
    result = await STRATEGIES["consensus"](plan("a", "b"), h.ctx)
    assert result.outcome is None and result.agreement is None


def test_group_answers_normalises_case_and_whitespace_and_uses_vectors() -> None:
    assert group_answers(["Yes", " yes ", "no"], None, 0.9) == [0, 0, 1]
    texts = ["the answer is paris", "paris is the answer", "berlin"]
    assert group_answers(texts, embed_texts(texts), 0.9) == [0, 0, 1]
    assert group_answers(texts, embed_texts(texts), 1.01) == [0, 1, 2]
