"""What one caller of the knowledge base can make it hold or publish, with the real local model (no Ray):
filters within what SQLite can run, a bounded index cache, no file outside the document folder, nothing
stale left served, no provider's error text in an answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_router.servers.knowledge_base.engine import EngineSettings
from mcp_router.servers.knowledge_base.store import FilterError
from router.retrieval.embeddings import LocalMiniLM
from router.settings import LLMSettings
from tests.integration.test_rag import _FakeCompletions, docs, make_engine, model  # noqa: F401 - fixtures

QUESTION = "What rules apply to invoices, passwords and parcels?"


def nested(depth: int) -> dict[str, object]:
    node: dict[str, object] = {"priority": 1}
    for i in range(depth):
        node = {"$and" if i % 2 else "$or": [node]}
    return node


@pytest.mark.parametrize(("filters", "needle"), [
    ({"$or": [{"priority": i} for i in range(1000)]}, "the limit is 1000"),
    ({"priority": {"$gt": 10 ** 30}}, "beyond a 64-bit integer"),
    (nested(120), "nested deeper than 20 levels"),  # SQLite's parser stack overflowed at 100
    (nested(900), "nested deeper than 20 levels"),  # Python's recursion limit, before
    ({"a\u0000b": "x"}, "invalid field name"),  # SQLite ended the JSON path at the NUL ("JSON path error")
])
async def test_a_filter_sqlite_could_not_run_is_a_filter_error_naming_it(
        tmp_path: Path, docs: Path, model: LocalMiniLM, filters: dict[str, object], needle: str) -> None:
    engine, _ = make_engine(tmp_path, model)
    await engine.ingest(docs)
    with pytest.raises(FilterError, match=needle):
        await engine.query(QUESTION, filters=filters)


async def test_new_filters_never_push_out_the_unfiltered_index_nor_grow_past_the_bound(
        tmp_path: Path, docs: Path, model: LocalMiniLM) -> None:
    engine, _ = make_engine(tmp_path, model, settings=EngineSettings(cache_chunks=2))
    await engine.ingest(docs)
    await engine.query(QUESTION)
    for i in range(20):  # the same filter spelled twenty ways: twenty indexes, were each one kept
        await engine.query(QUESTION, filters={"priority": {"$gte": -i}})
    chunks = engine.store.count()[1]
    assert sum(len(s.chunks) for s in engine._slices.values()) <= 2 * chunks
    builds = engine.index_builds
    await engine.query(QUESTION)
    assert engine.index_builds == builds  # the unfiltered index was kept


async def test_filters_admitting_the_same_chunks_share_one_index(tmp_path: Path, docs: Path,
                                                                  model: LocalMiniLM) -> None:
    """Indexing is what costs (about a second at 5,000 chunks): a new spelling of a filter must not pay it."""
    engine, _ = make_engine(tmp_path, model)
    await engine.ingest(docs)
    first = await engine.query(QUESTION, filters={"tenant": "acme"})
    builds = engine.index_builds
    for spelled in ({"tenant": {"$eq": "acme"}}, {"tenant": {"$in": ["acme"]}}, {"$and": [{"tenant": "acme"}]}):
        assert (await engine.query(QUESTION, filters=spelled))["chunks"] == first["chunks"]
    assert engine.index_builds == builds
    await engine.query(QUESTION, filters={"tenant": "globex"})
    assert engine.index_builds == builds + 1


async def test_an_index_rebuilt_after_a_write_counts_as_just_used(tmp_path: Path, docs: Path,
                                                                   model: LocalMiniLM) -> None:
    engine, _ = make_engine(tmp_path, model, settings=EngineSettings(cache_size=3))
    await engine.ingest(docs)
    for tenant in ("acme", "globex", "initech"):
        await engine.query(QUESTION, filters={"tenant": tenant})
    (docs / "more.txt").write_text("Invoices are archived for ten years.\n", encoding="utf-8")
    other, _ = make_engine(tmp_path, model)  # another process writing the same store
    await other.ingest(docs)  # every index here is rebuilt on its next use
    await engine.query(QUESTION, filters={"tenant": "acme"})
    await engine.query(QUESTION, filters={"tenant": "umbrella"})
    assert '{"tenant":"acme"}' in engine._slices and '{"tenant":"globex"}' not in engine._slices


async def test_a_link_out_of_the_folder_is_not_followed(tmp_path: Path, docs: Path, model: LocalMiniLM) -> None:
    secret = tmp_path / "credentials.txt"
    secret.write_text("The root password is hunter2.\n", encoding="utf-8")
    os.symlink(secret, docs / "notes-link.txt")
    engine, _ = make_engine(tmp_path, model)
    await engine.ingest(docs)
    result = await engine.query("What is the root password?", k=20)
    assert all("hunter2" not in c["text"] for c in result["chunks"])


async def test_a_file_that_stops_being_utf8_has_its_old_chunks_removed(tmp_path: Path, docs: Path,
                                                                       model: LocalMiniLM) -> None:
    engine, _ = make_engine(tmp_path, model)
    await engine.ingest(docs)
    (docs / "shipping.txt").write_text("The warehouse ships on Sundays.\n", encoding="utf-16")
    report = await engine.ingest(docs)
    assert any("shipping.txt: not UTF-8" in w for w in report.warnings)
    result = await engine.query("When does the warehouse ship orders?", k=20)
    assert all(c["source"] != "shipping.txt" for c in result["chunks"])


async def test_a_failed_model_call_names_no_detail_of_the_provider(tmp_path: Path, docs: Path,
                                                                    model: LocalMiniLM) -> None:
    engine, _ = make_engine(tmp_path, model, llm=LLMSettings(base_url="http://127.0.0.1:9/v1", model="m"))
    await engine.ingest(docs)
    failing = _FakeCompletions(RuntimeError("Incorrect API key provided: sk-proj-abcd at https://llm.internal"))
    engine._client = type("Client", (), {"chat": type("Chat", (), {"completions": failing})})
    result = await engine.query("How long do refunds take?")
    assert result["retrieval"]["warnings"][0] == "LLM call failed (RuntimeError); answered extractively"


async def test_a_record_no_store_can_hold_is_skipped_and_the_rest_of_the_file_served(
        tmp_path: Path, docs: Path, model: LocalMiniLM) -> None:
    # each was an abort of the whole ingestion (the server never started) or a collection whose every
    # filtered query failed ("malformed JSON" from SQLite), or a record cut in two at U+2028
    lines = ['{"text": "Cats sleep \\ud800 all day.", "topic": "pets"}',
             '{"text": "Dogs bark at the mail carrier.", "topic": "pets", "score": NaN}',
             '{"text": "Parrots copy words.", "topic": "pets", "weight": -Infinity}',
             '{"text": "Hamsters run\u2028at night\u0085in wheels.", "topic": "pets"}']
    (docs / "pets.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    engine, _ = make_engine(tmp_path, model)
    report = await engine.ingest(docs)
    warned = [w for w in report.warnings if w.startswith("pets.jsonl")]
    assert [w.split(":")[1] for w in warned] == ["1", "2", "3"], warned
    assert "lone surrogate" in warned[0] and "NaN" in warned[1] and "-Infinity" in warned[2]
    kept = engine.store.load({"topic": "pets"})[0]
    assert [c.text for c in kept] == ["Hamsters run\u2028at night\u0085in wheels."]


async def test_a_file_that_cannot_be_read_is_a_warning_not_a_server_that_never_starts(
        tmp_path: Path, docs: Path, model: LocalMiniLM, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_router.servers.knowledge_base import ingest
    listed = ingest.discover
    monkeypatch.setattr(ingest, "discover", lambda folder: [*listed(folder), folder / "gone.md"])  # removed since
    engine, _ = make_engine(tmp_path, model)
    report = await engine.ingest(docs)
    assert any(w.startswith("gone.md: could not be read") for w in report.warnings), report.warnings
    assert engine.store.count()[1] > 0
