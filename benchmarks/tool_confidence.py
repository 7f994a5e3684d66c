"""The tool-level confidence model: given that the router's backend is right, is its tool?

Run by benchmarks/abstention.py (which fits both models and writes both parameter files); this module
holds the tool-level half. On every in-scope decision whose best backend is a gold one, the rows are
the `tool_features` of that backend's candidates among those the router scores (twice the default
candidate count, as the decide stage does), each labelled by whether its tool is a gold tool: the
best one's row says how sure to be of calling it, the others' how sure to be of a runner-up of the
same backend (tried in fallback, or called when the best cannot take the question). Fitted as
the backend-level model is (non-negative weights on the evidence, then an isotonic map on out-of-fold
predictions). The default `routing.min_tool_confidence` is the highest threshold that still lets
`--min-tool-answered` (0.9) of those decisions call their tool on the fitting halves; below it the
router asks which tool was meant (409) instead of calling one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.routing_accuracy import Query
from router.request import Request
from router.stages.confidence import (
    TOOL_EVIDENCE,
    TOOL_FEATURES,
    ConfidenceModel,
    expected_calibration_error,
    fit_calibrated,
    tool_features,
)
from router.stages.decide import Decider, Live, View
from router.values import Analysis

THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.0, 1.0001, 0.01))  # every 0.01


@dataclass(frozen=True)
class ToolCase:
    """A candidate of the best backend of an in-scope decision whose best backend is right: its features
    and whether its tool is right."""

    features: np.ndarray
    right: bool
    question: str
    chosen: str  # backend/tool
    small: bool  # decided on a small catalog, not the whole one
    best: bool  # the backend's best candidate (the one the router would call)


def tool_cases(bench, decider: Decider, queries: Sequence[Query], vectors: dict, small: int,
               seed: int) -> list[ToolCase]:
    """The whole catalog and, with `small`, a small one per question (its gold servers and `small`
    others, drawn as `Bench.cases` draws them with the same seed)."""
    everything = frozenset(c.backend for c in bench.catalogs)
    rng = np.random.default_rng(seed)
    k = 2 * max(decider.settings.routing.candidates, decider.fanout())  # the ranked list the router scores
    out = []
    for q in queries:
        catalogs = [everything]
        rest = sorted(everything - q.gold_servers)
        if small:
            catalogs.append(frozenset(rng.choice(rest, size=small, replace=False).tolist()) | q.gold_servers)
        for servers in catalogs:
            index = bench.index(servers)
            analysis = Analysis(question=q.text, vector=vectors[q.text], intent="general", intent_source="default")
            # The router's own best first: the decision's candidates are the ranked list the router scores.
            ranked = decider.decide(analysis, View(index, {}), Live(), Request(question=q.text, k=k)).candidates[:k]
            if not ranked or ranked[0].capability.backend not in q.gold_servers:
                continue
            sizes = {c.backend: len(c.capabilities) for c in index.texts.catalogs}
            top = ranked[0].capability
            if sizes.get(top.backend, 1) <= 1:
                continue  # one capability: nothing to tell apart
            rows = tool_features([c.scores for c in ranked], [c.capability.backend for c in ranked], sizes)
            gold = {(name, server) for name, servers in q.gold_tools for server in servers}
            for row, c in zip(rows, ranked, strict=True):
                cap = c.capability
                if cap.backend == top.backend:
                    out.append(ToolCase(row, (cap.name, cap.backend) in gold, q.text, f"{cap.backend}/{cap.name}",
                                        servers is not everything, cap.key == top.key))
    return out


def fit_tool_model(cases: Sequence[ToolCase], seed: int) -> ConfidenceModel:
    x = np.vstack([c.features for c in cases])
    y = np.array([float(c.right) for c in cases])
    folds = np.random.default_rng(seed).permutation(len(y)) % 2
    return fit_calibrated(x, y, folds, TOOL_EVIDENCE, TOOL_FEATURES)


def tool_curve(model: ConfidenceModel, cases: Sequence[ToolCase]) -> list[dict]:
    """Per threshold: the share of right-backend decisions that still call their tool, and how many of
    those call the right one."""
    cases = [c for c in cases if c.best]
    p = model.predict(np.vstack([c.features for c in cases]))
    y = np.array([c.right for c in cases])
    out = []
    for t in THRESHOLDS:
        called = p >= t
        out.append({"threshold": t, "called": float(called.mean()),
                    "right_of_called": float(y[called].mean()) if called.any() else 1.0,
                    "wrong_called": float((called & ~y).mean()), "right_held_back": float((~called & y).mean())})
    return out


def choose_tool_threshold(points: list[dict], min_called: float) -> float:
    ok = [c["threshold"] for c in points if c["called"] >= min_called]
    return max(ok) if ok else 0.0


def tool_summary(model: ConfidenceModel, cases: Sequence[ToolCase], threshold: float) -> dict:
    """At the threshold, over the decisions' best candidates; the calibration (ECE) over every row."""
    every = list(cases)
    cases = [c for c in every if c.best]
    if not cases:
        return {"decisions": 0}
    p = model.predict(np.vstack([c.features for c in cases]))
    y = np.array([c.right for c in cases])
    called = p >= threshold
    p_every = model.predict(np.vstack([c.features for c in every]))
    return {"decisions": len(cases), "tool_right_nothing_held_back": float(y.mean()),
            "called": float(called.mean()), "right_of_called": float(y[called].mean()) if called.any() else 1.0,
            "wrong_called": float((called & ~y).mean()), "right_held_back": float((~called & y).mean()),
            "ece": expected_calibration_error(p_every, np.array([float(c.right) for c in every])),
            "curve": tool_curve(model, cases)}
