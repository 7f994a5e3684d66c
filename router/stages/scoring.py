"""The composite score: ``w_match * match + w_health * health + w_perf * perf`` per candidate.

- match: the retrieval score (the capability's fused dense + BM25 score, blended with its server
  document's by `server_weight`), plus `intent_bonus` when the backend (or the capability)
  declares the request's intent, plus what labelled examples say about this question
  (`router.learning.evidence`: the capability's nearest examples, a pattern of rejections of its backend, a
  learned default where retrieval is unsure);
- health: 1 healthy, 0.5 degraded or starting, 0 down or ejected;
- perf: ``0.7 * success rate of the last 10 calls + 0.3 * (1 - min(mean latency ms / 5000, 1))``,
  0.5 with no history. History is per (backend, intent), falling back to the backend's overall
  history when this intent has none.

Each candidate also gets a confidence (router/stages/confidence.py): the probability that its backend is
the right one, from its retrieval evidence alone; and a tool confidence: given that, the probability
that it is the right one of the backend's tools. Candidates at or above `routing.min_confidence`,
whose retrieval score is also at least `min_relative_match` of the best one's, and whose tool
confidence reaches `min_tool_confidence`, are relevant, i.e. worth calling, and so are those whose
labelled examples vouch for them on the question; health and performance only order them. A
candidate whose backend is likely but whose tool is not clearly told from its backend's others is
marked `unclear_tool`: the decision then asks which tool was meant rather than calling one.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from router.learning.evidence import Evidence
from router.models import ScoreBreakdown
from router.retrieval.catalog import Ranked
from router.settings import RoutingSettings
from router.stages.confidence import ConfidenceModel, candidate_features, tool_features
from router.values import BackendStatus, Candidate, Capability

ANY_INTENT = "*"
_HEALTH = {"healthy": 1.0, "degraded": 0.5, "starting": 0.5, "down": 0.0, "ejected": 0.0}


@dataclass(frozen=True, slots=True, kw_only=True)
class PerfSnapshot:
    """Recent performance of one backend for one intent (or all intents: ``intent == "*"``)."""

    backend: str
    intent: str
    count: int
    success_rate_10: float
    mean_latency_ms_10: float
    success_rate: float
    mean_latency_ms: float
    p95_latency_ms: float
    p95_latency_ms_10: float
    p50_latency_ms: float = 0.0

    @property
    def score(self) -> float:
        return perf_score(self)


def perf_score(snapshot: PerfSnapshot | None) -> float:
    if snapshot is None or snapshot.count == 0:
        return 0.5
    return 0.7 * snapshot.success_rate_10 + 0.3 * (1 - min(snapshot.mean_latency_ms_10 / 5000.0, 1.0))


def health_score(status: BackendStatus | None) -> float:
    if status is None or (status.health == "ejected" and status.ejected_by is not None):
        # Failing for one caller, not known to fail the others.
        return 0.5
    return _HEALTH.get(status.health, 0.0)


def lookup_perf(perf: Mapping[tuple[str, str], PerfSnapshot], backend: str, intent: str) -> PerfSnapshot | None:
    snap = perf.get((backend, intent))
    if snap is not None and snap.count:
        return snap
    return perf.get((backend, ANY_INTENT))


class Scorer:
    """Composite scores and confidences of ranked capabilities, with what stays the same from one decision
    to the next: the routing settings, the intents each backend declares, and the two confidence models
    (default: the shipped ones).

        candidates = Scorer(settings.routing).score(ranked, "general", statuses, perf)
    """

    def __init__(self, settings: RoutingSettings, backend_intents: Mapping[str, tuple[str, ...]] | None = None,
                 confidence: ConfidenceModel | None = None, tool_confidence: ConfidenceModel | None = None,
                 acting_similarity: float = 0.8) -> None:
        self.settings = settings
        self.acting_similarity = acting_similarity  # `learning.acting_similarity`
        self.backend_intents = backend_intents or {}
        self.confidence = confidence or ConfidenceModel.shipped()
        self.tool_confidence = tool_confidence or ConfidenceModel.shipped_tool()

    def score(self, ranked: Sequence[Ranked], intent: str, statuses: Mapping[str, BackendStatus],
              perf: Mapping[tuple[str, str], PerfSnapshot], server_sizes: Mapping[str, int] | None = None, *,
              dense: bool = True, evidence: Mapping[str, Evidence] | None = None,
              tool_chosen: bool = False, backend_chosen: bool = False,
              ceiling: Mapping[str, tuple[float, float]] | None = None) -> list[Candidate]:
        """Composite-scored candidates, best first, each with its confidence; `relevant` marks those whose
        confidence clears `min_confidence`, or whose labelled examples vouch for them on this question.
        `server_sizes`: capabilities per backend in the whole catalog (the features are scaled by them).
        `dense`: whether the ranking had embeddings. The model was fitted with them; without (the embedding
        model failed, the router routes on BM25 alone) a candidate is relevant when it shares a keyword with
        the question, and its confidence is still reported. `evidence`: what each capability's labelled
        examples say about the question, by capability key. `tool_chosen`: the caller named the tool, so
        which tool is not in doubt; `backend_chosen`: the caller named the backend, so which backend is not.
        `ceiling`: the most each capability's confidence and tool confidence may be, by key (a policy hides part
        of the catalog: what a caller who sees everything gets; 0 for a capability not in it).
        A capability that may change something is relevant only when it is likely enough to be the right one
        (`min_action_confidence`): an action is never taken on a guess."""
        settings = self.settings
        if not ranked:
            return []
        # The same capability offered by several backends (replicas of one server) is one choice: its copies
        # take the scores and confidences of the best-ranked one (their texts differ only by the backend's
        # name), and health and performance alone decide between them.
        group = _copies(ranked)
        reps = [group.index(g) for g in range(max(group) + 1)]  # each group's best-ranked copy
        parts, raws, vouched = self._parts([ranked[reps[g]] for g in group], ranked, intent, statuses, perf, evidence)
        rep_backends = [ranked[i].capability.backend for i in reps]
        rep_probs = self.confidence.predict(candidate_features([raws[i] for i in reps], rep_backends, server_sizes))
        sizes = server_sizes or {}
        predicted = self.tool_confidence.predict(tool_features([raws[i] for i in reps], rep_backends, sizes))
        # A backend with one capability leaves no doubt about which; neither does a caller who named the tool.
        rep_tools = [1.0 if tool_chosen or sizes.get(b, 1) <= 1 else float(p)
                     for b, p in zip(rep_backends, predicted, strict=True)]
        shadowed = _prompts_of_tools(ranked, group, rep_tools)
        if ceiling is not None and not tool_chosen:
            top: dict[int, tuple[float, float]] = {}  # copies share their scores: the highest of theirs holds
            for r, g in zip(ranked, group, strict=True):
                c, t = ceiling.get(r.capability.key, (0.0, 0.0))
                top[g] = (max(c, top[g][0]), max(t, top[g][1])) if g in top else (c, t)
            rep_probs = np.minimum(rep_probs, [top[g][0] for g in range(len(rep_probs))])
            rep_tools = [min(tp, top[g][1]) for g, tp in enumerate(rep_tools)]
        best = max(r.score for r in ranked)

        def likely(r: Ranked, p: float) -> bool:
            fits = p >= settings.min_confidence if dense else r.hit.bm25 > 0
            return fits and (best <= 0 or r.score >= settings.min_relative_match * best)

        out = []
        for r, g, kw, v in zip(ranked, group, parts, vouched, strict=True):
            if g in shadowed:
                continue
            rep, p, tp = ranked[reps[g]], float(rep_probs[g]), rep_tools[g]
            backend_fits = likely(rep, p)
            # Without embeddings the tool model, fitted with them, does not apply.
            clear = tp >= settings.min_tool_confidence or not dense
            right = tp if backend_chosen else p * tp  # the estimated probability it is the one meant
            cap = r.capability
            acts = may_act(cap) and not tool_chosen
            guess = acts and right < settings.min_action_confidence
            # Examples that vouch for a capability on questions like this one make it worth calling; for one that
            # acts, only the asking caller's own of this very request reworded do (`acting_similarity`), not a
            # faint neighbour, a default learned for whatever is unsure, nor another caller's word.
            ev = (evidence or {}).get(cap.key)
            v = v and (not acts or (ev is not None and ev.contribution - ev.default > 0
                                    and ev.nearest_own >= self.acting_similarity))
            scores = ScoreBreakdown(**kw, confidence=round(p, 4), tool_confidence=round(tp, 4))
            fits = backend_fits and clear
            # With the backend named, it is called on its best match whatever the fit: unless that acts on a guess.
            out.append(Candidate(cap, scores, relevant=v or (fits and not guess),
                                 unclear_tool=not v and backend_fits and not clear,
                                 unsure_action=not v and (fits or backend_chosen) and guess))
        kept = [g for g in group if g not in shadowed]
        order = sorted(range(len(out)), key=lambda i: -out[i].scores.composite)
        return _healthiest_copy_first([out[i] for i in order], [kept[i] for i in order], statuses, perf, intent)

    def _parts(self, reps: Sequence[Ranked], ranked: Sequence[Ranked], intent: str,
               statuses: Mapping[str, BackendStatus], perf: Mapping[tuple[str, str], PerfSnapshot],
               evidence: Mapping[str, Evidence] | None) -> tuple[list[dict[str, Any]], list[_Raw], list[bool]]:
        """Each candidate's score components: retrieval's and the examples' from its group's best copy
        (`reps`), health and performance its own backend's."""
        settings, w = self.settings, self.settings.weights
        parts: list[dict[str, Any]] = []
        raws, vouched = [], []
        for rep, r in zip(reps, ranked, strict=True):
            cap = r.capability
            declared = intent in cap.intents or intent in self.backend_intents.get(cap.backend, ())
            bonus = settings.intent_bonus if declared else 0.0
            ev = (evidence or {}).get(cap.key)
            learned = ev.contribution if ev is not None else 0.0
            match = rep.score + bonus + learned
            health = health_score(statuses.get(cap.backend))
            perf_value = perf_score(lookup_perf(perf, cap.backend, intent))
            composite = w.match * match + w.health * health + w.perf * perf_value
            h = rep.hit
            parts.append(dict(
                dense=round(h.dense, 4), bm25=round(h.bm25, 4), dense_norm=round(h.dense_norm, 4),
                bm25_norm=round(h.bm25_norm, 4), hybrid=round(h.hybrid, 4), server=round(rep.server_score or 0.0, 4),
                intent_bonus=bonus, examples=ev.examples if ev else 0, nearest_example=ev.nearest if ev else 0.0,
                rejections=ev.rejections if ev else 0, learned_default=ev.default if ev else 0.0, learned=learned,
                match=round(match, 4), health=health, perf=round(perf_value, 4), composite=round(composite, 4),
            ))
            # The features use raw values: rounding would move a candidate's confidence. They describe the
            # retrieval evidence the model was fitted on, so without what examples added.
            raws.append(_Raw(h.dense, h.bm25, match - learned, bonus))
            vouched.append(learned > 0)
        return parts, raws, vouched


