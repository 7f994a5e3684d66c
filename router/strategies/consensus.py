"""consensus: ask the top k backends, group their answers by meaning, return the majority's answer.

Answers are grouped greedily by cosine similarity of their embeddings (identical texts always
group together); the largest group wins (ties: the group holding the best-ranked backend), and
its most central answer is returned with `agreement` = group size / answers received. Only
read-only capabilities are asked: when the best one may act, the request runs as fallback, and its
answer has no `agreement`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from router.models import ConsensusAnswer
from router.strategies.base import StrategyContext, StrategyResult, attempt, fan_out
from router.strategies.fallback import run as one_at_a_time
from router.values import CallOutcome, PlannedCall


def group_answers(texts: Sequence[str], vectors: np.ndarray | None, threshold: float) -> list[int]:
    """Group id per answer; an answer joins the first group whose first member it resembles enough."""
    groups: list[int] = []
    leaders: list[int] = []
    norm = [" ".join(t.lower().split()) for t in texts]
    for i in range(len(texts)):
        for g, leader in enumerate(leaders):
            same = norm[i] == norm[leader]
            if not same and vectors is not None:
                same = float(vectors[i] @ vectors[leader]) >= threshold
            if same:
                groups.append(g)
                break
        else:
            leaders.append(i)
            groups.append(len(leaders) - 1)
    return groups


async def _embedded(texts: list[str], ctx: StrategyContext) -> np.ndarray | None:
    """The answers' vectors, within the request's deadline; None (answers grouped by their text alone) without an
    embedder, or when it fails: the backends have answered, and the router routes on BM25 alone when its model
    cannot embed, so neither may turn their answers into an error."""
    if ctx.embed is None:
        return None
    try:
        return await asyncio.wait_for(ctx.embed(texts), max(0.0, ctx.remaining()))
    except Exception as exc:  # any failure of the model or its deployment, or the deadline
        ctx.step("consensus_by_text", reason=f"{type(exc).__name__}: {exc}"[:200])
        return None


async def run(calls: Sequence[PlannedCall], ctx: StrategyContext) -> StrategyResult:
    chosen = fan_out(calls, ctx.settings.consensus_k)
    if not chosen:
        ctx.step("one_at_a_time", capability=calls[0].capability.name if calls else None)
        return await one_at_a_time(calls, ctx)
    ctx.step("consensus", backends=[c.backend for c in chosen])
    outcomes: list[CallOutcome] = await asyncio.gather(*(attempt(ctx, c) for c in chosen))
    ok = [(c, o) for c, o in zip(chosen, outcomes, strict=True) if o.ok]
    if not ok:
        return StrategyResult(outcome=None, call=None, attempts=ctx.attempts)
    texts = [o.text for _, o in ok]
    vectors = await _embedded(texts, ctx) if len(ok) > 1 else None
    groups = group_answers(texts, vectors, ctx.settings.consensus_similarity)
    sizes = {g: groups.count(g) for g in set(groups)}
    # Largest group; on a tie the group of the best-ranked answer (groups are numbered in rank order).
    winner = min(sizes, key=lambda g: (-sizes[g], g))
    members = [i for i, g in enumerate(groups) if g == winner]
    if vectors is not None and len(members) > 2:
        sub = vectors[members]
        central = members[int(np.argmax((sub @ sub.T).sum(axis=1)))]
    else:
        central = members[0]
    call, outcome = ok[central]
    answers = [
        ConsensusAnswer(backend=c.backend, capability=c.capability.name, answer=o.text[:2000],
                        latency_ms=round(o.latency_ms, 2), group=groups[i], agrees=groups[i] == winner)
        for i, (c, o) in enumerate(ok)
    ]
    disagreed = [a.backend for a in answers if not a.agrees]
    return StrategyResult(outcome=outcome, call=call, attempts=ctx.attempts,
                          agreement=round(len(members) / len(ok), 4), answers=answers, disagreed=disagreed)
