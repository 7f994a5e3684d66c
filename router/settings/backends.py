"""The backends: one spec per kind (MCP over stdio or streamable HTTP, Flowise, Langflow), chosen by `kind`."""

from __future__ import annotations

import os
from typing import Annotated, Literal

from pydantic import Field, JsonValue, SecretStr

from router.settings.base import NAME, Strict


class _BackendBase(Strict):
    """Settings every backend kind has."""

    name: str = Field(pattern=NAME, max_length=64,
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
    health_idle_interval_s: float | None = Field(default=None, gt=0, description=(
        "Seconds between health checks while no call has reached the backend since the last check (Envoy's "
        "no-traffic interval: idle backends are not pinged for nothing; a call that finds one down fails over "
        "and marks it down at once). Unset: six times `health_interval_s`."))
    health_timeout_s: float = Field(default=5.0, gt=0, description="Longest one health check may take.")
    max_concurrency: int = Field(default=64, ge=1, le=10_000,
                                 description=("Calls in flight at once to this backend; more wait their turn, "
                                              "and a freed slot goes to the waiting principal holding fewest."))
    read_only: bool | None = Field(default=None, description=(
        "true: no call to this backend changes anything, so calls may be duplicated (parallel, hedged, "
        "consensus), retried elsewhere after a timeout and answered from the response cache; false: every "
        "call may act, whatever the server declares. Unset: as each MCP tool's annotations declare "
        "(`readOnlyHint`, `idempotentHint`; none means it may act), prompts and resources read-only, flows not."))
    trust_changes: bool = Field(default=False, description=(
        "true: a changed tool definition is pinned again at once instead of being held out of routing "
        "until `mcp-router approve` (see `security.pin_tools`)."))


class _McpBase(_BackendBase):
    capabilities: list[Literal["tools", "prompts", "resources"]] = Field(
        default=["tools", "prompts", "resources"], description="Which kinds of capability are listed and routed to.")
    protocol: Literal["auto", "legacy"] = Field(default="auto", description=(
        "The protocol generation the router speaks to the server: auto, the newest both speak (2026-07-28 "
        "when the server does); legacy, the 2025 handshake (a server that asks its client for sampling or "
        "elicitation in the middle of a call, as 2025 servers do, reaches a gateway client only this way)."))
    read_only_tools: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=1000, description=(
            "Tools that only read, by name or shell-style pattern (`get_*`, `list_*`), for a server that does not "
            "annotate its tools: they count as declaring `readOnlyHint`, so a question is answered by them at the "
            "read-only threshold and their calls may be duplicated and cached. `read_only` set decides over it."))
    fixed_arguments: dict[Annotated[str, Field(min_length=1, max_length=128)], JsonValue] = Field(
        default_factory=dict, description=(
            "Values put into every call of this backend's tools that take a parameter of that name, e.g. "
            "`{repo_path: /srv/repo}` for a git server. The parameter is taken out of each tool's input schema as "
            "served, so routing, an LLM and gateway clients never fill it, and a caller's own value is replaced: "
            "the tools work on what the operator set, and only on that."))


class McpStdioSpec(_McpBase):
    """An MCP server the backend actor runs as a child process and talks to over stdin/stdout."""

    kind: Literal["mcp_stdio"] = Field(default="mcp_stdio", description="An MCP server run as a child process.")
    command: str = Field(min_length=1, description="The program; `python` is the router's own interpreter.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables added for the process.")
    cwd: str | None = Field(default=None, description="Working directory, relative to the config file.")


class LaunchSpec(Strict):
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


class McpHttpSpec(_McpBase):
    """An MCP server reached over streamable HTTP, optionally started by the backend actor (`launch`)."""

    kind: Literal["mcp_http"] = Field(default="mcp_http", description="An MCP server over streamable HTTP.")
    url: str = Field(pattern=r"^https?://", description="The server's MCP endpoint, e.g. `http://host:8765/mcp`.")
    headers: dict[str, SecretStr] = Field(default_factory=dict, description=(
        "Headers sent with every request (e.g. `Authorization`); values are secrets."))
    launch: LaunchSpec | None = Field(default=None, description="A local server to start (and restart) first.")


class FlowSpec(Strict):
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


