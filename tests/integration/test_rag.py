"""The RAG knowledge-base server with the real local model on a tiny document folder (no Ray).

Ingestion (counts, no-op re-ingest, changed and deleted files, restart), metadata filters, the
per-filter index cache, the answer modes, and the MCP tool in-process, over stdio and over HTTP.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import httpx2
import numpy as np
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from mcp_router.cli.local import free_port
from mcp_router.servers.knowledge_base.engine import EXTRACTIVE_LABEL, NO_EVIDENCE, RagEngine
from mcp_router.servers.knowledge_base.ingest import Chunking
from mcp_router.servers.knowledge_base.server import SUMMARY_CHARS, build_rag_server, section_resources
from mcp_router.servers.knowledge_base.store import ChunkStore, FilterError
from router.retrieval.embeddings import LocalMiniLM
from router.settings import LLMSettings
from tests.conftest import stop_process, wait_for

TOOL = "rag_query_with_chunks"
RESULT_KEYS = {"data", "chunks", "used_chunk_ids", "retrieval"}
CHUNK_KEYS = {"id", "rank", "source", "preview", "text", "scores"}
SCORE_KEYS = {"dense", "bm25", "dense_norm", "bm25_norm", "hybrid"}

BILLING = """# Billing

Invoices are sent on the first day of each month. Payment is due within thirty days of the invoice date.

# Refunds

