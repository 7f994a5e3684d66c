"""The Serve application: the ingress, the embedder deployment, bound with one settings object.

    serve run deployments.app:app config=examples/router.yaml
    serve deploy serve_config.yaml        # import_path: deployments.app:app, args: {config: ...}
"""

from __future__ import annotations

import os
from pathlib import Path

from ray.serve import Application

from deployments.embedder import Embedder
from deployments.ingress import RouterIngress
from router.config import RouterSettings
from router.config_file import load_settings

EXAMPLE_CONFIG = Path(__file__).resolve().parents[1] / "examples" / "router.yaml"


def build_application(settings: RouterSettings) -> Application:
    # Per-request access lines cost a write per call on the hot path; they are opt-in.
    logs = {"enable_access_log": settings.server.access_log}
    embedder = Embedder.options(logging_config=logs).bind(settings.embeddings)  # type: ignore[attr-defined]
    return RouterIngress.options(  # type: ignore[attr-defined]
        num_replicas=settings.server.replicas, logging_config=logs).bind(settings, embedder)


def app(args: dict[str, str] | None = None) -> Application:
    """Application builder: `config` (a path) from the Serve args, else MCP_ROUTER_CONFIG, else the example."""
    args = args or {}
    path = args.get("config") or os.environ.get("MCP_ROUTER_CONFIG") or str(EXAMPLE_CONFIG)
    return build_application(load_settings(path))
