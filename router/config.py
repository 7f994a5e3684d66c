"""Settings and backend specs: one `RouterSettings` object, read once at start-up.

`router.config_file.load_settings` builds it from a YAML file (or the `mcpServers` JSON of Claude
Desktop and Cursor) and `ROUTER_` environment variables; constructors receive it from there.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from router.intent_settings import IntentSettings
from router.learning_settings import LearningSettings
from router.security.settings import AuditSettings, AuthSettings, SecuritySettings

CapabilityKind = Literal["tool", "prompt", "resource", "flow"]
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _BackendBase(_Strict):
    """Settings every backend kind has."""

    name: str = Field(pattern=_NAME, max_length=64,
                      description="Unique name; shown in answers, metrics and `backend` overrides.")
    description: str = Field(default="", description="What the backend is for; routed on with its tools' texts.")
    enabled: bool = Field(default=True, description="false keeps the entry in the file but starts nothing.")
    intents: list[str] = Field(default_factory=list, description=(
        "Intent names this backend is declared good at; a match adds `routing.intent_bonus`."))
    tags: list[str] = Field(default_factory=list, description="Free labels for operators; routing ignores them.")
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="Longest one call to this backend may take.")
    connect_timeout_s: float = Field(default=20.0, gt=0, le=300,
                                     description="Longest connecting (or starting the server) may take.")
    catalog_ttl_s: float = Field(default=60.0, gt=0, description=(
        "How long the tool catalog is cached; a list-changed notification refreshes it at once."))
    health_interval_s: float = Field(default=10.0, gt=0, description="Seconds between health checks.")
    health_timeout_s: float = Field(default=5.0, gt=0, description="Longest one health check may take.")
    max_concurrency: int = Field(default=64, ge=1, le=10_000,
                                 description="Calls in flight at once to this backend; more wait their turn.")
    read_only: bool | None = Field(default=None, description=(
        "true: no call to this backend changes anything, so calls may be duplicated (parallel, hedged, "
        "consensus), retried elsewhere after a timeout and answered from the response cache; false: every "
        "call may act, whatever the server declares. Unset: as each MCP tool's annotations declare "
        "(`readOnlyHint`, `idempotentHint`; none means it may act), prompts and resources read-only, flows not."))
    trust_changes: bool = Field(default=False, description=(
        "true: a changed tool definition is pinned again at once instead of being held out of routing "
        "until `mcp-router approve` (see `security.pin_tools`)."))


class McpStdioSpec(_BackendBase):
    """An MCP server the backend actor runs as a child process and talks to over stdin/stdout."""

    kind: Literal["mcp_stdio"] = Field(default="mcp_stdio", description="An MCP server run as a child process.")
    command: str = Field(min_length=1, description="The program; `python` is the router's own interpreter.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables added for the process.")
    cwd: str | None = Field(default=None, description="Working directory, relative to the config file.")
    capabilities: list[Literal["tools", "prompts", "resources"]] = Field(
        default=["tools", "prompts", "resources"], description="Which kinds of capability are listed and routed to.")


class LaunchSpec(_Strict):
    """A local HTTP server the backend actor starts (and restarts) itself before connecting."""

    command: str = Field(min_length=1, description="The server's program; `python` is the router's interpreter.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables added for the process.")
    cwd: str | None = Field(default=None, description="Working directory, relative to the config file.")
    startup_timeout_s: float = Field(default=30.0, gt=0,
                                     description="Longest the server may take to accept connections.")
    token_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description=(
        "An environment variable through which the server gets its credential: a new random token at each "
        "launch, which only the router holds and sends as `Authorization: Bearer` (the knowledge-base server "
        "reads `MCP_ROUTER_KB_TOKEN`)."))


class McpHttpSpec(_BackendBase):
    """An MCP server reached over streamable HTTP, optionally started by the backend actor (`launch`)."""

    kind: Literal["mcp_http"] = Field(default="mcp_http", description="An MCP server over streamable HTTP.")
    url: str = Field(pattern=r"^https?://", description="The server's MCP endpoint, e.g. `http://host:8765/mcp`.")
    headers: dict[str, SecretStr] = Field(default_factory=dict, description=(
        "Headers sent with every request (e.g. `Authorization`); values are secrets."))
    launch: LaunchSpec | None = Field(default=None, description="A local server to start (and restart) first.")
    capabilities: list[Literal["tools", "prompts", "resources"]] = Field(
        default=["tools", "prompts", "resources"], description="Which kinds of capability are listed and routed to.")


class FlowSpec(_Strict):
    """Extra routing information for one flow; flows not listed are still discovered."""

    id: str = Field(min_length=1, description="The flow's id (Langflow also accepts its endpoint name).")
    name: str | None = Field(default=None, description="Overrides the name the platform reports.")
    description: str | None = Field(default=None, description="What the flow is for; routed on.")
    intents: list[str] = Field(default_factory=list, description="Intents this flow is declared good at.")
    tags: list[str] = Field(default_factory=list, description="Words added to the flow's routing text.")
    api_key: SecretStr | None = Field(default=None, description=(
        "The flow's own API key (Flowise chatflows); replaces the backend's key for its runs."))


class _FlowBackendBase(_BackendBase):
    url: str = Field(pattern=r"^https?://", description="The platform's base URL, e.g. `http://127.0.0.1:3000`.")
    api_key: SecretStr | None = Field(default=None, description=(
        "API key (Flowise: `Authorization: Bearer`; Langflow: `x-api-key`); only ever sent as a header."))
    api_key_env: str | None = Field(default=None, description="Name of an environment variable holding the key.")
    flows: list[FlowSpec] = Field(default_factory=list, description="Optional routing hints per flow, by id.")
    only_listed_flows: bool = Field(default=False, description="true: route only to the flows listed in `flows`.")

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return os.environ.get(self.api_key_env)
        return None


class FlowiseSpec(_FlowBackendBase):
    """Flowise chatflows: every chatflow the platform lists becomes a capability of kind `flow`."""

    kind: Literal["flowise"] = Field(default="flowise", description="Flowise chatflows, one capability each.")


class LangflowSpec(_FlowBackendBase):
    """Langflow flows: every flow the platform lists becomes a capability of kind `flow`."""

    kind: Literal["langflow"] = Field(default="langflow", description="Langflow flows, one capability each.")
    input_type: str = Field(default="chat", description="`input_type` of every run.")
    output_type: str = Field(default="chat", description="`output_type` of every run.")


BackendSpec = Annotated[
    McpStdioSpec | McpHttpSpec | FlowiseSpec | LangflowSpec, Field(discriminator="kind")
]


class ScoreWeights(_Strict):
    """Weights of the composite score `match * w_match + health * w_health + perf * w_perf`."""

    match: float = Field(default=0.5, ge=0, description="Weight of relevance (retrieval score plus intent bonus).")
    health: float = Field(default=0.3, ge=0, description="Weight of health: 1 healthy, 0.5 degraded, 0 down/ejected.")
    perf: float = Field(default=0.2, ge=0, description="Weight of recent success rate and latency.")


class RoutingSettings(_Strict):
    """Hybrid retrieval (dense + BM25), the composite score and the verdict (404, 409, 422)."""

    alpha: float = Field(default=0.6, ge=0, le=1, description=(
        "Fusion weight: `alpha * dense + (1 - alpha) * bm25` (1 = embeddings only, 0 = BM25 only). "
        "0.6 was best with the shipped model on LiveMCPBench, and beat 0.5 on MetaTool, which nothing was tuned on."))
    dense_top_n: int = Field(default=200, ge=1, description="Capabilities recalled by cosine before BM25 scores them.")
    method: Literal["flat", "two_level"] = Field(default="flat", description=(
        "flat ranks capabilities directly; two_level ranks servers first, then tools in the best servers."))
    server_weight: float = Field(default=0.35, ge=0, le=1, description=(
        "Share of a capability's retrieval score that comes from its server's own document (flat method). "
        "0.35 was best on LiveMCPBench and ToolAlpaca together (docs/routing.md)."))
    top_servers: int = Field(default=3, ge=1, description="Servers whose tools are ranked by the two_level method.")
    candidates: int = Field(default=5, ge=1, le=100, description=(
        "Candidates returned with a decision (more are kept when a resilience mode needs them)."))
    weights: ScoreWeights = Field(default=ScoreWeights(), description="Weights of the composite score.")
    intent_bonus: float = Field(default=0.1, ge=0, le=1, description=(
        "Added to the match score when the backend declares the question's intent."))
    min_confidence: float = Field(default=0.08, ge=0, le=1, description=(
        "Confidence a candidate needs to be called: the estimated probability, from its retrieval scores, "
        "that it is the right capability (router/confidence.py). When no candidate reaches it the router "
        "abstains (404 with the closest candidates); a runner-up below it is never tried. 0.08 is the highest "
        "threshold that still answered 90 % of in-scope questions on the fitting half of "
        "benchmarks/abstention.py; higher declines more (docs/routing.md has the curve)."))
    min_tool_confidence: float = Field(default=0.33, ge=0, le=1, description=(
        "Tool confidence a candidate also needs to be called: given that its backend is right, the estimated "
        "probability that it is the right one of the backend's tools (router/confidence.py). When the best "
        "backend's best tool falls short, the router asks which tool was meant (409 listing them) instead of "
        "calling one. Chosen by benchmarks/abstention.py (docs/routing.md)."))
    min_relative_match: float = Field(default=0.5, ge=0, le=1, description=(
        "Retrieval score a candidate also needs, relative to the best one, to be tried: a confidence model "
        "fitted on large catalogs tells a backend's weak tools too little from its strong one."))
    ambiguity_margin: float = Field(default=0.0, ge=0, le=1, description=(
        "Two different tools whose composite scores are this close are ambiguous: 409 (0: exact ties only)."))
    callable_margin: float = Field(default=0.15, ge=0, le=1, description=(
        "A runner-up this close to a best match that needs unknown arguments is called instead of a 422."))
    query_cache_size: int = Field(default=4096, ge=0, description=(
        "Questions whose vector, intent and retrieval results each replica keeps (0 turns the cache off)."))


class EmbeddingSettings(_Strict):
    """The model that embeds questions and capability texts."""

    provider: Literal["local", "openai"] = Field(default="local", description=(
        "local: a model shipped in models/ (int8 ONNX); openai: an OpenAI-compatible embeddings endpoint."))
    model: str = Field(default="all-MiniLM-L6-v2-tool-retrieval", description=(
        "The model name: a folder of models/ (all-MiniLM-L6-v2-tool-retrieval, trained for tool retrieval; "
        "all-MiniLM-L6-v2, the untrained base), or the name sent to the endpoint for openai."))
    placement: Literal["replica", "deployment"] | None = Field(default=None, description=(
        "Where questions are embedded: replica runs the model inside each router replica (in a thread, concurrent "
        "questions batched); deployment in its own Serve deployment, for large or GPU models. Unset: by model "
        "size (the small local models and remote endpoints run in the replica)."))
    base_url: str | None = Field(default=None, description="The endpoint's base URL (openai provider).")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the endpoint's key.")
    batch_size: int = Field(default=64, ge=1, le=2048, description=(
        "Most texts in one embedding call (one request to an endpoint; the local model still runs each text "
        "alone)."))
    max_batch_wait_s: float = Field(default=0.005, ge=0, description=(
        "While other questions are being embedded, how long the next batch waits to fill."))
    timeout_s: float = Field(default=30.0, gt=0, description="Longest one request to the endpoint may take.")
    threads: int = Field(default=1, ge=1, le=64, description=(
        "onnxruntime intra-op threads of the local model (one keeps a shared machine responsive)."))


class EjectionSettings(_Strict):
    """The outlier detector each backend actor runs on its own call outcomes."""

    consecutive_failures: int = Field(default=5, ge=1, description="Failures in a row that eject a backend.")
    failure_rate: float = Field(default=0.5, gt=0, le=1, description=(
        "Failure rate within `window_s` (over at least `min_requests` calls) that ejects a backend."))
    window_s: float = Field(default=30.0, gt=0, description="The window the failure rate is measured over.")
    min_requests: int = Field(default=10, ge=1, description="Calls in the window before the rate counts.")
    base_ejection_s: float = Field(default=5.0, gt=0, description=(
        "First ejection's length; each repeat doubles it. Then one probe call decides."))
    max_ejection_s: float = Field(default=300.0, gt=0, description="The longest an ejection grows to.")


class ResilienceSettings(_Strict):
    """Resilience modes, deadlines, the last-resort response cache and the performance history."""

    default_mode: Literal["fallback", "parallel", "hedged", "consensus"] = Field(
        default="fallback", description="The mode of a request that names none.")
    deadline_s: float = Field(default=30.0, gt=0, le=600, description="Whole-request deadline; a caller may lower it.")
    max_attempts: int = Field(default=3, ge=1, le=20, description="Backends tried at most (fallback and hedged).")
    parallel_k: int = Field(default=3, ge=1, le=10, description="Backends called at once in parallel mode.")
    consensus_k: int = Field(default=3, ge=1, le=10, description="Backends asked in consensus mode.")
    consensus_similarity: float = Field(default=0.85, ge=0, le=1, description=(
        "Cosine above which two answers count as agreeing in consensus mode."))
    hedge_min_delay_ms: float = Field(default=20.0, ge=0, description="Shortest wait before hedging.")
    hedge_max_delay_ms: float = Field(default=2000.0, ge=0, description="Longest wait before hedging.")
    hedge_default_delay_ms: float = Field(default=200.0, ge=0, description=(
        "Wait before hedging when a backend has under five recorded calls (else its p95, capped at three medians)."))
    response_cache_ttl_s: float = Field(default=300.0, ge=0, description=(
        "How long an answer stays usable when every candidate backend is unavailable."))
    response_cache_size: int = Field(default=1024, ge=0, description="Answers kept per replica for that case.")
    ejection: EjectionSettings = Field(default=EjectionSettings(), description="The outlier detector.")
    perf_window: int = Field(default=100, ge=10, le=10_000, description=(
        "Outcomes kept per backend and intent by the performance history."))
    perf_snapshot_interval_s: float = Field(default=5.0, gt=0, description=(
        "How often the history is saved to Ray's GCS key-value store (a restart loses at most this)."))
    stats_refresh_s: float = Field(default=1.0, gt=0, description="How often a replica reads the history's snapshot.")


class ServerSettings(_Strict):
    """The HTTP endpoint and the Serve application."""

    host: str = Field(default="127.0.0.1", description="Address `mcp-router serve` listens on.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `mcp-router serve` listens on.")
    ingress: Literal["haproxy", "direct", "proxy"] = Field(default="haproxy", description=(
        "haproxy: Ray Serve's HAProxy ingress on host:port, in front of the replicas' own HTTP servers (keeps "
        "the address when a replica is replaced); direct: the ingress replica serves HTTP itself (Ray Serve "
        "direct ingress; a replaced replica may come back on another port); proxy: Serve's HTTP proxy."))
    replicas: int = Field(default=1, ge=1, description="Ingress replicas (a Serve config's autoscaling replaces it).")
    max_question_bytes: int = Field(default=32 * 1024, ge=16, description="Longest question accepted: 413 above.")
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, description="Largest request body accepted: 413 above.")
    max_header_bytes: int = Field(default=16 * 1024, ge=1024, description=(
        "Largest total of request headers: 431 above."))
    max_in_flight: int = Field(default=512, ge=1, description=(
        "Requests one replica runs at once; more are refused at once with 503 and Retry-After, not queued."))
    auth: AuthSettings = Field(default=AuthSettings(), description=(
        "API keys, JWTs and per-principal policies; off only on loopback addresses."))
    allowed_hosts: list[str] = Field(default_factory=list, description=(
        "`Host` names `/mcp/` answers besides loopback ones (the MCP SDK's DNS-rebinding protection answers 421 "
        "to others): the name a load balancer or clients reach the router by, e.g. `router.example.com` (any "
        "port) or `router.example.com:8443`; `*` turns the check off."))
    access_log: bool = Field(default=False, description="Serve's per-request access log lines.")
    app_name: str = Field(default="mcp-router", description=(
        "The Serve application's name (`serve.get_app_handle(...)`)."))
    namespace: str = Field(default="mcp-router", description="The Ray namespace the application runs in.")


class LLMSettings(_Strict):
    """An optional OpenAI-compatible chat model; everything but `/v1/chat` works without one."""

    base_url: str | None = Field(default=None, description=(
        "An OpenAI-compatible endpoint (vLLM, Ollama, ...); omit for api.openai.com."))
    model: str | None = Field(default=None, description=(
        "The chat model; the LLM is used once this and `base_url` or an API key are set."))
    api_key: SecretStr | None = Field(default=None, description="The API key; else read from `api_key_env`.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the API key.")
    timeout_s: float = Field(default=30.0, gt=0, description="Longest one model request may take.")
    max_retries: int = Field(default=2, ge=0, le=10, description=(
        "Retries on connection errors, 408, 409, 429 and 5xx, with backoff."))
    max_tool_turns: int = Field(default=8, ge=1, le=50, description=(
        "Model calls per tool loop of `/v1/chat`: the default and the most a request may ask for."))
    deadline_s: float = Field(default=120.0, gt=0, le=600, description=(
        "Deadline of a `/v1/chat` turn that names none, model and tool calls included (a policy's "
        "`max_deadline_s` lowers it)."))

    @property
    def configured(self) -> bool:
        return bool(self.model and (self.base_url or self.resolved_api_key()))

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return os.environ.get(self.api_key_env)


class ToolSelectionSettings(_Strict):
    """Smart tool selection: the tools of the servers a conversation needs, in OpenAI format."""

    min_tools: int = Field(default=30, ge=0, description=(
        "Selection engages only above this many tools (and `min_servers`); below, every tool is returned."))
    min_servers: int = Field(default=4, ge=0, description="Selection engages only above this many servers.")
    max_servers: int = Field(default=12, ge=1, description="Most servers kept (a request may ask for fewer).")
    max_tool_share: float = Field(default=0.2, gt=0, le=1, description=(
        "Retrieval keeps whole servers, best first, until they hold this share of all tools."))
    llm_candidates: int = Field(default=15, ge=1, description="How many of retrieval's best servers an LLM picks from.")
    max_conversation_bytes: int = Field(default=64 * 1024, ge=16, description=(
        "Largest total of a conversation's user messages that selection takes: 413 above."))
    max_steps: int = Field(default=8, ge=1, le=64, description=(
        "Steps (clauses) of the latest request ranked on their own, besides the whole conversation."))
    session_cache_size: int = Field(default=10_000, ge=0, description=(
        "Sessions whose selection is reused on later turns, per replica."))


class TelemetrySettings(_Strict):
    """Traces (OpenTelemetry, exporters chosen by the standard `OTEL_*` variables) and metrics."""

    service_name: str = Field(default="mcp-router", description="`service.name` of the router's traces.")
    metrics: bool = Field(default=True, description="Export Prometheus metrics through Ray's metrics API.")


class RouterSettings(_Strict):
    """Everything the router is configured with: one YAML file plus `ROUTER_` environment variables."""

    backends: list[BackendSpec] = Field(default_factory=list, description="The backends, each with its `kind`.")
    routing: RoutingSettings = Field(default=RoutingSettings(), description="How a question is matched to a tool.")
    intents: IntentSettings = Field(default=IntentSettings(), description="The intents questions are classified into.")
    embeddings: EmbeddingSettings = Field(default=EmbeddingSettings(), description="The embedding model.")
    resilience: ResilienceSettings = Field(default=ResilienceSettings(), description=(
        "Modes, deadlines, ejection and performance history."))
    server: ServerSettings = Field(default=ServerSettings(), description="The HTTP server and the Serve application.")
    llm: LLMSettings = Field(default=LLMSettings(), description="An optional OpenAI-compatible chat model.")
    tool_selection: ToolSelectionSettings = Field(default=ToolSelectionSettings(), description=(
        "Smart tool selection (`POST /v1/tools/select`)."))
    telemetry: TelemetrySettings = Field(default=TelemetrySettings(), description="Traces and metrics.")
    learning: LearningSettings = Field(default=LearningSettings(), description=(
        "Labelled examples from feedback and use, blended into `match`."))
    audit: AuditSettings = Field(default=AuditSettings(), description="The per-request audit log.")
    security: SecuritySettings = Field(default=SecuritySettings(), description=(
        "Limits, cleaning, pinning and checks of what backends say about their tools."))
    state_dir: str = Field(default=".state", description=(
        "Where state that survives a restart lives (embedding vectors, `feedback.sqlite`); relative to the config "
        "file."))
    demo_questions: list[str] = Field(default_factory=list, description=(
        "Questions `mcp-router demo` asks once the router is up."))

    @field_validator("backends")
    @classmethod
    def _unique_names(cls, backends: list[Any]) -> list[Any]:
        seen: set[str] = set()
        for spec in backends:
            if spec.name in seen:
                raise ValueError(f"backend name {spec.name!r} is used twice")
            seen.add(spec.name)
        return backends

    @model_validator(mode="after")
    def _intents_are_known(self) -> RouterSettings:
        for spec in self.backends:
            unknown = [i for i in spec.intents if i not in self.intents.intents]
            if unknown:
                raise ValueError(
                    f"backend {spec.name!r} declares unknown intents {unknown}; "
                    f"allowed: {sorted(self.intents.intents)}"
                )
        return self

    @property
    def enabled_backends(self) -> list[BackendSpec]:
        return [b for b in self.backends if b.enabled]

    def backend(self, name: str) -> BackendSpec | None:
        return next((b for b in self.backends if b.name == name), None)