def may_act(cap: Capability) -> bool:
    """Whether calling it may change something: not marked read-only, and something to call (a server known only
    by its description, or a held tool, acts on nothing)."""
    return not (cap.read_only or cap.held or (cap.server_level and cap.target is None))


def _prompts_of_tools(ranked: Sequence[Ranked], group: list[int], tool_confidences: list[float]) -> set[int]:
    """The groups of prompts named as a tool of their backend (copies included: on any backend of one, its copy of
    the tool), each one choice with that tool: the fetch server offers `fetch` both ways, never too close to call
    against itself. The tool answers for both (a prompt's messages answer a client that asks for the prompt,
    `prompts/get` through the gateway); the prompt's tool confidence is added to a tool that only reads, never to one
    that may act, which a prompt does not make likelier to be meant to act."""
    tools = {(r.capability.backend, r.capability.name): g for r, g in zip(ranked, group, strict=True)
             if r.capability.kind == "tool"}
    shadowed: set[int] = set()
    for r, g in zip(ranked, group, strict=True):
        tool = tools.get((r.capability.backend, r.capability.name)) if r.capability.kind == "prompt" else None
        if tool is None or g in shadowed:
            continue
        shadowed.add(g)
        if ranked[group.index(tool)].capability.read_only:
            tool_confidences[tool] = min(1.0, tool_confidences[tool] + tool_confidences[g])
    return shadowed


