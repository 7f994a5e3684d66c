"""decide: the ranked candidates for a request, with their composite scores, and the verdict on them.

Candidates come from the hybrid index (retrieval results are cached per question until the index
changes), scored with live health and performance. The verdict is `route`, `no_match` (nothing is
confident enough: every candidate's confidence is below `routing.min_confidence`, so the router
abstains) or `ambiguous` (two different tools too close to call, or the best backend is likely right
but which of its tools is not clear: the router asks rather than calling one). An explicit backend
narrows the search to it; with `fallback_on_override` the routed candidates of the other backends
follow it, from the same pass. A session's backend goes first while it is up and relevant.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from router.cache import LRU
from router.errors import UnknownBackend, UnknownCapability
from router.learning.evidence import Evidence, ExampleIndex, QuestionEvidence
from router.literals import DecisionKind, Verdict
from router.request import Request
from router.retrieval.catalog import CatalogIndex, Ranked
from router.settings import RouterSettings
from router.stages.confidence import ConfidenceModel
from router.stages.scoring import PerfSnapshot, Scorer
from router.telemetry import TRACER
from router.values import Analysis, BackendStatus, Candidate, CapabilityId, Catalog, Decision


@dataclass(frozen=True, slots=True)
class View:
    """What one caller routes within: the index and catalogs its policy allows, and the backends it may
    name (None: every configured one). `whole`: for a restricted view, the index it is cut from."""

    index: CatalogIndex | None
    catalogs: Mapping[str, Catalog]
    known: Sequence[str] | None = None
    whole: CatalogIndex | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Live:
    """What a decision reads of the moment: health and performance, the labelled examples whose evidence
    steers it (router.learning.evidence), and the backend of the request's session."""

    statuses: Mapping[str, BackendStatus] = field(default_factory=dict)
    perf: Mapping[tuple[str, str], PerfSnapshot] = field(default_factory=dict)
    examples: ExampleIndex | None = None
    sticky: str | None = None


