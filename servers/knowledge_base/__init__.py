"""The project's own RAG MCP tool server: a persistent chunk store, ingestion, hybrid retrieval, answers.

    python -m mcp_router.servers.knowledge_base --docs examples/docs --store .state/rag --http 8765

`store` keeps chunks, vectors and document hashes (SQLite + numpy); `ingest` chunks and embeds a
folder of Markdown, text and JSONL files; `engine` retrieves with the router's `HybridIndex` and
answers (LLM or extractive); `server` exposes it all as the MCP tool `rag_query_with_chunks`.
Names are imported on first use, so ``import mcp_router.servers.knowledge_base.store`` does not load the MCP SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Chunk": "store", "ChunkStore": "store", "FilterError": "store", "canonical_filter": "store",
    "compile_filter": "store",
    "Chunking": "ingest", "IngestReport": "ingest", "ingest_folder": "ingest",
    "EngineSettings": "engine", "QueryError": "engine", "RagEngine": "engine", "extractive_answer": "engine",
    "build_rag_server": "server", "main": "server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
