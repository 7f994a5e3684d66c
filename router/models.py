"""Request and response models (pydantic, at the edges); the internal values are in `router.values`.

HTTP, MCP and the Serve deployment handle all speak these same models, so a Python caller of
`serve.get_app_handle("mcp-router").query.remote(QueryRequest(...))` gets exactly what HTTP returns.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from router.bounds import MAX_MESSAGES, bounded_arguments, check_messages
from router.literals import CapabilityKind, DecisionKind, HealthState, IntentSource, Mode, Outcome, Verdict

# ---------------------------------------------------------------------------------------------
# Requests


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("question must not be empty or only whitespace")
    return value


Question = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]

# Session ids are the caller's names for a conversation; a plain token keeps them safe to log and scope.
SessionId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@-]+$")]
# Only Python callers of the deployment handle name a principal; at the HTTP and MCP edge it comes from
# authentication, and a request body that sets it is refused.
PrincipalName = Annotated[str | None, Field(default=None, max_length=64, description=(
    "Deployment-handle callers only: the principal the request is made for (the handle trusts its caller)."))]


def _auto_is_none(value: str | None) -> str | None:
    return None if value in (None, "", "auto") else value


# A backend the caller names; `auto` (or nothing) leaves the choice to routing.
BackendChoice = Annotated[str | None, AfterValidator(_auto_is_none)]
class Parameters(_Model):
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    stream: bool | None = None


class QueryRequest(_Model):
    question: Question = Field(description="The question or instruction to route.")
    arguments: Annotated[dict[str, Any] | None, AfterValidator(bounded_arguments)] = Field(
        default=None, description="Tool arguments; when absent they are derived from the question."
    )
    intent: str | None = Field(default=None, description="Override the classified intent.")
    backend: BackendChoice = Field(default=None, description="Skip routing and use this backend ('auto' routes).")
    tool: str | None = Field(default=None, description="With `backend`: the tool, prompt or flow to call.")
    mode: Mode | None = None
    session_id: SessionId | None = None
    parameters: Parameters | None = None
    deadline_s: float | None = Field(default=None, gt=0, le=600)
    fallback_on_override: bool = False
    include_routing_metadata: bool = True
    principal: PrincipalName = None



class RouteRequest(_Model):
    question: Question
    intent: str | None = None
    backend: BackendChoice = Field(default=None, description="Rank only this backend's capabilities ('auto': all).")
    k: int | None = Field(default=None, ge=1, le=100)
    principal: PrincipalName = None


# An OpenAI-style conversation, all of it (never truncated), up to a bound.
Conversation = Annotated[list[dict[str, Any]], Field(min_length=1, max_length=MAX_MESSAGES),
                         AfterValidator(check_messages)]


class ToolSelectRequest(_Model):
    messages: Conversation
    session_id: SessionId | None = None
    max_servers: int | None = Field(default=None, ge=1, le=1000)
    principal: PrincipalName = None


# ---------------------------------------------------------------------------------------------
# Responses


class ChatRequest(_Model):
    messages: Conversation
    session_id: SessionId | None = None
    max_turns: int | None = Field(default=None, ge=1, description=(
        "Model calls at most (default and cap: `llm.max_tool_turns`; more is a 422)."))
    deadline_s: float | None = Field(default=None, gt=0, le=600, description=(
        "The whole conversation turn's deadline, model and tool calls included (default `llm.deadline_s`)."))
    principal: PrincipalName = None


class ChatResponse(_Model):
    answer: str
    session_id: str | None = None
    servers: list[str]
    tool_calls: list[dict[str, Any]]
    turns: int
    max_turns_reached: bool
    reroute: bool
    selection: dict[str, Any]
    usage: dict[str, int] = Field(default_factory=dict)


class ToolSelectResponse(_Model):
    tools: list[dict[str, Any]]
    servers: list[str]
    reasoning: str
    metrics: dict[str, Any]


class ScoreBreakdown(_Model):
    """Every component of a candidate's score, frozen with it (`Candidate` is a frozen value)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dense: float = 0.0
    bm25: float = 0.0
    dense_norm: float = 0.0
    bm25_norm: float = 0.0
    hybrid: float = 0.0
    server: float = 0.0  # the fused score of the capability's server document, when the ranking uses it
    intent_bonus: float = 0.0
    # Learned from labelled examples (router/learning/evidence.py): how many the capability has, the nearest one's
    # cosine to the question, its backend's rejections (net of acceptances) for questions like this one,
    # what a learned default added (retrieval unsure), and all they added to `match` (negative: pushed down).
    examples: int = 0
    nearest_example: float = 0.0
    rejections: int = 0
    learned_default: float = 0.0
    learned: float = 0.0
    match: float = 0.0
    health: float = 0.0
    perf: float = 0.0
    composite: float = 0.0
    # The estimated probability that this candidate's backend is the right one, and given that, that it
    # is the right one of the backend's tools (router/stages/confidence.py).
    confidence: float = 0.0
    tool_confidence: float = 1.0