class Decider:
    def __init__(self, settings: RouterSettings, confidence: ConfidenceModel | None = None,
                 tool_confidence: ConfidenceModel | None = None) -> None:
        """`confidence`, `tool_confidence`: the models that estimate each candidate's backend-level and
        tool-level confidence (default: the shipped ones)."""
        self.settings = settings
        self.scorer = Scorer(settings.routing, {b.name: tuple(b.intents) for b in settings.backends}, confidence,
                             tool_confidence, settings.learning.acting_similarity)
        self._known = sorted(b.name for b in settings.backends)
        self._sizes: dict[int, tuple[CatalogIndex, dict[str, int]]] = {}  # by index: the whole one and each view's
        # Retrieval results per (caller, question, k, backend, index), valid for the index they were computed
        # on (each principal with a restricted policy has its own index). Per caller as the analysis is.
        self._ranked: LRU[tuple[str, str, int, str | None, int], tuple[CatalogIndex, list[Ranked]]] = LRU(
            settings.routing.query_cache_size)
        # Scored candidates per (caller, question, intent, owner, tool, k): valid while the index, health, performance
        # and examples they were scored with are the same objects (a replica replaces each when it changes,
        # about once a second), so a question asked again is not scored again.
        self._taught: LRU[tuple[str, str, str, str | None, str | None, int], tuple[tuple[Any, ...],
                                                                              tuple[list[Candidate], float]]] = LRU(
            settings.routing.query_cache_size)

    def forget(self) -> None:
        """Drop what was kept for the index being replaced (each entry holds its index alive)."""
        self._sizes.clear()
        self._ranked.clear()
        self._taught.clear()

    def fanout(self) -> int:
        r = self.settings.resilience
        return max(r.parallel_k, r.consensus_k, r.max_attempts)

    def method_name(self, index: CatalogIndex | None) -> str:
        base = "hybrid" if index is not None and index.tools.dense else "bm25"
        return f"{base}_two_level" if self.settings.routing.method == "two_level" else base

    def decide(self, analysis: Analysis, view: View, live: Live, request: Request,
               started: float | None = None) -> Decision:
        """The ranked candidates for `request` within `view`, and the verdict. `started`: when the request's
        analysis began (perf_counter), so `decision_ms` covers it too."""
        started = time.perf_counter() if started is None else started
        index, catalogs = view.index, view.catalogs
        backend, tool = request.backend, request.tool
        known = self._known if view.known is None else view.known
        if backend is not None and backend not in known:
            raise UnknownBackend(f"unknown backend {backend!r}; configured: {', '.join(known)}", backend=backend)
        examples = live.examples
        with TRACER.start_as_current_span("router.decide") as span:
            want = max(request.k or self.settings.routing.candidates, self.fanout())

            sizes = self._server_sizes(index)

            def scored(ranked: Sequence[Ranked], owner: str | None, evidence: Mapping[str, Evidence] | None = None,
                       ceiling: Mapping[str, tuple[float, float]] | None = None) -> list[Candidate]:
                return self.scorer.score(ranked, analysis.intent, live.statuses, live.perf, sizes,
                                         dense=index is not None and index.tools.dense, evidence=evidence,
                                         tool_chosen=tool is not None, backend_chosen=owner is not None,
                                         ceiling=ceiling)

            def taught(owner: str | None) -> tuple[list[Candidate], float]:
                key = (analysis.caller, analysis.question, analysis.intent, owner, tool, want)
                inputs = (index, live.statuses, live.perf, examples)
                hit = self._taught.get(key)
                if hit is not None and all(a is b for a, b in zip(hit[0], inputs, strict=True)):
                    return list(hit[1][0]), hit[1][1]
                found = learn(owner)
                self._taught.put(key, (inputs, (list(found[0]), found[1])))
                return found

            def learn(owner: str | None) -> tuple[list[Candidate], float]:
                """The candidates with what the examples say, and retrieval's own confidence in its first."""
                ranked = self._retrieve(analysis, index, catalogs, want * 2, owner, tool)
                ceiling = None if tool is not None else self._as_for_anyone(analysis, view, live, want * 2, owner)
                plain = scored(ranked, owner, ceiling=ceiling)[:want]
                unsure = plain[0].scores.confidence if plain else 0.0
                if examples is None or not len(examples) or tool is not None:
                    return plain, unsure
                doubt = 1.0 - plain[0].scores.confidence * plain[0].scores.tool_confidence if plain else 1.0
                evidence = examples.evidence(analysis.vector, unsure, doubt, analysis.caller)
                if not evidence:
                    return plain, unsure
                learned = scored(_with_learned(ranked, analysis, index, evidence, owner), owner, evidence,
                                 ceiling)[:want]
                return _guarded(plain, learned, examples, analysis.vector, unsure), unsure

            candidates, unsure = taught(backend)
            kind: DecisionKind = "override" if backend else "route"
            if backend is not None and request.fallback_on_override:
                # The caller's backend first, then everything routing would have tried elsewhere: of a named tool,
                # its copies only (another tool of that name is not the one named).
                routed, _ = taught(None)
                candidates = first_placed(candidates[:1] + [
                    c for c in routed if c.capability.backend != backend and c.relevant
                    and (tool is None or not candidates or c.capability.same_as(candidates[0].capability))],
                    "the caller's backend")
            if live.sticky is not None and backend is None:
                candidates, kind = _stick(candidates, live.sticky, live.statuses, kind)
            verdict, message = self._verdict(candidates, backend, session=kind == "session")
            if tool is not None and backend is None and verdict == "route":
                verdict, message = _namesakes(candidates, tool) or (verdict, message)
            decision = Decision(analysis=analysis, method=self.method_name(index), candidates=tuple(candidates),
                                verdict=verdict, message=message, kind=kind, retrieval_confidence=unsure,
                                decision_ms=round((time.perf_counter() - started) * 1000, 3))
            _annotate(span, decision)
            return decision

    def tools_of(self, analysis: Analysis, view: View, live: Live, backend: str) -> tuple[Candidate, ...]:
        """Every tool of `backend` within `view`, ranked for the question as if the caller had named the backend."""
        sizes = self._server_sizes(view.index)
        if view.index is None or not sizes.get(backend):
            return ()
        ranked = self._retrieve(analysis, view.index, view.catalogs, sizes[backend], backend, None)
        return tuple(self.scorer.score(ranked, analysis.intent, live.statuses, live.perf, sizes,
                                       dense=view.index.tools.dense, backend_chosen=True,
                                       ceiling=self._as_for_anyone(analysis, view, live, sizes[backend], backend)))

    def _server_sizes(self, index: CatalogIndex | None) -> dict[str, int]:
        """Capabilities per backend of the index (the confidence features are scaled by them)."""
        if index is None:
            return {}
        hit = self._sizes.get(id(index))
        if hit is None or hit[0] is not index:
            hit = self._sizes[id(index)] = (index, {c.backend: len(c.capabilities) for c in index.texts.catalogs})
        return hit[1]

    def _as_for_anyone(self, analysis: Analysis, view: View, live: Live, k: int,
                       owner: str | None) -> dict[str, tuple[float, float]] | None:
        """For a caller whose policy hides part of the catalog: the most each capability's confidence and tool
        confidence may be, what a caller who sees everything gets (a capability such a caller does not rank among
        its `k` is not in it). Among only what its policy leaves, a backend or tool stands out: with only
        `write_file` allowed, "delete the file" would overwrite it, at tool confidence 1.0. Judged as for anyone,
        a policy never turns a guess into an action; the caller sees only its own candidates' lower confidences."""
        whole = view.whole
        if whole is None or view.index is None or len(view.index) == len(whole):
            return None
        wide = whole.search(analysis.question, analysis.vector, k, backends={owner} if owner else None)
        return {c.capability.key: (c.scores.confidence, c.scores.tool_confidence) for c in self.scorer.score(
            wide, analysis.intent, live.statuses, live.perf, self._server_sizes(whole), dense=whole.tools.dense,
            backend_chosen=owner is not None)}

    def _retrieve(self, analysis: Analysis, index: CatalogIndex | None, catalogs: Mapping[str, Catalog], k: int,
                  backend: str | None, tool: str | None) -> list[Ranked]:
        if index is None:
            return []
        key = (analysis.caller, analysis.question, k, backend, id(index))
        hit = self._ranked.get(key)
        if hit is not None and hit[0] is index:
            ranked = hit[1]
        else:
            ranked = index.search(analysis.question, analysis.vector, k, backends={backend} if backend else None)
            self._ranked.put(key, (index, ranked))
        if tool is None:
            return ranked
        named = [r for r in ranked if r.capability.name == tool]
        if named:
            return named
        where = list(catalogs.values()) if backend is None else [catalogs[backend]] if backend in catalogs else []
        keys = {c.key for cat in where for c in (*cat.capabilities, *cat.held) if c.name == tool}
        if not keys:
            whose = "no backend has a" if backend is None else f"backend {backend!r} has no"
            raise UnknownCapability(f"{whose} tool, prompt, resource or flow named {tool!r}",
                                    backend=backend, tool=tool)
        # The named tool ranks below the cut: score the backend's (or every) whole catalog to find it.
        return index.search(analysis.question, analysis.vector, len(keys), backends={backend} if backend else None,
                            keys=keys)

    def _verdict(self, candidates: Sequence[Candidate], backend: str | None, session: bool) -> tuple[Verdict, str]:
        relevant = [c for c in candidates if c.relevant]
        first = next((c for c in candidates if c.contending), None) if backend is None else \
            next(iter(candidates), None)
        if first is not None and first.unsure_action and not session:
            # The most likely capability may change something, and it is not likely enough to be meant:
            # nothing is done on a guess, and a weaker capability is not called instead.
            return "ambiguous", unsure_action_message(first, self.settings.routing.min_action_confidence,
                                                      backend is not None)
        if backend is not None and candidates:
            return "route", f"backend {backend!r} chosen by the caller"
        if first is not None and first.unclear_tool and not session:
            # The best backend fits, but not one of its tools clearly: a weaker backend is not called
            # instead, and neither is a guess among its tools.
            return "ambiguous", unclear_tool_message(first, tool_contenders(first, candidates),
                                                     self.settings.routing.min_tool_confidence)
        if not relevant:
            if not candidates:
                return "no_match", "nothing in the catalog is relevant enough to this question"
            best = max(candidates, key=lambda c: c.scores.confidence)
            return "no_match", (f"no capability is likely enough to be right: the most likely, {best.capability.key}, "
                                "has confidence " + below(best.scores.confidence, self.settings.routing.min_confidence,
                                                          "routing.min_confidence"))
        # A session's backend was put first on purpose: that is not a close call.
        if not session and too_close(relevant, self.settings.routing.ambiguity_margin):
            a = relevant[0]
            b = next(c for c in relevant if not c.capability.same_as(a.capability))
            return "ambiguous", (f"too close to call between {a.capability.key} and {b.capability.key}; "
                                 "name a backend (and tool) to choose")
        top = relevant[0].capability
        return "route", f"routed to {top.backend}/{top.name}"


