"""The HTTP endpoint and the Serve application (`server`), and telemetry (`telemetry`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from router.settings.base import Strict
from router.settings.security import AuthSettings


class HostingSettings(Strict):
    """How backends share actor processes (`actors.host`): each keeps its own connection, catalog, health and
    limits, and one's slowness never holds up another's calls; a host's crash restarts all it holds."""

    backends_per_host: int = Field(default=32, ge=1, le=1000, description=(
        "Network backends (MCP over HTTP, Flowise, Langflow) packed into one actor process; 1 gives each "
        "its own. A process costs about 130 MB and a backend in it about 1 MB (docs/operations.md)."))
    stdio_backends_per_host: int = Field(default=1, ge=1, le=1000, description=(
        "stdio MCP backends per actor process (each also runs its server as a child of that process)."))


class ServerSettings(Strict):
    """The HTTP endpoint and the Serve application."""

    host: str = Field(default="127.0.0.1", description="Address `mcp-router serve` listens on.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `mcp-router serve` listens on.")
    ingress: Literal["haproxy", "direct", "proxy"] = Field(default="haproxy", description=(
        "haproxy: Ray Serve's HAProxy ingress on host:port, in front of the replicas' own HTTP servers (keeps "
        "the address when a replica is replaced); direct: the ingress replica serves HTTP itself (Ray Serve "
        "direct ingress; a replaced replica may come back on another port); proxy: Serve's HTTP proxy."))
    replicas: int = Field(default=1, ge=1, description="Ingress replicas (a Serve config's autoscaling replaces it).")
    hosting: HostingSettings = Field(default=HostingSettings(), description="How backends share actor processes.")
    max_question_bytes: int = Field(default=32 * 1024, ge=16, description="Longest question accepted: 413 above.")
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, description="Largest request body accepted: 413 above.")
    body_timeout_s: float = Field(default=30.0, gt=0, le=3600, description=(
        "Longest wait for a request's whole body: 408 after it (a client sending a byte now and then holds a "
        "request slot no longer)."))
    max_header_bytes: int = Field(default=16 * 1024, ge=1024, description=(
        "Largest total of request headers: 431 above."))
    max_in_flight: int = Field(default=512, ge=1, description=(
        "Requests one replica runs at once; more are refused at once with 503 and Retry-After, not queued."))
    auth: AuthSettings = Field(default=AuthSettings(), description=(
        "API keys, JWTs and per-principal policies; off only on loopback addresses."))
    allowed_hosts: list[str] = Field(default_factory=list, description=(
        "`Host` names `/mcp/` answers besides loopback ones (the MCP SDK's DNS-rebinding protection answers 421 "
        "to others; with authentication off, every other path too): the name a load balancer or clients reach "
        "the router by, e.g. `router.example.com` (any port) or `router.example.com:8443`; `*` turns the check "
        "off."))
    gateway: bool = Field(default=True, description=(
        "Serve the MCP backends to MCP clients: each at `/mcp/backends/{name}/`, all of them at `/mcp/backends/` "
        "(a caller's policy needs `backend_override`; its allow and deny lists apply)."))
    access_log: bool = Field(default=False, description="Serve's per-request access log lines.")
    app_name: str = Field(default="mcp-router", description=(
        "The Serve application's name (`serve.get_app_handle(...)`)."))
    namespace: str = Field(default="mcp-router", description="The Ray namespace the application runs in.")


class TelemetrySettings(Strict):
    """Traces (OpenTelemetry, exporters chosen by the standard `OTEL_*` variables) and metrics."""

    service_name: str = Field(default="mcp-router", description="`service.name` of the router's traces.")
    metrics: bool = Field(default=True, description="Export Prometheus metrics through Ray's metrics API.")


