"""Confidence: the estimated probability that a candidate is the right capability for a question.

    model = ConfidenceModel.shipped()                               # router/stages/confidence_model.json
    probs = model.predict(candidate_features(scores, servers, sizes))  # one probability per candidate

The features describe a candidate among the ranked ones: its raw cosine and BM25 score (absolute
evidence; BM25 scaled by the catalog's size), its lead over the best other candidate (a runner-up has
a negative lead), whether it is the best by cosine and by BM25 (the two retrievers agree), how far its
server's best candidate is ahead of every other server's, and how many of the top candidates share
its server (a question that keeps to one server is usually about it; a server with one capability is
marked, since the share says nothing there).
A logistic regression over them, followed by an isotonic map fitted on held-out outcomes, gives the
probability; `benchmarks/abstention.py` fits both on labelled questions and writes the parameter
file. Applying them needs only numpy.

A second model of the same form tells the tools of one backend apart: given that a candidate's backend
is the right one, the probability that the candidate is the right one of its tools
(`ConfidenceModel.shipped_tool()` over `tool_features`: its lead over the best other candidate of its
own backend, by retrieval score and by cosine, its cosine and BM25 score, how many tools the backend
has and how many of them crowd the top). A backend can be clearly right while its tools are not
clearly told apart ("Remember that my favourite colour is blue" against a memory server's nine
knowledge-graph tools); then the router asks which tool instead of calling one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

SHIPPED = Path(__file__).with_name("confidence_model.json")
SHIPPED_TOOL = Path(__file__).with_name("tool_confidence_model.json")
FEATURES = ("dense", "bm25_scaled", "lead", "dense_lead", "best_dense", "best_bm25", "server_share",
            "single_capability", "server_lead")
TOP = 5  # candidates whose servers count for `server_share`
# Features that only ever count for a candidate (all but the one-capability mark): fitted with
# non-negative weights, so more evidence never lowers the probability.
EVIDENCE = np.array([name != "single_capability" for name in FEATURES])
TOOL_FEATURES = ("tool_lead", "tool_dense_lead", "dense", "bm25_scaled", "log_tools", "tools_in_top")
TOOL_EVIDENCE = np.array([name not in ("log_tools", "tools_in_top") for name in TOOL_FEATURES])


class _Scores(Protocol):
    """What a candidate's features are computed from (a ScoreBreakdown has them all)."""

    @property
    def dense(self) -> float: ...

    @property
    def bm25(self) -> float: ...

    @property
    def match(self) -> float: ...

    @property
    def intent_bonus(self) -> float: ...


def candidate_features(scores: Sequence[_Scores], servers: Sequence[str],
                       server_sizes: Mapping[str, int] | None = None) -> np.ndarray:
    """One row of FEATURES per candidate (`scores[i]` and `servers[i]` describe candidate i);
    `server_sizes`: capabilities per server in the whole catalog.

    Values that depend on the catalog's size are scaled so that a model fitted on one catalog
    applies to another: BM25 by the largest IDF the catalog allows (``log(1 + N)``), the share of
    top candidates on the same server by how many of them that server could have. The lead uses the
    retrieval score without the intent bonus, so a configured intent does not move the probability
    outside what the model was fitted on."""
    n = len(scores)
    if n == 0:
        return np.zeros((0, len(FEATURES)))
    sizes = dict(server_sizes or {})
    catalog_size = sum(sizes.values()) or n
    retrieval = np.array([s.match - s.intent_bonus for s in scores])
    dense = np.array([s.dense for s in scores])
    bm25 = np.maximum(np.array([s.bm25 for s in scores]), 0.0)
    # Each candidate's server as an index, its size, and how many of the top candidates it holds.
    ids: dict[str, int] = {}
    server = np.array([ids.setdefault(x, len(ids)) for x in servers])
    size = np.array([sizes.get(x, TOP) for x in ids])[server]
    top = np.argsort(-retrieval, kind="stable")[:TOP]
    is_top = np.zeros(n)
    is_top[top] = 1.0
    in_top = np.bincount(server[top], minlength=len(ids))[server]
    same = in_top - is_top  # the others of its server among the top
    could = np.minimum(len(top) - is_top, size - 1)  # a candidate outside the top could have all of it
    best_of_server = np.full(len(ids), -np.inf)
    np.maximum.at(best_of_server, server, retrieval)
    return np.column_stack([
        dense,
        bm25 / math.log1p(catalog_size),
        retrieval - _best_other(retrieval),
        dense - _best_other(dense),
        dense >= dense.max(),
        (bm25 > 0) & (bm25 >= bm25.max()),
        np.where(could > 0, same / np.maximum(could, 1), 0.0),
        size == 1,  # the share says nothing about a one-capability server
        best_of_server[server] - _best_other(best_of_server)[server],
    ]).astype(np.float64)