def _copies(ranked: Sequence[Ranked]) -> list[int]:
    """The group of each capability: identical ones (`Capability.same_as`: kind, name, description, schema and
    fixed arguments) on several backends share one; groups are numbered in order of their best-ranked copy."""
    first: dict[tuple[str, str, str, str, tuple[tuple[str, str], ...]], int] = {}
    return [first.setdefault((c.kind, c.name, c.description, json.dumps(c.input_schema, sort_keys=True), c.fixed),
                             len(first)) for c in (r.capability for r in ranked)]


def _healthiest_copy_first(candidates: list[Candidate], group: list[int], statuses: Mapping[str, BackendStatus],
                           perf: Mapping[tuple[str, str], PerfSnapshot], intent: str) -> list[Candidate]:
    """Copies of one capability keep their group's places, healthiest first, then the surest, then the
    fastest (recent mean latency, which a slow tail raises): the copy that serves best takes the calls,
    however little that moves a composite score built for telling different capabilities apart. A copy with
    no history yet comes after one as sure that has served: what it would take is unknown."""
    def key(c: Candidate) -> tuple[float, float, float]:
        snap = lookup_perf(perf, c.capability.backend, intent)
        return (-health_score(statuses.get(c.capability.backend)), -(snap.success_rate_10 if snap else 1.0),
                snap.mean_latency_ms_10 if snap else math.inf)

    out = list(candidates)
    for g in set(group):
        slots = [i for i, x in enumerate(group) if x == g]
        if len(slots) < 2:
            continue
        ranked = sorted((candidates[i] for i in slots), key=key)
        for slot, c in zip(slots, ranked, strict=True):
            moved = c is not candidates[slot] and c.scores.composite < candidates[slot].scores.composite
            out[slot] = dataclasses.replace(c, placed="the healthiest, fastest copy of the same capability") \
                if moved else c
    return out


@dataclass(frozen=True, slots=True)
class _Raw:
    dense: float
    bm25: float
    match: float
    intent_bonus: float