def _namesakes(candidates: Sequence[Candidate], tool: str) -> tuple[Verdict, str] | None:
    """A tool named without its backend that several backends offer as different tools ("delete" of a file
    server and of a mail server): which one is meant is the caller's to say, and one failing must not send the
    request to the other. Copies of one tool are one choice."""
    relevant = [c for c in candidates if c.relevant]
    other = next((c for c in relevant[1:] if not c.capability.same_as(relevant[0].capability)), None)
    if other is None:
        return None
    return "ambiguous", (f"several backends have a tool named {tool!r}, and they are different tools "
                         f"({relevant[0].capability.key}, {other.capability.key}); name the backend")


def too_close(ranked: Sequence[Candidate], margin: float) -> bool:
    """Whether the first choice and the next different capability are within `margin` (0: an exact tie) of each
    other. Copies of one capability are one choice, which its best copy scores; tools that share only a name
    are not copies. The first may be placed before a higher composite on purpose (`placed`): only the distance
    counts, not which is above."""
    if len(ranked) < 2:
        return False
    first = ranked[0].capability
    best = max(c.scores.composite for c in ranked if c.capability.same_as(first))
    other = next((c for c in ranked if not c.capability.same_as(first)), None)
    return other is not None and abs(best - other.scores.composite) <= margin