def _best_other(values: np.ndarray) -> np.ndarray:
    """For each item, the largest of the other items (0 when there is no other)."""
    if values.size < 2:
        return np.zeros(values.size)
    first, second = np.sort(values)[::-1][:2]
    out = np.full(values.size, first)
    out[int(np.argmax(values))] = second
    return out


def tool_features(scores: Sequence[_Scores], servers: Sequence[str],
                  server_sizes: Mapping[str, int] | None = None) -> np.ndarray:
    """One row of TOOL_FEATURES per candidate: how it stands among the other candidates of its own
    backend. A backend's other tools that are not among the candidates rank below all of them, so for
    a candidate alone of its backend the lead is taken over the last candidate (a lower bound)."""
    n = len(scores)
    if n == 0:
        return np.zeros((0, len(TOOL_FEATURES)))
    sizes = dict(server_sizes or {})
    catalog_size = sum(sizes.values()) or n
    retrieval = np.array([s.match - s.intent_bonus for s in scores])
    dense = np.array([s.dense for s in scores])
    bm25 = np.maximum(np.array([s.bm25 for s in scores]), 0.0)
    same = np.array([[a == b for b in servers] for a in servers]) & ~np.eye(n, dtype=bool)
    has_other = same.any(axis=1)

    def lead(values: np.ndarray) -> np.ndarray:
        best_other = np.where(same, values[None, :], -np.inf).max(axis=1)
        return values - np.where(has_other, best_other, values.min())

    size = np.array([sizes.get(x, 1) for x in servers], dtype=np.float64)
    could = np.minimum(n - 1, size - 1)
    return np.column_stack([
        lead(retrieval),
        lead(dense),
        dense,
        bm25 / math.log1p(catalog_size),
        np.log(np.maximum(size, 1.0)),
        np.where(could > 0, same.sum(axis=1) / np.maximum(could, 1), 0.0),
    ]).astype(np.float64)


