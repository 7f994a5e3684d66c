"""Learning from use: the decisions a router remembers, and the examples feedback and use turn into.

    learning.remember(RecentDecision(request_id=..., question=..., vector=..., chosen=("clock", "tool", "now")))
    examples = feedback_examples(decision, FeedbackRequest(request_id=..., correct=False, backend="weather"),
                                 catalogs, principal=None)

A query's answer carries a `request_id`; feedback on it names the decision (question, vector, chosen
capability) the router remembered. Right: +1 for the chosen capability. Wrong: -1 for it and, when
the caller says which backend (and tool) should have answered, +1 for that one. The `LearningView`
is what the router core reads (evidence) and writes (decisions, examples) without waiting; the
Ray implementation lives in `actors.feedback`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from router.errors import FeedbackRefused, InvalidRequest, UnknownBackend, UnknownCapability, UnknownRequest
from router.learning.evidence import ExampleIndex
from router.learning.examples import Example, Source, accepts_feedback
from router.llm.client import message_text
from router.models import ChatRequest, ChatResponse, FeedbackRequest
from router.retrieval.catalog import capability_dense_text
from router.settings import RouterSettings
from router.values import Capability, CapabilityId, Catalog, Decision

# What is kept of a question (its vector is of the whole): more than the model reads, and 50,000 decisions of
# questions at the 32 KiB request limit would otherwise hold 1.6 GB.
MAX_REMEMBERED_CHARS = 2000
REFUSED_CANDIDATES = 3  # a refused decision's closest candidates its row names (a 409 names two, a 404 a few)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecentDecision:
    request_id: str
    question: str
    vector: Any = field(repr=False)  # np.ndarray or None
    chosen: CapabilityId | None  # None: nothing answered (the router declined or asked, or the call failed)
    candidates: tuple[CapabilityId, ...] = ()  # the ranked candidates, best first
    confidences: tuple[float, ...] = ()  # retrieval's confidence in each candidate
    retrieval_confidence: float | None = None  # retrieval's confidence in its own first candidate
    principal: str | None = None  # who asked: only they may give feedback on it
    # How it went, for the operators' list of recent decisions (`GET /v1/decisions`).
    time: float = 0.0
    intent: str = ""
    verdict: str = ""
    outcome: str = "ok"  # ok, refused (the router declined or asked) or failed (the backends did)
    error: str | None = None
    latency_ms: float | None = None
    attempted: tuple[CapabilityId, ...] = ()  # a failed request's calls, as planned: whose decision the row is

    @classmethod
    def of(cls, d: Decision, request_id: str, chosen: CapabilityId | None, principal: str | None = None, *,
           outcome: str = "ok", error: str | None = None, latency_ms: float | None = None,
           attempted: tuple[CapabilityId, ...] = ()) -> RecentDecision:
        """What the router remembers of decision `d` for feedback on it."""
        return cls(request_id=request_id, question=d.analysis.question[:MAX_REMEMBERED_CHARS],
                   vector=d.analysis.vector, chosen=chosen,
                   candidates=tuple(c.capability.id for c in d.candidates),
                   confidences=tuple(c.scores.confidence for c in d.candidates),
                   retrieval_confidence=d.retrieval_confidence, principal=principal, time=time.time(),
                   intent=d.intent, verdict=d.verdict, outcome=outcome, error=error, latency_ms=latency_ms,
                   attempted=attempted)

    def row(self) -> dict[str, Any]:
        """The decision as the operators' list shows it: what answered, or what was called and failed (`calls`:
        every call the failed request could make), or, refused, its closest `candidates`: an operator sees the row
        only if it may see them all."""
        chosen = self.chosen or (self.attempted[0] if self.attempted else None)
        closest = self.candidates[:REFUSED_CANDIDATES] if self.outcome == "refused" else ()
        return {"request_id": self.request_id, "time": self.time, "principal": self.principal or "anonymous",
                "question": self.question, "intent": self.intent, "verdict": self.verdict,
                "backend": chosen.backend if chosen else None, "capability": chosen.name if chosen else None,
                "calls": [f"{c.backend}/{c.name}" for c in self.attempted],
                "candidates": [f"{c.backend}/{c.name}" for c in closest],
                "outcome": self.outcome, "error": self.error, "latency_ms": self.latency_ms}

    def confidence_of(self, cap: CapabilityId) -> float | None:
        """Retrieval's confidence in `cap` for this question (0 when it was not a candidate)."""
        if len(self.confidences) != len(self.candidates):
            return None
        return dict(zip(self.candidates, self.confidences, strict=True)).get(cap, 0.0)


class LearningView(Protocol):
    """What the router core reads (cached locally) and writes (without waiting)."""

    def index(self) -> ExampleIndex: ...

    def remember(self, decision: RecentDecision) -> None: ...

    def learn(self, examples: Sequence[Example]) -> None: ...


def example(catalogs: Mapping[str, Catalog], cap: CapabilityId, label: int, question: str, vector: Any,
            source: Source, principal: str | None, decision: RecentDecision | None = None) -> Example:
    """An example of `cap` for the question; with the `decision` it was given on, it records how sure
    retrieval was (router/learning/evidence.py weighs examples by that)."""
    backend, kind, name = cap
    return Example(backend=backend, kind=kind, name=name, label=label, question=question, vector=vector,
                   source=source, principal=principal, document=document_of(catalogs, cap),
                   confidence=decision.confidence_of(cap) if decision else None,
                   top_confidence=decision.retrieval_confidence if decision else None,
                   request_id=decision.request_id if decision else None)


