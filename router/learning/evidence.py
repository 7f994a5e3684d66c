"""What labelled examples say about a new question: the evidence routing adds to `match`.

    index = ExampleIndex(store.all(), settings.learning, min_confidence=settings.routing.min_confidence)
    evidence = index.evidence(question_vector, unsure=retrieval_top_confidence, doubt=1 - p_first_right)
    index.may_replace(retrieval_first_backend, learned_first_key, question_vector, retrieval_top_confidence)

An example says "this capability was right (+1) / wrong (-1) for this question", and remembers how sure
retrieval was when it was given (its confidence in that capability, and in its own first candidate).
Three kinds of evidence come from them, each shown in the score breakdown:

1. **Nearest examples.** Each example within `learning.min_similarity` of the question has a kernel that
   grows linearly to 1 at cosine 1: how likely it is to share the question's answer. Of a capability's
   `neighbours` largest, the chance that at least one right example applies (1 - prod(1 - kernel)) minus
   the same for its wrong ones is its score (-1 .. 1), so one close example speaks clearly, a few farther
   ones that agree add up, and a mix of right and wrong cancels out. Each kernel also counts by how much
   the example told retrieval something new: a +1 for a capability retrieval already gave confidence p
   counts 1 - p, a -1 counts p (an example without that record counts fully); and, unless the example
   is a paraphrase of the question (`paraphrase_similarity`), by retrieval's doubt about its own first
   candidate (1 - its confidence times its tool confidence): examples of similar questions speak where
   retrieval is unsure, not against what it is sure of; the question itself, reworded, counts whatever
   retrieval thought.
   The score times `learning.weight` is added to `match`.
2. **Rejections.** A backend that feedback rejected `reject_after` times more than it accepted it, for
   questions within `reject_similarity` of this one, is pushed down on all its capabilities by
   `reject_weight * n / (n + 1)`. One example that far away is noise; several that agree are a pattern.
   It reorders candidates, but does not by itself take a question from retrieval's first backend (the
   guard below).
3. **Learned default.** Among examples given where retrieval was unsure (its first candidate's confidence
   below `routing.min_confidence`, where the router declines), the capabilities that were right: once one
   has been right there `default_after` times, a question retrieval is unsure of gives it
   `default_weight * share * sqrt((threshold - t) / threshold)`, share being its part of those right
   answers net of wrong ones. It does not depend on the question's topic: it learns where users want the
   questions nothing fits (a general-knowledge backend), which nearest neighbours cannot.

And a guard (`may_replace`): retrieval's first backend keeps its place unless feedback knows it (it has a
right example), corrected it on this very question (more wrong than right within `paraphrase_similarity`),
or retrieval is unsure and the new first is a learned default. So a backend nobody gave feedback on keeps
the questions retrieval sends it: when two backends do the same job and users taught only one, the other
does not lose its questions to it, and rejections of it for other questions, however similar, do not
take its own from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from router.settings import LearningSettings
from router.values import CapabilityId

if TYPE_CHECKING:
    from router.learning.examples import Example


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """What the examples say about one capability for one question."""

    examples: int  # how many examples the capability has
    nearest: float  # cosine of the nearest one to the question
    score: float  # -1 .. 1: the nearest examples' verdict, weighted by closeness, news and retrieval's doubt
    contribution: float  # what is added to `match`: weight * score, plus the two below
    rejections: int = 0  # its backend's rejections net of acceptances within reject_similarity
    default: float = 0.0  # what the learned default added (only when retrieval is unsure)
    nearest_own: float = 0.0  # cosine of the nearest example the asking caller gave saying it was right




class ExampleIndex:
    """The examples as one matrix, grouped by capability, for the evidence of a question vector."""

    def __init__(self, examples: Sequence[Example], settings: LearningSettings, min_confidence: float = 0.0) -> None:
        """`min_confidence`: `routing.min_confidence`, below which retrieval counts as unsure."""
        self.settings = settings
        self.threshold = min_confidence
        # Mixed sizes: a change of embedding model left stale vectors. They say nothing until deleted; those of
        # the size of the newest example, given since the change, speak.
        newest = max(examples, key=lambda e: e.created, default=None)
        self.dim = None if newest is None else np.asarray(newest.vector).size
        ordered = sorted((e for e in examples if np.asarray(e.vector).size == self.dim),
                         key=lambda e: (e.key, e.id or 0))
        self.size = len(ordered)
        keys = [e.key for e in ordered]
        starts = [i for i, key in enumerate(keys) if i == 0 or keys[i - 1] != key]  # sorted: one run per key
        self.keys: list[str] = [keys[i] for i in starts]
        self._starts = np.array(starts, dtype=np.int64)
        self._counts = np.diff(np.append(self._starts, len(keys))).astype(np.int64)
        self._key_group = {k: g for g, k in enumerate(self.keys)}
        if ordered:
            m = np.stack([np.asarray(e.vector, dtype=np.float32).ravel() for e in ordered])
            self._matrix = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
        else:
            self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._labels = np.array([e.label for e in ordered], dtype=np.float32)
        givers = {g: i for i, g in enumerate(dict.fromkeys(e.principal or "" for e in ordered))}  # "": anonymous
        self._giver_of = givers
        self._giver = np.array([givers[e.principal or ""] for e in ordered], dtype=np.int64)
        p = np.array([np.nan if e.confidence is None else e.confidence for e in ordered], dtype=np.float32)
        news = np.where(self._labels > 0, 1.0 - p, p)
        self._news = np.where(np.isnan(news), 1.0, np.clip(news, 0.0, 1.0)).astype(np.float32)
        self.backends: list[str] = sorted({e.backend for e in ordered})
        index = {b: i for i, b in enumerate(self.backends)}
        self._backend = np.array([index[e.backend] for e in ordered], dtype=np.int64)
        self._backend_index = index
        self._confirmed = {e.backend for e in ordered if e.label > 0}
        self._default = self._learned_default(ordered)

    def _learned_default(self, ordered: Sequence[Example]) -> dict[str, float]:
        """Capability key -> its share of the right answers where retrieval was unsure (net of wrong ones)."""
        net: dict[str, int] = {}
        right: dict[str, int] = {}
        events = 0
        for e in ordered:
            if e.top_confidence is None or e.top_confidence >= self.threshold:
                continue
            net[e.key] = net.get(e.key, 0) + e.label
            if e.label > 0:
                right[e.key] = right.get(e.key, 0) + 1
                events += 1
        after = self.settings.default_after
        return {k: n / (events + 1) for k, n in net.items() if n < 0 or right.get(k, 0) >= after}

    def __len__(self) -> int:
        return self.size

    def _similarities(self, vector: Any) -> np.ndarray | None:
        if vector is None or not self.size:
            return None
        q = np.asarray(vector, dtype=np.float32).ravel()
        if q.size != self.dim:
            return None
        return self._matrix @ (q / (float(np.linalg.norm(q)) or 1.0))

    def _net_rejections(self, sims: np.ndarray, within: float) -> np.ndarray:
        """Per backend: how many more times it was wrong than right for questions within `within`."""
        near = sims >= within
        return -np.bincount(self._backend[near], weights=self._labels[near], minlength=len(self.backends))

    def evidence(self, vector: Any, unsure: float | None = None, doubt: float = 1.0,
                 caller: str = "") -> QuestionEvidence:
        """Capability key -> evidence for the question (empty without a vector or examples). `unsure`:
        retrieval's confidence in its own first candidate for the question (no learned default without it).
        `doubt`: how likely that candidate is wrong (1 - its confidence times its tool confidence): examples of
        similar questions, not of this one reworded, count in proportion to it. `caller`: who asks (its own
        examples that a capability was right are told apart: `Evidence.nearest_own`)."""
        sims = self._similarities(vector)
        if sims is None:
            return QuestionEvidence(self, None, None, None, {}, {})
        s = self.settings
        tau, k = s.min_similarity, s.neighbours
        nearest = np.maximum.reduceat(sims, self._starts)
        kernel = np.clip((sims - tau) / (1.0 - tau), 0.0, 1.0) * self._news
        kernel = np.where(sims >= s.paraphrase_similarity, kernel, kernel * doubt)
        knn = np.zeros(len(self.keys))
        for g in np.nonzero(nearest > tau)[0]:  # only capabilities with an example that close
            lo, hi = self._starts[g], self._starts[g] + self._counts[g]
            kg, labels = kernel[lo:hi], self._labels[lo:hi]
            knn[g] = _any_applies(kg[labels > 0], k) - _any_applies(kg[labels < 0], k)
        rejections = self._net_rejections(sims, s.reject_similarity)
        demoted = {self.backends[b]: -s.reject_weight * float(n) / (float(n) + 1.0)
                   for b, n in enumerate(rejections) if n >= s.reject_after}
        default: dict[str, float] = {}
        if unsure is not None and unsure < self.threshold and self._default:
            gain = ((self.threshold - unsure) / self.threshold) ** 0.5
            default = {key: s.default_weight * share * gain for key, share in self._default.items()}
        own = (self._giver == self._giver_of.get(caller, -1)) & (self._labels > 0)
        nearest_own = np.maximum.reduceat(np.where(own, sims, -1.0), self._starts)
        return QuestionEvidence(self, nearest, knn, rejections, demoted, default, nearest_own)

    def may_replace(self, first_backend: str, new_first_key: str, vector: Any, unsure: float | None) -> bool:
        """Whether examples may put `new_first_key` (of another backend) before retrieval's first candidate,
        of `first_backend` (see the guard in the module docstring)."""
        if first_backend in self._confirmed:
            return True
        if unsure is not None and unsure < self.threshold and self._default.get(new_first_key, 0.0) > 0:
            return True
        sims = self._similarities(vector)
        b = self._backend_index.get(first_backend)
        if sims is None or b is None:
            return False
        return bool(self._net_rejections(sims, self.settings.paraphrase_similarity)[b] > 0)


def _any_applies(kernels: np.ndarray, k: int) -> float:
    """1 - prod(1 - kernel) over the k largest kernels: how likely at least one of these examples applies."""
    return float(1.0 - np.prod(1.0 - np.sort(kernels)[-k:])) if kernels.size else 0.0


class QuestionEvidence(Mapping[str, Evidence]):
    """The evidence for one question, kept as arrays; an `Evidence` is built when a capability is looked up
    (a rejected backend's capabilities are found by their backend, whether or not they have examples)."""

    def __init__(self, index: ExampleIndex, nearest: np.ndarray | None, knn: np.ndarray | None,
                 rejections: np.ndarray | None, demoted: dict[str, float], default: dict[str, float],
                 nearest_own: np.ndarray | None = None) -> None:
        self._index, self._nearest, self._knn, self._rejections = index, nearest, knn, rejections
        self._demoted, self._default, self._nearest_own = demoted, default, nearest_own

    def __getitem__(self, key: str) -> Evidence:
        if self._knn is None or self._nearest is None or self._rejections is None:
            raise KeyError(key)
        group = self._index._key_group.get(key)
        backend = CapabilityId.parse(key).backend
        demoted, default = self._demoted.get(backend, 0.0), self._default.get(key, 0.0)
        if group is None and not demoted and not default:
            raise KeyError(key)
        score = float(self._knn[group]) if group is not None else 0.0
        b = self._index._backend_index.get(backend)
        return Evidence(examples=int(self._index._counts[group]) if group is not None else 0,
                        nearest=round(float(self._nearest[group]), 4) if group is not None else 0.0,
                        score=round(score, 4),
                        contribution=round(self._index.settings.weight * score + demoted + default, 4),
                        rejections=int(self._rejections[b]) if b is not None else 0, default=round(default, 4),
                        nearest_own=round(float(self._nearest_own[group]), 4)
                        if group is not None and self._nearest_own is not None else 0.0)

    def _keys(self) -> list[str]:
        return [] if self._knn is None else list(dict.fromkeys([*self._index.keys, *self._default]))

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def positive(self) -> list[str]:
        """The capabilities the examples vouch for on this question (a positive contribution), found from the
        arrays: only those with a positive nearest-neighbour score or a learned default can have one."""
        if self._knn is None:
            return []
        maybe = {self._index.keys[g] for g in np.nonzero(self._knn > 0)[0]} | set(self._default)
        return [key for key in maybe if self[key].contribution > 0]