class CandidateInfo(_Model):
    rank: int  # in the order the router decided (and would call), which the composite score alone may not give
    backend: str
    capability: str
    kind: CapabilityKind
    description: str = ""
    read_only: bool = False  # false: a call may change something (MCP annotations, or the backend's setting)
    scores: ScoreBreakdown
    placed: str | None = Field(default=None, description=(
        "Why the router put it before a candidate of a higher composite score: the question's values, the "
        "session's backend, learned examples, the model's choice, the caller's backend."))
    ruled_out: str | None = Field(default=None, description=(
        "In a dry run: why the query would not call it, likely enough as it is (it only reads and the question "
        "asks for a change, it takes no value of a kind the question gives, ...)."))


class AttemptInfo(_Model):
    backend: str
    capability: str
    outcome: Outcome
    latency_ms: float
    started_ms: float = 0.0
    error_type: str | None = None
    error: str | None = None


class ConsensusAnswer(_Model):
    backend: str
    capability: str
    answer: str
    latency_ms: float
    group: int
    agrees: bool


class RoutingMetadata(_Model):
    intent: str
    intent_source: IntentSource
    intent_scores: dict[str, float] = Field(default_factory=dict)
    method: str
    mode: Mode
    decision: DecisionKind = "route"
    chosen: CandidateInfo | None = None
    confidence: float | None = None  # the chosen candidate's, also in chosen.scores
    candidates: list[CandidateInfo] = Field(default_factory=list)
    attempts: list[AttemptInfo] = Field(default_factory=list)
    fallbacks_used: int = 0
    arguments: dict[str, Any] | None = None
    arguments_source: str | None = None
    decision_ms: float = 0.0
    execution_ms: float = 0.0
    total_ms: float = 0.0
    # Milliseconds per stage of the router core: analyse, decide, plan, execute, respond.
    stages_ms: dict[str, float] = Field(default_factory=dict)
    session_id: str | None = None
    cached: bool = False
    agreement: float | None = None
    answers: list[ConsensusAnswer] | None = None
    disagreed: list[str] | None = None
    # Names this decision in `POST /v1/feedback` (within `learning.decision_ttl_s`).
    request_id: str | None = None


class QueryResponse(_Model):
    answer: str
    backend: str
    capability: str
    kind: CapabilityKind
    content: list[dict[str, Any]] = Field(default_factory=list)
    structured: dict[str, Any] | None = None
    session_id: str | None = None
    routing: RoutingMetadata | None = None


class RouteResponse(_Model):
    decision: Verdict = Field(description=(
        "What the same question would get from /v1/query: `route` (a call, or a 422 or 503 named by `status`), "
        "`no_match` (404) or `ambiguous` (409)."))
    message: str = Field(description="Why: the decision's reason, or the refusal /v1/query would answer with.")
    status: int = Field(default=200, description="The HTTP status /v1/query would answer with (200: it would call).")
    error: str | None = Field(default=None, description="The refusal's `error.type`, when /v1/query would refuse.")
    calls: list[str] = Field(default_factory=list, description=(
        "`backend/capability` /v1/query would call, in order (the first, then those it would fall back to)."))
    arguments: dict[str, Any] | None = Field(default=None, description=(
        "What the first call would be given, and `arguments_source` where it came from (as in the query's routing)."))
    arguments_source: str | None = None
    confidence: float = Field(default=0.0, description=(
        "The estimated probability that the candidate the router would call first is right (declining: "
        "the best there was, below `routing.min_confidence`)."))
    intent: str
    intent_source: IntentSource
    intent_scores: dict[str, float] = Field(default_factory=dict)
    method: str
    candidates: list[CandidateInfo]
    decision_ms: float


