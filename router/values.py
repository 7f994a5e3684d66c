"""Internal values of the router (frozen dataclasses): capabilities and catalogs, call outcomes and backend
status, and what each stage of the pipeline hands to the next (analysis, decision, plan)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from router.errors import ErrorKind, RouterError
from router.literals import CapabilityKind, DecisionKind, HealthState, IntentSource, Mode, Verdict
from router.models import BackendInfo, CandidateInfo, Parameters, ScoreBreakdown


class CapabilityId(NamedTuple):
    """How a capability is named across the router: examples, evidence, decisions and candidates share it,
    as a value or as its `key` string (``backend/kind/name``)."""

    backend: str
    kind: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.backend}/{self.kind}/{self.name}"

    @classmethod
    def parse(cls, key: str) -> CapabilityId:
        backend, kind, name = key.split("/", 2)
        return cls(backend, kind, name)


def fixed_digest(value: Any) -> str:
    """What a served capability carries of a fixed argument's value: a digest, since the value may be a credential."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class Capability:
    """One routable thing a backend offers: an MCP tool, prompt or resource, or a flow."""

    backend: str
    name: str
    kind: CapabilityKind = "tool"
    description: str = ""
    title: str | None = None
    input_schema: dict[str, Any] = field(default_factory=dict)
    # Resources are addressed by URI; flows by id. `name` stays the human-facing name.
    target: str | None = None
    intents: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    # A stand-in for a backend that lists nothing (known only by its description): see router.retrieval.
    server_level: bool = False
    # What a call does besides answering, as the server declares it (MCP tool annotations `readOnlyHint`,
    # `idempotentHint`; prompts and resources only read) or the backend's `read_only` setting overrides.
    # Unknown counts as acting, as the MCP specification's defaults say. Only read-only capabilities are
    # called alongside another (parallel, hedged, consensus) or answered from the response cache.
    read_only: bool = False
    idempotent: bool = False  # calling it again with the same arguments changes nothing more
    # Why it cannot be called: a tool whose definition changed and awaits approval, ranked by its last
    # approved one, so that a question meant for it is refused by name rather than sent to another tool.
    held: str | None = None
    # Parameters the operator set for every call (the backend's `fixed_arguments`), out of the input schema: each
    # with a digest of its value (the value may be a credential), so that tools fixed apart are no copies.
    fixed: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> CapabilityId:
        return CapabilityId(self.backend, self.kind, self.name)

    @property
    def key(self) -> str:
        return self.id.key

    def same_as(self, other: Capability) -> bool:
        """A copy of this capability on another backend (a replica of one server): the same kind, name,
        description, input schema and fixed arguments, so either one's answer is the other's."""
        return (self.kind, self.name, self.description, self.input_schema, self.fixed) == (
            other.kind, other.name, other.description, other.input_schema, other.fixed)

    @property
    def repeatable(self) -> bool:
        """Whether calling it again is harmless, so that after a call that may have acted (timed out, lost
        its connection) the request may go on to another candidate."""
        return self.read_only or self.idempotent


@dataclass(frozen=True, slots=True, kw_only=True)
class Catalog:
    """What one backend offers, with a version that changes whenever the content changes."""

    backend: str
    version: str
    description: str
    capabilities: tuple[Capability, ...]
    intents: tuple[str, ...] = ()
    read_only: bool = False  # the backend's `read_only: true`: what a stand-in for it calls only reads
    held: tuple[Capability, ...] = ()  # changed tools awaiting approval, as last approved (never called)