Refunds are issued within five business days after a support agent approves them.
"""
NOTES = [
    {"text": "Passwords must be rotated every ninety days and never shared by email.", "topic": "security",
     "tenant": "acme", "priority": 2},
    {"text": "Late invoices incur a fee of two percent per month after the due date.", "topic": "billing",
     "tenant": "globex", "priority": 5},
    {"text": "Parcels above twenty kilograms are shipped by freight, not by courier.", "topic": "shipping",
     "tenant": "acme", "priority": 1},
]


class CountingEmbedder:
    """The real model, counting how often it is asked and for how many texts."""

    def __init__(self, model: LocalMiniLM) -> None:
        self._model = model
        self.model_id = model.model_id
        self.calls = 0
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return self._model.encode(list(texts))


@pytest.fixture(scope="module")
def model() -> LocalMiniLM:
    return LocalMiniLM()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "billing.md").write_text(BILLING, encoding="utf-8")
    (folder / "shipping.txt").write_text("The warehouse ships orders every weekday. Orders placed before "
                                         "noon ship the same day.\n", encoding="utf-8")
    lines = [json.dumps(n) for n in NOTES] + ["{not json", json.dumps({"topic": "no text"})]
    (folder / "notes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def make_engine(tmp_path: Path, model: LocalMiniLM, **kw: Any) -> tuple[RagEngine, CountingEmbedder]:
    embedder = CountingEmbedder(model)
    chunking = Chunking(size=300, overlap=40)
    engine = RagEngine(ChunkStore(tmp_path / "store"), embedder, chunking=chunking, **kw)
    return engine, embedder


async def test_ingest_counts_chunks_and_metadata(tmp_path: Path, docs: Path, model: LocalMiniLM) -> None:
    engine, embedder = make_engine(tmp_path, model)
    report = await engine.ingest(docs)
    assert (report.documents, report.added, report.unchanged, report.chunks_total) == (3, 3, 0, 6)
    assert report.chunks_embedded == 6 and embedder.texts == 6
    assert [w.split(":")[:2] for w in report.warnings] == [["notes.jsonl", "4"], ["notes.jsonl", "5"]]
    chunks = {c.id: c for c in engine.store.load()[0]}
    assert chunks["billing.md#1"].metadata == {"source": "billing.md", "heading": "Refunds", "doc_type": "md",
                                               "chunk_index": 1}
    assert chunks["notes.jsonl#1"].metadata == {"tenant": "globex", "topic": "billing", "priority": 5,
                                                "line": 2, "source": "notes.jsonl", "heading": "",
                                                "doc_type": "jsonl", "chunk_index": 1}
    assert chunks["shipping.txt#0"].metadata["doc_type"] == "txt"
    assert engine.health() == {"status": "ok", "collection": "knowledge-base", "documents": 3, "chunks": 6,
                               "embedding_model": model.model_id, "alpha": 0.5, "chunk_size": 300,
                               "chunk_overlap": 40}

async def test_reingest_unchanged_embeds_nothing_and_a_changed_file_replaces_its_chunks(
        tmp_path: Path, docs: Path, model: LocalMiniLM) -> None:
    engine, embedder = make_engine(tmp_path, model)
    await engine.ingest(docs)
    calls, texts = embedder.calls, embedder.texts
    again = await engine.ingest(docs)
    assert (again.unchanged, again.added, again.updated, again.chunks_embedded) == (3, 0, 0, 0)
    assert (embedder.calls, embedder.texts) == (calls, texts)

    (docs / "billing.md").write_text("# Billing\n\nInvoices are now sent on the fifteenth of each month.\n",
                                     encoding="utf-8")
    changed = await engine.ingest(docs)
    assert (changed.updated, changed.unchanged, changed.chunks_embedded) == (1, 2, 1)
    assert embedder.texts == texts + 1
    billing = [c for c in engine.store.load()[0] if c.source == "billing.md"]
    assert [c.text for c in billing] == ["Invoices are now sent on the fifteenth of each month."]
    result = await engine.query("When are refunds issued?", k=10)
    assert all("Refunds are issued" not in c["text"] for c in result["chunks"])

    (docs / "shipping.txt").unlink()
    removed = await engine.ingest(docs)
    assert removed.removed == 1 and removed.chunks_total == 4


async def test_restart_on_the_same_store_does_not_embed_again(tmp_path: Path, docs: Path,
                                                               model: LocalMiniLM) -> None:
    first, _ = make_engine(tmp_path, model)
    await first.ingest(docs)
    first.store.close()
    engine, embedder = make_engine(tmp_path, model)
    report = await engine.ingest(docs)
    assert report.unchanged == 3 and report.chunks_embedded == 0 and embedder.calls == 0
    result = await engine.query("How long do refunds take?")
    assert result["chunks"][0]["id"] == "billing.md#1"


async def test_where_filters(tmp_path: Path, docs: Path, model: LocalMiniLM) -> None:
    engine, _ = make_engine(tmp_path, model)
    await engine.ingest(docs)

    def ids(where: Any) -> set[str]:
        return {c.id for c in engine.store.load(where)[0]}

    notes = {"notes.jsonl#0", "notes.jsonl#1", "notes.jsonl#2"}
    assert ids({"doc_type": "jsonl"}) == notes
    assert ids({"topic": {"$in": ["security", "shipping"]}}) == {"notes.jsonl#0", "notes.jsonl#2"}
    assert ids({"$and": [{"tenant": "acme"}, {"priority": {"$gte": 2}}]}) == {"notes.jsonl#0"}
    assert ids({"$or": [{"heading": "Refunds"}, {"priority": {"$gt": 4}}]}) == {"billing.md#1",
                                                                                "notes.jsonl#1"}
    assert ids({"tenant": {"$ne": "acme"}}) == {"notes.jsonl#1"}
    assert ids({"topic": {"$nin": ["billing"]}, "source": "notes.jsonl"}) == {"notes.jsonl#0",
                                                                              "notes.jsonl#2"}
    assert ids({"source": {"$eq": "shipping.txt"}}) == {"shipping.txt#0"}
    assert ids({"priority": {"$lt": 2}}) == {"notes.jsonl#2"}
    assert ids({"priority": {"$lte": 2}}) == {"notes.jsonl#0", "notes.jsonl#2"}
    for bad, needle in [({"priority": {"$gt": "high"}}, "expected a number"),
                        ({"$not": {}}, "unknown operator"),
                        ({"topic": {"$in": []}}, "non-empty list"), ({"$and": []}, "non-empty list"),
                        ({"topic": {"$regex": "x"}}, "supported: $eq"), ({"topic": ["a"]}, "string, number")]:
        with pytest.raises(FilterError, match=re.escape(needle)):
            engine.store.load(bad)


async def test_each_filter_gets_its_own_cached_index(tmp_path: Path, docs: Path, model: LocalMiniLM) -> None:
    engine, _ = make_engine(tmp_path, model)
    await engine.ingest(docs)
    question = "What rules apply to invoices, passwords and parcels?"
    acme = await engine.query(question, k=10, filters={"tenant": "acme"})
    globex = await engine.query(question, k=10, filters={"tenant": "globex"})
    assert {c["id"] for c in acme["chunks"]} == {"notes.jsonl#0", "notes.jsonl#2"}
    assert {c["id"] for c in globex["chunks"]} == {"notes.jsonl#1"}
    builds = engine.index_builds
    again = await engine.query(question, k=10, filters={"tenant": "acme"})
    assert again["chunks"] == acme["chunks"] and engine.index_builds == builds  # served from the cache
    none = await engine.query(question, filters={"tenant": "initech"})
    assert none["chunks"] == [] and none["data"]["answer"] == NO_EVIDENCE
    assert none["retrieval"]["warnings"] == ['no chunk matched the filter {"tenant":"initech"}']
    with (docs / "notes.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"text": "Globex invoices are paid by wire transfer.", "tenant": "globex"}) + "\n")
    await engine.ingest(docs)
    refreshed = await engine.query(question, k=10, filters={"tenant": "globex"})
    assert len(refreshed["chunks"]) == 2 and engine.index_builds > builds


class _FakeCompletions:
    def __init__(self, reply: str | Exception) -> None:
        self.reply, self.requests = reply, []  # type: ignore[var-annotated]

    async def create(self, **kw: Any) -> Any:
        self.requests.append(kw)
        if isinstance(self.reply, Exception):
            raise self.reply
        message = type("M", (), {"content": self.reply})
        return type("R", (), {"choices": [type("C", (), {"message": message})]})


async def test_llm_answer_cites_chunks_and_falls_back_to_extractive(tmp_path: Path, docs: Path,
                                                                  model: LocalMiniLM) -> None:
    engine, _ = make_engine(tmp_path, model, llm=LLMSettings(base_url="http://127.0.0.1:9/v1", model="m"))
    await engine.ingest(docs)
    fake = _FakeCompletions("Refunds take five business days [1].")
    engine._client = type("Client", (), {"chat": type("Chat", (), {"completions": fake})})
    result = await engine.query("How long do refunds take?")
    assert result["data"]["answer_mode"] == "llm" and result["used_chunk_ids"] == ["billing.md#1"]
    request = fake.requests[0]
    assert request["temperature"] == 0 and "only the numbered chunks" in request["messages"][0]["content"]
    assert "[1] (billing.md)" in request["messages"][1]["content"]
    fake.reply = TimeoutError("no answer")
    fallback = await engine.query("How long do refunds take?")
    assert fallback["data"]["answer_mode"] == "extractive"
    assert "LLM call failed" in fallback["retrieval"]["warnings"][0]


def check_result(result: dict[str, Any], question: str) -> None:
    assert set(result) >= RESULT_KEYS and set(result) - RESULT_KEYS <= {"request_id", "session_id"}
    assert set(result["data"]) == {"question", "answer", "answer_mode"}
    assert result["data"]["question"] == question
    assert set(result["retrieval"]) == {"k", "alpha", "filters", "warnings"}
    assert result["chunks"], result
    for rank, chunk in enumerate(result["chunks"], 1):
        assert set(chunk) == CHUNK_KEYS and chunk["rank"] == rank and set(chunk["scores"]) == SCORE_KEYS
        assert chunk["text"].startswith(chunk["preview"].rstrip("…"))
    hybrid = [c["scores"]["hybrid"] for c in result["chunks"]]
    assert hybrid == sorted(hybrid, reverse=True)
    by_rank = {c["rank"]: c for c in result["chunks"]}
    assert set(result["used_chunk_ids"]) <= {c["id"] for c in result["chunks"]}
    if result["data"]["answer_mode"] == "extractive" and result["used_chunk_ids"]:
        label, *lines = result["data"]["answer"].split("\n")
        assert label == EXTRACTIVE_LABEL and lines
        for line in lines:  # every sentence is quoted verbatim from the chunk it cites
            m = re.fullmatch(r"- (.+) \[(\d+)\]", line)
            assert m and m.group(1) in by_rank[int(m.group(2))]["text"], line
            assert by_rank[int(m.group(2))]["id"] in result["used_chunk_ids"]


async def test_mcp_tool_in_process_result_shape_extractive_answer_and_validation(
        tmp_path: Path, docs: Path, model: LocalMiniLM) -> None:
    engine, _ = make_engine(tmp_path, model)
    await engine.ingest(docs)
    async with Client(build_rag_server(engine)) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == [TOOL] and tools[0].input_schema["required"] == ["question"]
        question = "When is payment due for an invoice?"
        filters = {"doc_type": {"$in": ["md", "txt"]}}
        res = await client.call_tool(TOOL, {"question": question, "request_id": "req-1", "session_id": "s-9",
                                            "k": 3, "alpha": 0.7, "filters": filters})
        assert not res.is_error
        result = res.structured_content
        check_result(result, question)
        assert result["request_id"] == "req-1" and result["session_id"] == "s-9"
        assert result["retrieval"] == {"k": 3, "alpha": 0.7, "filters": filters, "warnings": []}
        assert result["data"]["answer_mode"] == "extractive" and "Payment is due within thirty days" in \
            result["data"]["answer"]
        assert {c["source"] for c in result["chunks"]} <= {"billing.md", "shipping.txt"}

        capped = (await client.call_tool(TOOL, {"question": "shipping", "k": 50})).structured_content
        assert capped["retrieval"]["k"] == 20
        assert capped["retrieval"]["warnings"] == ["k capped at 20 (asked for 50)"]
        assert "request_id" not in capped
        nothing = (await client.call_tool(TOOL, {"question": "Who painted the Mona Lisa?"}))
        nothing = nothing.structured_content
        assert nothing["data"]["answer"] == NO_EVIDENCE and nothing["used_chunk_ids"] == []

        for args, needle in [({"question": "   "}, "question must be a non-empty string"),
                             ({"question": "x", "k": 0}, "k must be an integer from 1 to 100"),
                             ({"question": "x", "k": 101}, "k must be an integer from 1 to 100"),
                             ({"question": "x", "alpha": 1.5}, "alpha must be a number from 0"),
                             ({"question": "x", "filters": {"topic": {"$like": "a"}}},
                              "unknown operator '$like'")]:
            res = await client.call_tool(TOOL, args)
            assert res.is_error and needle in res.content[0].text, (args, res.content)


async def test_each_section_is_a_resource_a_client_can_list_and_read(tmp_path: Path, docs: Path,
                                                                     model: LocalMiniLM) -> None:
    (docs / "long.md").write_text("# Long\n\n" + "A sentence about nothing in particular. " * 20, encoding="utf-8")
    engine, _ = make_engine(tmp_path, model)
    async with Client(build_rag_server(engine, section_resources(docs))) as client:
        listed = (await client.list_resources()).resources
        # Named by document and heading; records of a JSONL file without a title by their file, numbered.
        assert [(str(r.uri), r.name) for r in listed] == [
            ("kb://billing.md#0", "billing.md: Billing"), ("kb://billing.md#1", "billing.md: Refunds"),
            ("kb://long.md#0", "long.md: Long"), ("kb://notes.jsonl#0", "notes.jsonl"),
            ("kb://notes.jsonl#1", "notes.jsonl (2)"), ("kb://notes.jsonl#2", "notes.jsonl (3)"),
            ("kb://shipping.txt#0", "shipping.txt")]
        by_name = {r.name: r for r in listed}
        # The description is the section's text, or its opening when longer, cut at a word.
        assert by_name["notes.jsonl (2)"].description == NOTES[1]["text"]
        long = by_name["long.md: Long"].description
        assert long is not None and long.endswith("particular. …") and len(long) <= SUMMARY_CHARS + 2
        read = await client.read_resource("kb://billing.md#1")
        assert read.contents[0].text == "# Refunds\n\nRefunds are issued within five business days after a support " \
                                        "agent approves them."
    # More sections than the limit: none is listed, rather than a part that would draw the others' questions.
    assert len(section_resources(docs, limit=7)) == 7 and section_resources(docs, limit=6) == []


async def test_stdio_subprocess_serves_the_tool(tmp_path: Path, docs: Path) -> None:
    params = StdioServerParameters(command=sys.executable, cwd=str(tmp_path), args=[
        "-m", "mcp_router.servers.knowledge_base", "--docs", str(docs), "--store", str(tmp_path / "stdio-store"),
        "--chunk-size", "300", "--chunk-overlap", "40"])
    async with Client(params) as client:
        question = "How long do refunds take?"
        res = await client.call_tool(TOOL, {"question": question, "request_id": "r-2"})
        assert not res.is_error, res.content
        result = res.structured_content
        check_result(result, question)
        assert result["chunks"][0]["id"] == "billing.md#1" and result["request_id"] == "r-2"
        assert "five business days" in result["data"]["answer"]
        res = await client.call_tool(TOOL, {"question": "x", "filters": {"$and": "no"}})
        assert res.is_error and "filters.$and: expected a non-empty list" in res.content[0].text


@pytest.fixture
def http_server(tmp_path: Path, docs: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcp_router.servers.knowledge_base", "--docs", str(docs),
                             "--store", str(tmp_path / "http-store"), "--http", str(port), "--alpha", "0.4"],
                            cwd=tmp_path, env={**os.environ, "MCP_ROUTER_KB_TOKEN": TOKEN})

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1, headers=AUTH).status_code == 200
        except httpx.HTTPError:
            assert proc.poll() is None, "the server exited"
            return False

    try:
        wait_for(up, timeout=30, interval=0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


TOKEN = "rag-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def test_over_http_every_request_needs_the_servers_token(http_server: str) -> None:
    async with httpx.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            for method, path in (("GET", "/health"), ("POST", "/mcp")):
                r = await http.request(method, f"{http_server}{path}", headers=headers, json={})
                assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer"), (headers, path)


def test_serving_http_without_a_token_is_refused_at_start(tmp_path: Path, docs: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MCP_ROUTER_KB_TOKEN"}
    r = subprocess.run([sys.executable, "-m", "mcp_router.servers.knowledge_base", "--docs", str(docs), "--store",
                        str(tmp_path / "s"), "--http", str(free_port())], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "MCP_ROUTER_KB_TOKEN" in r.stderr


async def test_http_mode_health_and_tool(http_server: str) -> None:
    async with httpx.AsyncClient(headers=AUTH) as http:
        health = (await http.get(f"{http_server}/health")).json()
    assert health.pop("embedding_model").startswith("all-MiniLM-L6-v2-onnx-")  # the id follows the weights
    assert health == {"status": "ok", "collection": "knowledge-base", "documents": 3, "chunks": 6,
                      "alpha": 0.4, "chunk_size": 800, "chunk_overlap": 120}
    async with httpx2.AsyncClient(headers=AUTH) as http, \
            Client(streamable_http_client(f"{http_server}/mcp", http_client=http)) as client:
        question = "Which parcels go by freight?"
        res = await client.call_tool(TOOL, {"question": question, "filters": {"tenant": "acme"}})
        result = res.structured_content
        check_result(result, question)
        assert {c["id"] for c in result["chunks"]} == {"notes.jsonl#0", "notes.jsonl#2"}
        assert result["retrieval"]["alpha"] == 0.4
