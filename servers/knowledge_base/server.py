"""The RAG knowledge-base MCP server: one tool, `rag_query_with_chunks`, each section of its documents as a
resource, and ``GET /health``.

    python -m mcp_router.servers.knowledge_base --docs examples/docs            # ingest, then serve on stdio
    MCP_ROUTER_KB_TOKEN=... python -m mcp_router.servers.knowledge_base --docs examples/docs --http 8765
                                                       # http://127.0.0.1:8765/mcp, with that bearer token
    python -m mcp_router.servers.knowledge_base --docs DIR --store .state/rag --chunk-size 600 --alpha 0.4

At start-up the folder is ingested into the store (unchanged files cost nothing), then the server
answers questions with the ranked chunks, every score component, the chunk ids the answer used and
the retrieval settings. An OpenAI-compatible LLM is used for the answer when ``--llm-model`` (or
``RAG_LLM_MODEL``) is set together with ``--llm-base-url`` (``RAG_LLM_BASE_URL``) or an API key in
``$OPENAI_API_KEY``; otherwise the answer is extractive. Logs go to stderr (stdout is the stdio
transport).
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import TextResource
from mcp.types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_router.servers.knowledge_base.engine import EngineSettings, QueryError, RagEngine
from mcp_router.servers.knowledge_base.ingest import DOC_TYPES, Chunking, folder_sections
from mcp_router.servers.knowledge_base.store import ChunkStore, FilterError
from router.settings import EmbeddingSettings, LLMSettings

log = logging.getLogger("mcp_router.knowledge_base")
TOKEN_ENV = "MCP_ROUTER_KB_TOKEN"
# A section's opening, as its resource's description: enough to say what the section covers. Openings twice as long
# matched other servers' short questions in the bundled example ("What is 6 times 7?" went to the composite score).
SUMMARY_CHARS = 200
MAX_RESOURCES = 1000

TOOL_DESCRIPTION = """\
Answer a question from the mcp-router project documentation and knowledge base (retrieval-augmented).

Searches the document chunks (dense recall, BM25, alpha fusion) and answers only from them. Returns
data.answer (answer_mode "llm" or "extractive"), the ranked chunks with their scores, the ids of the
chunks the answer used, and the retrieval settings with any warnings.