def tool_contenders(first: Candidate, candidates: Sequence[Candidate], limit: int = 3) -> list[Candidate]:
    """The tools of `first`'s backend that the question does not tell apart: its candidates, best first."""
    return [c for c in candidates if c.capability.backend == first.capability.backend][:limit]


def unclear_tool_message(first: Candidate, contenders: Sequence[Candidate], threshold: float) -> str:
    places = decimals([c.scores.tool_confidence for c in contenders], threshold)
    return (f"backend {first.capability.backend!r} fits (confidence {first.scores.confidence:.2f}), but not clearly "
            f"one of its tools: {named_tools(contenders, places)} (tool confidence < routing.min_tool_confidence "
            f"{threshold:.{places}f}); name the tool")


def named_tools(contenders: Sequence[Candidate], places: int = 2) -> str:
    """"name (tool confidence), ..." for a message that asks which tool."""
    return ", ".join(f"{c.capability.name} ({c.scores.tool_confidence:.{places}f})" for c in contenders)


def unsure_action_message(first: Candidate, threshold: float, backend_named: bool = False) -> str:
    s = first.scores
    likely = s.tool_confidence if backend_named else s.confidence * s.tool_confidence
    return (f"{first.capability.key} may change something, and it is not likely enough to be the one meant to act "
            f"on it: estimated {below(likely, threshold, 'routing.min_action_confidence')}; name the tool (backend "
            "and tool) to call it")


