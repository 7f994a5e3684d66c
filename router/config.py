"""Settings and backend specs: one `RouterSettings` object, read once at start-up.

`router.config_file.load_settings` builds it from a YAML file (or the `mcpServers` JSON of Claude
Desktop and Cursor) and `ROUTER_` environment variables; constructors receive it from there.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

DEFAULT_INTENTS = ("creative-orientation", "technical-analysis", "document-qa", "code-review", "general")
CapabilityKind = Literal["tool", "prompt", "resource", "flow"]
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _BackendBase(_Strict):
    name: str = Field(pattern=_NAME, max_length=64)
    description: str = ""
    enabled: bool = True
    # Intent names this backend is declared good at; a match adds `routing.intent_bonus`.
    intents: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    connect_timeout_s: float = Field(default=20.0, gt=0, le=300)
    catalog_ttl_s: float = Field(default=60.0, gt=0)
    health_interval_s: float = Field(default=10.0, gt=0)
    health_timeout_s: float = Field(default=5.0, gt=0)
    max_concurrency: int = Field(default=64, ge=1, le=10_000)


class McpStdioSpec(_BackendBase):
    kind: Literal["mcp_stdio"] = "mcp_stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    capabilities: list[Literal["tools", "prompts", "resources"]] = ["tools", "prompts", "resources"]


class LaunchSpec(_Strict):
    """A local HTTP server the backend actor starts (and restarts) itself before connecting."""

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    startup_timeout_s: float = Field(default=30.0, gt=0)


class McpHttpSpec(_BackendBase):
    kind: Literal["mcp_http"] = "mcp_http"
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    launch: LaunchSpec | None = None
    capabilities: list[Literal["tools", "prompts", "resources"]] = ["tools", "prompts", "resources"]


class FlowSpec(_Strict):
    """Extra routing information for one flow; flows not listed are still discovered."""

    id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    intents: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    api_key: SecretStr | None = None  # Flowise per-flow API key


class _FlowBackendBase(_BackendBase):
    url: str = Field(pattern=r"^https?://")
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    flows: list[FlowSpec] = Field(default_factory=list)
    # When true, only the flows listed in `flows` are routed to.
    only_listed_flows: bool = False

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return os.environ.get(self.api_key_env)
        return None


class FlowiseSpec(_FlowBackendBase):
    kind: Literal["flowise"] = "flowise"


class LangflowSpec(_FlowBackendBase):
    kind: Literal["langflow"] = "langflow"
    input_type: str = "chat"
    output_type: str = "chat"


BackendSpec = Annotated[
    McpStdioSpec | McpHttpSpec | FlowiseSpec | LangflowSpec, Field(discriminator="kind")
]


class ScoreWeights(_Strict):
    match: float = Field(default=0.5, ge=0)
    health: float = Field(default=0.3, ge=0)
    perf: float = Field(default=0.2, ge=0)


class RoutingSettings(_Strict):
    # Chosen on LiveMCPBench (benchmarks/routing_accuracy.py): 0.5 had the best server R@1 and tool R@5.
    alpha: float = Field(default=0.5, ge=0, le=1)
    dense_top_n: int = Field(default=200, ge=1)
    method: Literal["flat", "two_level"] = "flat"
    # Share of a capability's retrieval score that comes from its server's own document (flat method).
    # 0.35 was best on LiveMCPBench: server R@1 0.60 -> 0.66 and tool R@10 0.48 -> 0.51, tool R@5 level.
    server_weight: float = Field(default=0.35, ge=0, le=1)
    top_servers: int = Field(default=3, ge=1)
    candidates: int = Field(default=5, ge=1, le=100)
    weights: ScoreWeights = ScoreWeights()
    intent_bonus: float = Field(default=0.1, ge=0, le=1)
    # Below this raw cosine (and with no keyword overlap) nothing is relevant.
    min_similarity: float = Field(default=0.2, ge=-1, le=1)
    # Two different tools whose composite scores are this close are ambiguous.
    ambiguity_margin: float = Field(default=0.0, ge=0, le=1)
    # A runner-up this close to a best match that needs unknown arguments is called instead of a 422.
    callable_margin: float = Field(default=0.15, ge=0, le=1)
    # Retrieval score a candidate needs, relative to the best one, to be tried in fallback.
    min_relative_match: float = Field(default=0.5, ge=0, le=1)
    query_cache_size: int = Field(default=4096, ge=0)


class IntentDef(_Strict):
    description: str
    examples: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


def _default_intents() -> dict[str, IntentDef]:
    return {
        "creative-orientation": IntentDef(
            description="write, brainstorm or imagine something new: stories, poems, names, slogans, ideas",
            examples=["write a short poem about the sea", "brainstorm names for a coffee shop",
                      "draft a catchy slogan for our product", "imagine a story about a robot"],
            keywords=["write", "poem", "story", "brainstorm", "slogan", "creative", "imagine", "draft"],
        ),
        "technical-analysis": IntentDef(
            description="compute, convert, measure, compare or analyse data, numbers, units, systems, times",
            examples=["convert 5 km to miles", "what is 12 times 7", "analyse the latency figures",
                      "what time is it in Tokyo", "compare the throughput of two servers"],
            keywords=["calculate", "compute", "convert", "analyse", "analyze", "benchmark", "metrics",
                      "latency", "performance", "statistics", "how many", "how much"],
        ),
        "document-qa": IntentDef(
            description="answer a question from documents, manuals, a knowledge base or documentation",
            examples=["what does the documentation say about configuration", "how do I deploy on a cluster",
                      "according to the manual, what is the default port", "summarise the design notes"],
            keywords=["documentation", "docs", "manual", "according to", "knowledge base", "guide", "readme",
                      "faq", "policy"],
        ),
        "code-review": IntentDef(
            description="review, explain, debug or improve source code, diffs, commits and repositories",
            examples=["review this pull request", "why does this function raise a KeyError",
                      "show the git log of the repository", "refactor this python class"],
            keywords=["code", "review", "bug", "refactor", "function", "commit", "diff", "git", "repository",
                      "pull request", "python", "stack trace"],
        ),
        "general": IntentDef(
            description="anything else: everyday questions, facts, chit-chat, lookups",
            examples=["hello", "remember that my favourite colour is blue", "echo this message"],
            keywords=[],
        ),
    }


class IntentSettings(_Strict):
    intents: dict[str, IntentDef] = Field(default_factory=_default_intents)
    default: str = "general"
    # Blend of prototype-embedding similarity and keyword hits.
    keyword_weight: float = Field(default=0.3, ge=0, le=1)

    @model_validator(mode="after")
    def _default_is_known(self) -> IntentSettings:
        if self.default not in self.intents:
            raise ValueError(f"intents.default {self.default!r} is not one of {sorted(self.intents)}")
        return self


class EmbeddingSettings(_Strict):
    provider: Literal["local", "openai"] = "local"
    model: str = "all-MiniLM-L6-v2"
    # Where questions are embedded: `replica` runs the model inside each router replica (in a thread,
    # concurrent questions batched); `deployment` in its own Serve deployment, for large or GPU models.
    # Unset: by model size (the small local models and remote endpoints run in the replica).
    placement: Literal["replica", "deployment"] | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    batch_size: int = Field(default=64, ge=1, le=2048)
    max_batch_wait_s: float = Field(default=0.005, ge=0)
    timeout_s: float = Field(default=30.0, gt=0)
    threads: int = Field(default=1, ge=1, le=64)


class EjectionSettings(_Strict):
    consecutive_failures: int = Field(default=5, ge=1)
    failure_rate: float = Field(default=0.5, gt=0, le=1)
    window_s: float = Field(default=30.0, gt=0)
    min_requests: int = Field(default=10, ge=1)
    base_ejection_s: float = Field(default=5.0, gt=0)
    max_ejection_s: float = Field(default=300.0, gt=0)


class ResilienceSettings(_Strict):
    default_mode: Literal["fallback", "parallel", "hedged", "consensus"] = "fallback"
    deadline_s: float = Field(default=30.0, gt=0, le=600)
    max_attempts: int = Field(default=3, ge=1, le=20)
    parallel_k: int = Field(default=3, ge=1, le=10)
    consensus_k: int = Field(default=3, ge=1, le=10)
    consensus_similarity: float = Field(default=0.85, ge=0, le=1)
    hedge_min_delay_ms: float = Field(default=20.0, ge=0)
    hedge_max_delay_ms: float = Field(default=2000.0, ge=0)
    hedge_default_delay_ms: float = Field(default=200.0, ge=0)
    response_cache_ttl_s: float = Field(default=300.0, ge=0)
    response_cache_size: int = Field(default=1024, ge=0)
    ejection: EjectionSettings = EjectionSettings()
    perf_window: int = Field(default=100, ge=10, le=10_000)
    perf_snapshot_interval_s: float = Field(default=5.0, gt=0)
    stats_refresh_s: float = Field(default=1.0, gt=0)


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    # direct: the ingress replica serves HTTP itself (Ray Serve direct ingress); proxy: Serve's HTTP proxy.
    ingress: Literal["direct", "proxy"] = "direct"
    replicas: int = Field(default=1, ge=1)
    max_question_bytes: int = Field(default=32 * 1024, ge=16)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    access_log: bool = False  # Serve's per-request access log lines
    # Calls to backend actors on the replica's own node go over the actor's Unix socket rather than
    # as Ray tasks (see actors.executor); false sends every call through Ray.
    same_node_channel: bool = True
    app_name: str = "mcp-router"
    namespace: str = "mcp-router"


class LLMSettings(_Strict):
    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    max_tool_turns: int = Field(default=8, ge=1, le=50)

    @property
    def configured(self) -> bool:
        return bool(self.model and (self.base_url or self.resolved_api_key()))

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return os.environ.get(self.api_key_env)


class ToolSelectionSettings(_Strict):
    # Selection engages only above both thresholds; below them every tool is returned.
    min_tools: int = Field(default=30, ge=0)
    min_servers: int = Field(default=4, ge=0)
    max_servers: int = Field(default=12, ge=1)
    # Retrieval keeps whole servers, best first, until they hold this share of all tools.
    max_tool_share: float = Field(default=0.2, gt=0, le=1)
    # How many of retrieval's best servers an LLM chooses among.
    llm_candidates: int = Field(default=15, ge=1)
    session_cache_size: int = Field(default=10_000, ge=0)


class TelemetrySettings(_Strict):
    service_name: str = "mcp-router"
    metrics: bool = True


class RouterSettings(_Strict):
    backends: list[BackendSpec] = Field(default_factory=list)
    routing: RoutingSettings = RoutingSettings()
    intents: IntentSettings = IntentSettings()
    embeddings: EmbeddingSettings = EmbeddingSettings()
    resilience: ResilienceSettings = ResilienceSettings()
    server: ServerSettings = ServerSettings()
    llm: LLMSettings = LLMSettings()
    tool_selection: ToolSelectionSettings = ToolSelectionSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    # Where caches that survive a restart live (embedding vectors); relative to the config file.
    state_dir: str = ".state"
    # Questions `mcp-router demo` asks once the router is up.
    demo_questions: list[str] = Field(default_factory=list)

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