Optional: k (chunks to return, 1-100, capped at 20), alpha (0 = BM25 only, 1 = dense only), filters
on chunk metadata, e.g. {"source": "faq.md"}, {"topic": {"$in": ["routing", "resilience"]}},
{"$and": [{"doc_type": "jsonl"}, {"topic": "operations"}]} (operators $eq $ne $in $nin $gt $gte
$lt $lte $and $or; fields: source, heading, doc_type, chunk_index and any JSONL field)."""


class BearerGuard:
    """Every HTTP request needs `Authorization: Bearer <token>` (compared in constant time): the server
    answers only whoever holds the credential (the router that launched it), wherever it listens."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = JSONResponse({"error": "unauthenticated: this server needs its bearer token"},
                                        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="knowledge-base"'})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def section_resources(folder: Path, limit: int = MAX_RESOURCES) -> list[TextResource]:
    """Each section of the documents as a resource (`kb://<source>#<n>`): a client can list and read what the
    knowledge base holds, and a router can tell from their texts which questions it covers. Beyond `limit`
    sections none is listed: a router rejects a catalog larger than its `security.max_capabilities` (2000) whole,
    search tool and all, and a part of the sections would draw the questions of the rest."""
    found = folder_sections(folder)
    if len(found) > limit:
        log.warning("%d sections, more than --max-resources %d: none is listed as a resource", len(found), limit)
        return []
    resources: list[TextResource] = []
    parts: dict[str, int] = {}
    for source, heading, text in found:
        n = parts[source] = parts.get(source, -1) + 1
        name = f"{source}: {heading}" if heading else source
        if n and any(r.name == name for r in resources[-n:]):  # a heading repeated within its document
            name = f"{name} ({n + 1})"
        summary = " ".join(text.split())
        resources.append(TextResource(
            uri=f"kb://{source}#{n}", name=name, title=heading or source,
            mime_type="text/markdown" if DOC_TYPES[Path(source).suffix.lower()] == "md" else "text/plain",
            description=summary if len(summary) <= SUMMARY_CHARS else summary[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " …",
            text=f"# {heading}\n\n{text}" if heading else text))
    return resources


def build_rag_server(engine: RagEngine, resources: Sequence[TextResource] = ()) -> MCPServer:
    server = MCPServer(
        "knowledge-base",
        instructions="Documentation and knowledge base of the mcp-router project: configuration, routing, "
                     "resilience, operations, embeddings and the FAQ. Answers questions from the documents, "
                     "with the chunks it used.",
    )

    @server.tool(description=TOOL_DESCRIPTION, annotations=ToolAnnotations(read_only_hint=True))
    async def rag_query_with_chunks(question: str, request_id: str | None = None,
                                    session_id: str | None = None, k: int | None = None,
                                    alpha: float | None = None,
                                    filters: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            result = await engine.query(question, k=k, alpha=alpha, filters=filters)
        except (QueryError, FilterError) as exc:
            raise ToolError(f"invalid arguments: {exc}") from None
        extra = {key: value for key, value in (("request_id", request_id), ("session_id", session_id))
                 if value is not None}
        return {**result, **extra}

    for resource in resources:
        server.add_resource(resource)

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(engine.health))

    return server


def build_engine(args: argparse.Namespace) -> RagEngine:
    from router.retrieval.embeddings import BASE_MODEL, build_embedder

    llm = LLMSettings(base_url=args.llm_base_url or None, model=args.llm_model or None,
                      api_key_env=args.llm_api_key_env)
    chunking = Chunking(size=args.chunk_size, overlap=args.chunk_overlap, unit=args.chunk_unit)
    # The untrained model: the router's default was trained on tool documents, not passages of prose.
    embedder = build_embedder(EmbeddingSettings(model=BASE_MODEL))
    return RagEngine(ChunkStore(args.store, collection=args.collection), embedder,
                     chunking=chunking, settings=EngineSettings(alpha=args.alpha), llm=llm)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m mcp_router.servers.knowledge_base",
                                     description="RAG knowledge-base MCP server (stdio or streamable HTTP).")
    parser.add_argument("--docs", required=True, help="folder of .md, .txt and .jsonl documents to ingest")
    parser.add_argument("--store", default=".state/rag", help="directory of the persistent store")
    parser.add_argument("--collection", default="knowledge-base")
    parser.add_argument("--http", type=int, metavar="PORT",
                        help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--token-env", default=TOKEN_ENV, help=(
        "environment variable holding the bearer token every HTTP request must carry (default "
        f"{TOKEN_ENV}; the router's `launch: token_env` sets a new one at each launch)"))
    parser.add_argument("--insecure-no-auth", action="store_true",
                        help="serve HTTP without a token (anyone who reaches the port can query)")
    parser.add_argument("--chunk-size", type=int, default=800)
    parser.add_argument("--chunk-overlap", type=int, default=120)
    parser.add_argument("--chunk-unit", choices=["chars", "words"], default="chars")
    parser.add_argument("--alpha", type=float, default=0.5, help="default dense weight of the fusion, 0 to 1")
    parser.add_argument("--max-resources", type=int, default=MAX_RESOURCES, help=(
        "most sections listed as resources; a folder with more lists none (the search tool still answers)"))
    parser.add_argument("--llm-base-url", default=os.environ.get("RAG_LLM_BASE_URL"))
    parser.add_argument("--llm-model", default=os.environ.get("RAG_LLM_MODEL"))
    parser.add_argument("--llm-api-key-env", default="OPENAI_API_KEY")
    args = parser.parse_args(argv)
    if not 0 <= args.alpha <= 1:
        parser.error(f"--alpha must be between 0 and 1, got {args.alpha}")
    if args.max_resources < 0:
        parser.error(f"--max-resources must be 0 or more, got {args.max_resources}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    docs = Path(args.docs)
    if not docs.is_dir():
        raise SystemExit(f"error: --docs {docs} is not a folder")
    try:
        engine = build_engine(args)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    report = asyncio.run(engine.ingest(docs))
    log.info("ingested %s: %s", docs, json.dumps(report.as_dict()))
    server = build_rag_server(engine, section_resources(docs, args.max_resources))
    if args.http is None:
        server.run()
        return
    import uvicorn

    token = os.environ.get(args.token_env)
    if not token and not args.insecure_no_auth:
        raise SystemExit(f"error: serving over HTTP needs a bearer token in ${args.token_env} (or "
                         "--insecure-no-auth)")
    app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                     host=args.host)
    uvicorn.run(BearerGuard(app, token) if token else app, host=args.host, port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