def json_bytes(value: Any) -> int:
    """The size of `value` as UTF-8 JSON."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOutcome:
    """The result of one backend call, as a value (the actor never raises for backend faults)."""

    backend: str
    capability: str
    ok: bool
    latency_ms: float
    text: str = ""
    content: tuple[dict[str, Any], ...] = ()
    structured: dict[str, Any] | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    session_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    sent: bool = True  # False: refused before the request left (an ejected or down backend, no actor)

    @classmethod
    def failed(cls, capability: Capability, kind: ErrorKind, error: str, latency_ms: float = 0.0,
               sent: bool = True) -> CallOutcome:
        """A call that did not answer: how it failed, and whether it left (`sent=False`: refused before the
        request left, e.g. an ejected backend or a caller over its budget)."""
        return cls(backend=capability.backend, capability=capability.name, ok=False, latency_ms=latency_ms,
                   error_kind=kind, error=error, sent=sent)

    def answer_size(self) -> int:
        """The answer's bytes (UTF-8) on its way to the caller: its content blocks and structured result as
        JSON, else its text (an MCP answer's text is made from its content blocks)."""
        if not self.content and self.structured is None:
            return len(self.text.encode("utf-8", "surrogatepass"))
        return json_bytes([self.content, self.structured])

    @property
    def backend_answered(self) -> bool | None:
        """What this outcome says of the backend's own health, the same for every caller: True it answered
        (a tool error the caller's arguments provoked is still an answer), False it failed by itself, None
        nothing (the caller's own deadline or cancellation, a call never sent)."""
        if self.ok or (self.error_kind is not None and self.error_kind.answered):
            return True
        if self.sent and self.error_kind is not None and self.error_kind.backend_fault:
            return False
        return None

    @property
    def may_have_acted(self) -> bool:
        """A failed call whose effect is unknown: it was sent and timed out, lost its connection or was
        cancelled; or the backend failed in it (a server's error can come after its action) or answered
        what the router would not pass on (too large, or structured content its schema refuses: it ran).
        Not an error the request itself provoked (a tool error, arguments rejected)."""
        return (not self.ok and self.sent and self.error_kind is not None
                and (self.error_kind.outcome in ("timeout", "unavailable", "cancelled")
                     or self.error_kind in (ErrorKind.BACKEND_FAILED, ErrorKind.ANSWER_TOO_LARGE)))


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendStatus:
    name: str
    kind: str
    transport: str
    health: HealthState
    description: str = ""
    protocol: str | None = None  # the MCP protocol version the router speaks to it
    health_since: float | None = None  # when `health` last changed (epoch seconds)
    catalog_version: str | None = None
    catalog_refreshed_at: float | None = None  # when the catalog was last listed
    tool_count: int = 0
    prompt_count: int = 0
    resource_count: int = 0
    flow_count: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    last_check_at: float | None = None
    consecutive_failures: int = 0
    ejected_until: float | None = None
    # The principal whose failures alone ejected it: another caller's call still goes, and probes it at once.
    # Internal to the router (never in `BackendInfo`).
    ejected_by: str | None = None
    ejections: int = 0
    inflight: int = 0
    node_id: str | None = None  # the Ray node hosting the backend's actor
    # What reviewing the listed catalog found (router.trust.review).
    catalog_error: str | None = None
    sanitized: tuple[str, ...] = ()
    held_tools: tuple[dict[str, Any], ...] = ()
    flagged_tools: tuple[dict[str, Any], ...] = ()

    def info(self) -> BackendInfo:
        """The backend's state as the API shows it (whole: `Access.backend_info` narrows it per caller)."""
        return BackendInfo(**{name: getattr(self, name) for name in BackendInfo.model_fields})

    @property
    def available(self) -> bool:
        if self.health == "ejected" and self.ejected_until is not None:
            # A snapshot can outlive the ejection it reports: once it is over, the next call is the probe.
            return self.ejected_until <= time.time()
        return self.health in ("healthy", "degraded")

    def available_to(self, principal: str | None) -> bool:
        """Whether `principal`'s call may go: also while ejected on another principal's failures alone."""
        return self.available or (self.health == "ejected" and self.ejected_by not in (None, principal))


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """Request-scoped values passed through to every backend call."""

    question: str
    intent: str
    session_id: str | None = None
    parameters: Parameters | None = None
    principal: str | None = None  # who is calling: a backend's slots are shared fairly among principals
    trace: dict[str, str] = field(default_factory=dict)  # W3C trace context for the backend call


@dataclass(frozen=True, slots=True, kw_only=True)
class Analysis:
    """What a question yields before live state enters: its vector and its classified intent."""

    question: str
    vector: Any  # np.ndarray, or None without dense retrieval
    intent: str
    intent_source: IntentSource
    intent_scores: dict[str, float] = field(default_factory=dict)
    caller: str = ""  # whose question: caches keyed by it never tell one caller what another asked


@dataclass(frozen=True, slots=True)
class Candidate:
    """A capability with its composite score breakdown; `relevant` marks those worth calling;
    `unclear_tool` those whose backend is likely right but which are not clearly the right one of its
    tools (their tool confidence is below `routing.min_tool_confidence`); `unsure_action` those that may
    change something and are not likely enough to be right to act on (`routing.min_action_confidence`).
    `placed`: why it stands before a candidate of a higher composite score, when it does."""

    capability: Capability
    scores: ScoreBreakdown
    relevant: bool
    unclear_tool: bool = False
    unsure_action: bool = False
    placed: str | None = None

    @property
    def contending(self) -> bool:
        """Likely enough to be meant that it is called, or asked about (which tool, or whether to act)."""
        return self.relevant or self.unclear_tool or self.unsure_action

    def info(self, rank: int) -> CandidateInfo:
        cap = self.capability
        return CandidateInfo(rank=rank, backend=cap.backend, capability=cap.name, kind=cap.kind,
                             description=cap.description[:300], read_only=cap.read_only, scores=self.scores,
                             placed=self.placed)


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The ranked candidates for a request and the verdict on them (the decide stage's output)."""

    analysis: Analysis
    method: str
    candidates: tuple[Candidate, ...]
    verdict: Verdict
    message: str
    kind: DecisionKind = "route"
    decision_ms: float = 0.0
    retrieval_confidence: float = 0.0  # retrieval's own confidence in its first candidate, before any example

    @property
    def intent(self) -> str:
        return self.analysis.intent

    @property
    def confidence(self) -> float:
        """The confidence of the candidate the router would call first (the first relevant one), or
        with none relevant, the highest there is (what fell short of `routing.min_confidence`)."""
        first = next((c for c in self.candidates if c.relevant), None)
        if first is not None:
            return first.scores.confidence
        return max((c.scores.confidence for c in self.candidates), default=0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedCall:
    candidate: Candidate
    arguments: dict[str, Any]
    arguments_source: str
    force: bool = False  # every candidate is ejected: the least bad ones are still tried

    @property
    def backend(self) -> str:
        return self.candidate.capability.backend

    @property
    def capability(self) -> Capability:
        return self.candidate.capability


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The calls a request makes, in order (the plan stage's output). `refusal` is the answer when the
    request cannot go ahead, as a value: e.g. the best match needs arguments the question lacks."""

    calls: tuple[PlannedCall, ...]
    mode: Mode
    refusal: RouterError | None = None


