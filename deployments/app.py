"""The Serve application: the ingress, the backend pool that owns the backends, and (for large
embedding models) the embedder deployment, bound with one settings object.

    serve run deployments.app:app config=examples/router.yaml
    serve deploy serve_config.yaml        # import_path: deployments.app:app, args: {config: ...}

Every build carries a generation (its time) and the router's code version, so a `serve deploy` of
changed code replaces the replicas and the backend actors, and replicas of an older build never
bring back a backend the newer one replaced.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from ray import serve
from ray.serve import Application

from actors.pool import BackendPool
from deployments.embedder import Embedder
from deployments.ingress import RouterIngress
from mcp_router import examples
from router.retrieval.embeddings import placement
from router.security.identity import check_bind, is_loopback
from router.settings import RouterSettings
from router.settings.file import load_settings

ROOT = Path(__file__).resolve().parents[1]
_CODE = ("router", "actors", "deployments")



# One replica: exactly one live actor per backend, however many router replicas start at once.
@serve.deployment(name="BackendPool", num_replicas=1, ray_actor_options={"num_cpus": 0}, max_ongoing_requests=100,
                  graceful_shutdown_timeout_s=60)
class BackendPoolDeployment(BackendPool):
    async def __del__(self) -> None:
        """Serve's graceful stop: the backends stop with it (MCP sessions closed, child processes ended)."""
        await self.shutdown()


def code_version() -> str:
    """A hash of the router's source files: changes whenever its code does."""
    digest = hashlib.sha256()
    for package in _CODE:
        for path in sorted((ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build_application(settings: RouterSettings) -> Application:
    # Per-request access lines cost a write per call on the hot path; they are opt-in.
    logs = {"enable_access_log": settings.server.access_log}
    pool = BackendPoolDeployment.options(  # type: ignore[attr-defined]
        logging_config=logs).bind(settings.server.app_name, code_version(), settings.security, settings.state_dir,
                                  settings.server.hosting, settings.telemetry.metrics)
    embedder = None
    if placement(settings.embeddings) == "deployment":
        embedder = Embedder.options(logging_config=logs).bind(settings.embeddings)  # type: ignore[attr-defined]
    return RouterIngress.options(  # type: ignore[attr-defined]
        num_replicas=settings.server.replicas, logging_config=logs).bind(settings, pool, embedder, time.time())


def app(args: dict[str, str] | None = None) -> Application:
    """Application builder: `config` (a path) from the Serve args, else MCP_ROUTER_CONFIG, else the example.
    `http_host`: the address Serve's HTTP proxies listen on (serve_config.yaml's http_options.host);
    without authentication configured, only a loopback address is accepted."""
    args = args or {}
    path = args.get("config") or os.environ.get("MCP_ROUTER_CONFIG") or str(examples.CONFIG)
    settings = load_settings(path)
    check_bind(settings.server.auth, [settings.server.host, args.get("http_host", settings.server.host)])
    http_host = args.get("http_host")
    if http_host and not is_loopback(http_host) and settings.learning.accept_feedback is None:
        # Feedback is taken by default only where every caller is local, and callers reach these proxies from
        # anywhere (server.host, which the default reads otherwise, names where `mcp-router serve` listens).
        settings = settings.model_copy(update={"learning": settings.learning.model_copy(
            update={"accept_feedback": False})})
    return build_application(settings)