@dataclass(frozen=True, slots=True)
class ConfidenceModel:
    """Standardise, logistic regression, then an isotonic map (piecewise linear through its knots)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    iso_x: np.ndarray  # increasing logistic outputs ...
    iso_y: np.ndarray  # ... and the calibrated probabilities there (non-decreasing)
    threshold: float  # the `routing.min_confidence` the benchmark chose with this model
    meta: dict[str, Any]
    names: tuple[str, ...] = FEATURES  # the features, in order (TOOL_FEATURES for the tool model)

    def logistic(self, features: np.ndarray) -> np.ndarray:
        z = ((features - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))

    def predict(self, features: np.ndarray) -> np.ndarray:
        if features.shape[0] == 0:
            return np.zeros(0)
        raw = self.logistic(features)
        if self.iso_x.size == 0:
            return raw
        return np.clip(np.interp(raw, self.iso_x, self.iso_y), 0.0, 1.0)

    def to_json(self) -> dict[str, Any]:
        return {"features": list(self.names), "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "coef": self.coef.tolist(), "intercept": self.intercept, "isotonic_x": self.iso_x.tolist(),
                "isotonic_y": self.iso_y.tolist(), "threshold": self.threshold, "meta": self.meta}

    @classmethod
    def from_json(cls, data: dict[str, Any], names: tuple[str, ...] = FEATURES) -> ConfidenceModel:
        if tuple(data.get("features", ())) != names:
            raise ValueError(f"confidence parameters are for features {data.get('features')}, not {list(names)}")
        arr = np.asarray
        return cls(mean=arr(data["mean"], float), scale=arr(data["scale"], float), coef=arr(data["coef"], float),
                   intercept=float(data["intercept"]), iso_x=arr(data.get("isotonic_x", []), float),
                   iso_y=arr(data.get("isotonic_y", []), float), threshold=float(data.get("threshold", 0.5)),
                   meta=dict(data.get("meta", {})), names=names)

    @classmethod
    def load(cls, path: Path, names: tuple[str, ...] = FEATURES) -> ConfidenceModel:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")), names)

    @staticmethod
    def shipped() -> ConfidenceModel:
        """The backend-level model (`candidate_features`)."""
        return _shipped(SHIPPED, FEATURES)

    @staticmethod
    def shipped_tool() -> ConfidenceModel:
        """The tool-level model (`tool_features`): which tool, given the backend."""
        return _shipped(SHIPPED_TOOL, TOOL_FEATURES)


@cache
def _shipped(path: Path, names: tuple[str, ...]) -> ConfidenceModel:
    return ConfidenceModel.load(path, names)


# ---------------------------------------------------------------------------------------------
# Fitting (used by benchmarks/abstention.py; plain numpy, so that the router needs nothing more)


def fit_calibrated(x: np.ndarray, y: np.ndarray, folds: np.ndarray, nonnegative: np.ndarray,
                   names: tuple[str, ...] = FEATURES) -> ConfidenceModel:
    """Logistic regression on every row; the isotonic map on out-of-fold predictions (`folds`: 0 or 1 per
    row, so that no row informs its own calibration)."""
    oof = np.zeros(len(y))
    for f in (0, 1):
        m, s, c, b = fit_logistic(x[folds != f], y[folds != f], nonnegative=nonnegative)
        oof[folds == f] = ConfidenceModel(m, s, c, b, np.zeros(0), np.zeros(0), 0.5, {}, names).logistic(
            x[folds == f])
    iso_x, iso_y = fit_isotonic(oof, y)
    mean, scale, coef, intercept = fit_logistic(x, y, nonnegative=nonnegative)
    return ConfidenceModel(mean, scale, coef, intercept, iso_x, iso_y, 0.5, {}, names)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iterations: int = 50,
                 nonnegative: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method on standardised features:
    (mean, scale, coef, intercept). `nonnegative` marks features that are evidence for a candidate
    (a larger lead, a higher cosine): a coefficient fitted below zero there is set to zero and the rest
    refitted, until none is. Without that, correlated features got negative weights that rewarded a
    runner-up for being far behind (a question's second tool more confident than its first)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    standard = (x - mean) / scale
    free = np.ones(x.shape[1], dtype=bool)
    must_be_positive = np.zeros(x.shape[1], dtype=bool) if nonnegative is None else np.asarray(nonnegative)
    while True:
        coef = np.zeros(x.shape[1])
        coef[free], intercept = _newton(standard[:, free], y, l2, iterations)
        wrong = must_be_positive & (coef < 0)
        if not wrong.any():
            return mean, scale, coef, intercept
        free[int(np.argmin(np.where(wrong, coef, 0.0)))] = False


def _newton(z: np.ndarray, y: np.ndarray, l2: float, iterations: int) -> tuple[np.ndarray, float]:
    z = np.hstack([z, np.ones((len(z), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0  # the intercept is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -50, 50)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def fit_isotonic(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pool-adjacent-violators: a non-decreasing map from `p` to the observed rate of `y`, as knots
    (one per pooled block, at its mean `p`) for linear interpolation."""
    order = np.argsort(p, kind="stable")
    blocks: list[list[float]] = []  # [sum_y, count, sum_p]
    for i in order:
        blocks.append([float(y[i]), 1.0, float(p[i])])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            sy, c, sp = blocks.pop()
            blocks[-1][0] += sy
            blocks[-1][1] += c
            blocks[-1][2] += sp
    xs = np.array([b[2] / b[1] for b in blocks])
    ys = np.array([b[0] / b[1] for b in blocks])
    return xs, ys


def expected_calibration_error(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Mean |confidence - accuracy| over equal-width bins, weighted by how many predictions fall in each."""
    if p.size == 0:
        return 0.0
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    total = 0.0
    for b in range(bins):
        mask = which == b
        if mask.any():
            total += mask.sum() * abs(float(p[mask].mean()) - float(y[mask].mean()))
    return total / p.size