def document_of(catalogs: Mapping[str, Catalog], cap: CapabilityId) -> str:
    """The capability's text as the retriever sees it, kept with the example for training."""
    catalog = catalogs.get(cap[0])
    found = _find(catalog, cap[1], cap[2]) if catalog else None
    return capability_dense_text(found, catalog.description) if found and catalog else ""


def _find(catalog: Catalog, kind: str | None, name: str) -> Capability | None:
    return next((c for c in catalog.capabilities if c.name == name and kind in (None, c.kind)), None)


def check_allowed(settings: RouterSettings) -> None:
    if not accepts_feedback(settings):
        raise FeedbackRefused("this router does not accept feedback (learning.accept_feedback)")


def feedback_examples(decision: RecentDecision | None, req: FeedbackRequest, catalogs: Mapping[str, Catalog],
                      principal: str | None) -> list[Example]:
    """The examples one piece of feedback means; raises the 4xx that names the offending field."""
    if decision is None or decision.principal != principal:
        # Another principal's request is answered as an unknown one: its existence is not revealed.
        raise UnknownRequest(f"request_id: {req.request_id!r} is unknown or older than learning.decision_ttl_s",
                             request_id=req.request_id)
    if decision.vector is None:
        raise InvalidRequest(f"request_id: {req.request_id!r} was routed without a question vector; "
                             "feedback needs dense retrieval")
    if req.correct and (req.backend or req.tool):
        raise InvalidRequest("backend, tool: only with correct=false (they name what should have answered)")

    def labelled(cap: CapabilityId, label: int) -> Example:
        return example(catalogs, cap, label, decision.question, decision.vector, "feedback", principal, decision)

    if decision.chosen is None:  # the router declined or asked: what should have answered says the most
        right = _named(decision, req, catalogs) if not req.correct else None
        if right is None:
            raise InvalidRequest(f"correct: request {req.request_id!r} called nothing; send correct=false with "
                                 "the backend (and tool) that should have answered")
        # ... and that the candidate the router put first (and would have called, or asked about) was not it.
        first = decision.candidates[0] if decision.candidates else None
        return [labelled(right, 1), *([labelled(first, -1)] if first is not None and first != right else [])]
    if req.correct:
        return [labelled(decision.chosen, 1)]
    out = [labelled(decision.chosen, -1)]
    right = _named(decision, req, catalogs)
    if right is not None:
        if right == decision.chosen:
            raise InvalidRequest(f"backend, tool: {'/'.join(right)} is what the router chose; "
                                 "send correct=true to confirm it")
        out.append(labelled(right, 1))
    return out


def _named(decision: RecentDecision, req: FeedbackRequest, catalogs: Mapping[str, Catalog]) -> CapabilityId | None:
    """The capability the caller says should have answered, if any."""
    if req.backend is None and req.tool is None:
        return None
    if req.backend is not None and req.backend not in catalogs:
        raise UnknownBackend(f"backend: unknown backend {req.backend!r}; known: {', '.join(sorted(catalogs))}",
                             backend=req.backend)
    if req.tool is not None:
        where = [catalogs[req.backend]] if req.backend else list(catalogs.values())
        found = [c.id for cat in where for c in cat.capabilities if c.name == req.tool]
        if not found:
            raise UnknownCapability(f"tool: no capability named {req.tool!r}"
                                    + (f" in backend {req.backend!r}" if req.backend else ""), tool=req.tool)
        if len(found) > 1:
            raise InvalidRequest(f"tool: {req.tool!r} exists in several backends "
                                 f"({', '.join(sorted({f.backend for f in found}))}); name the backend too")
        return found[0]
    # A backend without a tool: its best-ranked capability for the question, else its only one.
    ranked = [c for c in decision.candidates if c.backend == req.backend]
    if ranked:
        return ranked[0]
    caps = catalogs[req.backend or ""].capabilities
    if len(caps) == 1:
        return caps[0].id
    raise InvalidRequest(f"tool: backend {req.backend!r} has {len(caps)} capabilities and none was a candidate; "
                         "name the tool")


def chat_examples(request: ChatRequest, response: ChatResponse, vector: Any, catalogs: Mapping[str, Catalog],
                  principal: str | None) -> list[Example]:
    """The tools an LLM called successfully in a conversation, as positive examples of its last user turn."""
    question = chat_question(request)
    seen: set[CapabilityId] = set()
    out = []
    for call in response.tool_calls:
        backend, name = call.get("backend"), call.get("capability")
        if not call.get("ok") or not backend or not name or backend not in catalogs:
            continue
        cap = CapabilityId(backend, "tool", name)
        if cap not in seen:
            seen.add(cap)
            out.append(example(catalogs, cap, 1, question, vector, "chat", principal))
    return out


def chat_question(request: ChatRequest) -> str:
    """The last user turn's text (its text parts, not an image's data), at most as long as a remembered
    question; "" when it has none (the tools were called for that turn, not for an earlier one)."""
    users = [m.get("content") for m in request.messages if m.get("role") == "user"]
    return message_text(users[-1] if users else "").strip()[:MAX_REMEMBERED_CHARS]