def below(value: float, threshold: float, setting: str) -> str:
    """"value < setting threshold" as a reader sees it."""
    places = decimals([value], threshold)
    return f"{value:.{places}f} < {setting} {threshold:.{places}f}"


def decimals(values: Sequence[float], threshold: float) -> int:
    """Two decimals, or as many more as it takes for none of `values` to print as the threshold does (0.0796
    below 0.08 is not "0.08 < 0.08")."""
    return next((p for p in range(2, 7) if all(f"{v:.{p}f}" != f"{threshold:.{p}f}" for v in values)), 6)


def first_placed(candidates: Sequence[Candidate], why: str) -> list[Candidate]:
    """The candidates with the first named as placed there for `why`, when the composite score alone would
    have put another before it."""
    if len(candidates) < 2 or candidates[0].scores.composite >= max(c.scores.composite for c in candidates[1:]):
        return list(candidates)
    return [dataclasses.replace(candidates[0], placed=why), *candidates[1:]]


def _with_learned(ranked: list[Ranked], analysis: Analysis, index: CatalogIndex | None,
                  evidence: QuestionEvidence, backend: str | None) -> list[Ranked]:
    """Capabilities that examples vouch for on questions like this one compete even when retrieval
    alone ranks them below the cut: learning is for exactly the questions retrieval gets wrong. They
    enter with the cut's retrieval score (a search within their backends alone would normalise its
    scores over those few, and overrate them), so only their examples lift them."""
    have = {r.capability.key for r in ranked}
    wanted = set(evidence.positive()) - have
    backends = {CapabilityId.parse(key).backend for key in wanted}
    if backend is not None:
        backends &= {backend}
    if index is None or not backends or not ranked:
        return ranked
    floor = min(r.score for r in ranked)
    found = index.search(analysis.question, analysis.vector, len(wanted), backends=backends, keys=wanted)
    return ranked + [dataclasses.replace(r, score=floor) for r in found]


def _guarded(plain: list[Candidate], learned: list[Candidate], examples: ExampleIndex, vector: object,
             unsure: float) -> list[Candidate]:
    """Retrieval's own first candidate goes back in front when the examples would put another backend
    there but may not (`ExampleIndex.may_replace`: a backend nobody confirmed keeps its questions)."""
    if not plain or not learned:
        return learned
    first, new = plain[0].capability, learned[0].capability
    if new.backend == first.backend or examples.may_replace(first.backend, new.key, vector, unsure):
        return learned
    kept = next((c for c in learned if c.capability.key == first.key), plain[0])
    return first_placed([kept, *(c for c in learned if c is not kept)][:len(learned)],
                        "retrieval's first, kept: examples may not move a question to a backend no one confirmed")


def _stick(candidates: list[Candidate], sticky: str, statuses: Mapping[str, BackendStatus],
           kind: DecisionKind) -> tuple[list[Candidate], DecisionKind]:
    """A session keeps the backend that served it while that backend has a relevant match and is up."""
    status = statuses.get(sticky)
    if status is not None and not status.available:
        return candidates, kind
    mine = [c for c in candidates if c.capability.backend == sticky and c.relevant]
    if not mine:
        return candidates, kind
    return first_placed(mine[:1] + [c for c in candidates if c is not mine[0]], "the session's backend"), "session"


def _annotate(span: trace.Span, d: Decision) -> None:
    span.set_attribute("router.intent", d.intent)
    span.set_attribute("router.candidate_count", len(d.candidates))
    span.set_attribute("router.verdict", d.verdict)
    if d.candidates:
        top = d.candidates[0]
        span.set_attribute("router.backend", top.capability.backend)
        span.set_attribute("gen_ai.tool.name", top.capability.name)
        for name in ("match", "health", "perf", "composite", "dense", "bm25", "confidence", "tool_confidence"):
            span.set_attribute(f"router.score.{name}", getattr(top.scores, name))
