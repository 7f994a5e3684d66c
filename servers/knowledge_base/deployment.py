"""The RAG knowledge-base server as a Ray Serve application next to the router.

    MCP_ROUTER_KB_TOKEN=... serve run mcp_router.servers.knowledge_base.deployment:app docs=DOCS store=STORE

In `serve_config.yaml` it is the application `knowledge-base` at route prefix `/rag`, so the router
reaches it as an `mcp_http` backend at `http://<serve>/rag/mcp`. The MCP app is built inside the
replica (it cannot be pickled); the documents are ingested when the replica starts (unchanged files
are skipped, so a restart embeds nothing).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ray import serve
from ray.serve import Application

from mcp_router.servers.knowledge_base.server import (
    BearerGuard,
    build_engine,
    build_rag_server,
    parse_args,
    section_resources,
)


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256)
@serve.ingress()
class KnowledgeBase:
    async def __init__(self, argv: list[str]) -> None:  # type: ignore[misc]
        args = parse_args(argv)
        # Served on the cluster's public port: never without its credential.
        self.token = os.environ.get(args.token_env)
        if not self.token:
            raise ValueError(f"the knowledge-base application needs a bearer token in ${args.token_env} "
                             "(runtime_env.env_vars); the router sends it as an mcp_http backend header")
        self.engine = build_engine(args)
        await self.engine.ingest(Path(args.docs))
        self.resources = section_resources(Path(args.docs), args.max_resources)

    def __serve_build_asgi_app__(self) -> Any:
        server = build_rag_server(self.engine, self.resources)
        app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                         host="0.0.0.0")  # behind Serve: no DNS-rebinding host check
        return BearerGuard(app, self.token)


def app(args: dict[str, str]) -> Application:
    """Builder: `docs` (required) and optionally `store`, `chunk_size`, `chunk_overlap`, `alpha`, `max_resources`."""
    if "docs" not in args:
        raise ValueError("the knowledge-base application needs the argument docs=<folder of documents>")
    argv = ["--docs", args["docs"], "--store", args.get("store", ".state/rag")]
    for key in ("chunk_size", "chunk_overlap", "alpha", "max_resources"):
        if key in args:
            argv += [f"--{key.replace('_', '-')}", str(args[key])]
    return KnowledgeBase.bind(argv)  # type: ignore[attr-defined]