class HeldTool(_Model):
    tool: str
    kind: CapabilityKind
    reason: str
    changed: list[str] = Field(default_factory=list)  # which of name, description, schema changed
    rules: list[str] = Field(default_factory=list)  # the detector's rules, for a quarantined one


class FlaggedTool(_Model):
    tool: str
    kind: CapabilityKind
    rules: list[str]


class BackendInfo(_Model):
    name: str
    kind: str
    transport: str
    health: HealthState
    description: str = ""
    protocol: str | None = Field(default=None, description="The MCP protocol version the router speaks to it.")
    health_since: float | None = Field(default=None, description="When `health` last changed (epoch seconds).")
    catalog_refreshed_at: float | None = Field(default=None, description="When its catalog was last listed.")
    tool_count: int = 0
    prompt_count: int = 0
    resource_count: int = 0
    flow_count: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    last_check_at: float | None = None
    consecutive_failures: int = 0
    ejected_until: float | None = None
    node_id: str | None = None
    # What reviewing the catalog found (docs/security.md#untrusted-backends): why it was rejected, the
    # fields cleaned of invisible characters, the capabilities held out of routing and those flagged.
    catalog_error: str | None = None
    sanitized: list[str] = Field(default_factory=list)
    held_tools: list[HeldTool] = Field(default_factory=list)
    flagged_tools: list[FlaggedTool] = Field(default_factory=list)


class FeedbackRequest(_Model):
    request_id: str = Field(min_length=1, max_length=64, description=(
        "`routing.request_id` of the query's answer, or `error.details.request_id` of a question the router "
        "declined (404) or asked about (409)."))
    correct: bool = Field(description="Whether the capability the router chose was the right one.")
    backend: str | None = Field(default=None, max_length=64, description=(
        "With correct=false: the backend that should have answered (its best tool for the question, or `tool`)."))
    tool: str | None = Field(default=None, max_length=256, description=(
        "With correct=false: the tool, prompt or flow that should have answered."))
    principal: PrincipalName = None


class FeedbackResponse(_Model):
    request_id: str
    stored: list[dict[str, Any]] = Field(description="The examples stored, one per capability it concerns.")


class BackendDetail(BackendInfo):
    examples: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Labelled examples of this backend's capabilities (no vectors), oldest first."))


class LoadtestReport(_Model):
    """What `mcp-router loadtest` reports: its summary and the timeline the console draws."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # JSON's reader takes NaN; JSON cannot say it

    url: str = Field(max_length=2000)
    protocol: str = Field(default="http", max_length=16)
    mode: str | None = Field(default=None, max_length=32)
    concurrency: int = Field(ge=1)
    elapsed_s: float = Field(ge=0)
    requests: int = Field(ge=0)
    ok: int = Field(ge=0)
    errors: int = Field(ge=0)
    throughput_rps: float = Field(ge=0)
    latency_ms: dict[str, float | None] = Field(default_factory=dict, max_length=16)
    latency_ms_ok: dict[str, float | None] = Field(default_factory=dict, max_length=16)
    errors_by_status: dict[str, int] = Field(default_factory=dict, max_length=100)
    errors_by_cause: dict[str, int] = Field(default_factory=dict, max_length=100)
    backends: dict[str, int] = Field(default_factory=dict, max_length=1000)
    fallbacks: int = Field(default=0, ge=0)
    fallback_rate: float = Field(default=0.0, ge=0)
    timeline: list[dict[str, float]] = Field(default_factory=list, max_length=100_000, description=(
        "Per second of the run: t (s from the start), rps, p50_ms, p95_ms, p99_ms, errors."))
    finished_at: float | None = None

    @model_validator(mode="after")
    def _counted(self) -> LoadtestReport:
        if self.ok + self.errors != self.requests:
            raise ValueError(f"ok ({self.ok}) and errors ({self.errors}) must add up to requests ({self.requests})")
        return self


class HealthResponse(_Model):
    status: Literal["ok", "degraded", "down"]
    backends: dict[str, dict[str, Any]]


def describe_validation(errors: list[Any]) -> str:
    """One readable sentence from pydantic/FastAPI validation errors: field path and problem."""
    parts = []
    for err in errors[:5]:
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        if err.get("type") == "json_invalid":
            parts.append(f"request body is not valid JSON ({err.get('ctx', {}).get('error', 'parse error')})")
            continue
        where = ".".join(loc) or "body"
        msg = err.get("msg", "invalid")
        if err.get("type") == "missing":
            msg = "field required"
        elif err.get("type") == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)
