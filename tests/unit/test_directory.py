"""The directory's view of catalog changes: changes announced together are indexed in one rebuild, a
reader of the statuses never waits for it, and changed catalogs are served before their new descriptions
are embedded."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from actors import directory as directory_module
from actors.backends.base import make_catalog
from actors.directory import BackendDirectory
from actors.executor import ActorTable
from actors.host import BackendRef
from router.retrieval.catalog import CatalogIndex
from router.retrieval.embeddings import CachedEmbedder, EmbeddingCache
from router.settings import RouterSettings
from router.values import BackendStatus, Capability, Catalog
from tests.unit.helpers import embed_texts


class _Method:
    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def remote(self, *args: Any) -> Any:
        return self._fn(*args)


class FakeHost:
    """A host of backends whose catalog versions the test changes."""

    def __init__(self, names: list[str]) -> None:
        self.versions = dict.fromkeys(names, 1)
        self.catalogs = _Method(self._catalogs)
        self.get_statuses = _Method(self._statuses)
        self.start_all = _Method(self._started)

    async def _started(self, members: list[str], wait_s: float) -> None:
        return None

    def catalog(self, name: str) -> Catalog:
        v = self.versions[name]
        return Catalog(backend=name, version=str(v), description=f"{name} service",
                       capabilities=(Capability(backend=name, name=f"tool_v{v}", description=f"{name} tool v{v}"),))

    async def _statuses(self, members: list[str]) -> dict[str, BackendStatus]:
        return {m: BackendStatus(name=m, kind="mcp_http", transport="streamable-http", health="ok",
                                 catalog_version=str(self.versions[m])) for m in members}

    async def _catalogs(self, known: dict[str, str | None]) -> dict[str, Catalog]:
        return {m: self.catalog(m) for m, v in known.items() if v != str(self.versions[m])}


async def test_catalogs_changed_together_are_indexed_in_one_rebuild_without_holding_up_the_status_read() -> None:
    names = ["a", "b", "c"]
    settings = RouterSettings.model_validate({"backends": [
        {"name": n, "kind": "mcp_http", "url": f"http://127.0.0.1:9/{n}/mcp"} for n in names]})
    host = FakeHost(names)
    indexed: list[dict[str, str]] = []
    directory = BackendDirectory(settings, ActorTable({n: BackendRef(host, n) for n in names}), None, None,
                                 on_index=lambda cats, _: indexed.append({c.backend: c.version for c in cats}))
    await directory.wait_ready(timeout_s=1)
    assert indexed == [{"a": "1", "b": "1", "c": "1"}]

    host.versions["a"] = 2  # the first of a storm: the poll sees only this one
    await asyncio.wait_for(directory.refresh_statuses(settle_s=0.2), 0.1)  # returns before any rebuild
    host.versions["b"] = host.versions["c"] = 2  # the rest arrive while the change settles
    assert directory._syncing is not None
    await directory._syncing
    assert indexed[1:] == [{"a": "2", "b": "2", "c": "2"}]
    assert [c.name for c in directory.catalogs["b"].capabilities] == ["tool_v2"]

    await directory.refresh_statuses(settle_s=0)  # nothing changed since: no rebuild
    await asyncio.sleep(0.05)
    assert len(indexed) == 2


class GatedEmbedder:
    """Embeds at once, except texts holding `slow`, which wait for the gate (a model busy with them)."""

    model_id = "gated"

    def __init__(self, slow: str) -> None:
        self.slow, self.gate, self.asked = slow, asyncio.Event(), []

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.asked.append(list(texts))
        if any(self.slow in t for t in texts):
            await self.gate.wait()
        return embed_texts(texts)


def _two_backends() -> tuple[RouterSettings, dict[str, list[Capability]], FakeHost]:
    """Backends a and b of one tool each, whose catalogs the test changes through `tools`."""
    settings = RouterSettings.model_validate({"backends": [
        {"name": n, "kind": "mcp_http", "url": f"http://127.0.0.1:9/{n}/mcp"} for n in ("a", "b")]})
    tools = {"a": [Capability(backend="a", name="forecast", description="Weather forecast for a city.")],
             "b": [Capability(backend="b", name="convert", description="Convert between units.")]}
    host = FakeHost(["a", "b"])
    host.catalog = lambda name: make_catalog(name, f"{name} service", tools[name])  # type: ignore[method-assign]
    host._statuses = lambda members: _versions(host, members)  # type: ignore[method-assign]
    host.get_statuses = _Method(host._statuses)
    return settings, tools, host


async def test_a_changed_catalog_is_served_on_its_previous_vectors_until_its_new_descriptions_are_embedded(
        tmp_path: Path) -> None:
    settings, tools, host = _two_backends()
    embedder = GatedEmbedder(slow="REVISED")
    published: list[tuple[dict[str, str], CatalogIndex]] = []
    directory = BackendDirectory(settings, ActorTable({n: BackendRef(host, n) for n in ("a", "b")}), None,
                                 CachedEmbedder(embedder, EmbeddingCache(tmp_path)),
                                 on_index=lambda cats, index: published.append(({c.backend: c.version for c in cats},
                                                                                 index)))
    await directory.wait_ready(timeout_s=1)
    first = published[-1][1]
    assert directory.provisional == 0

    # `a` rewrites its tool's description (not yet embedded: the model is busy), `b` adds a tool.
    tools["a"] = [Capability(backend="a", name="forecast", description="REVISED: weather forecast, hourly.")]
    tools["b"] = [*tools["b"], Capability(backend="b", name="round", description="Round a number.")]
    await directory.refresh_statuses(settle_s=0)
    assert directory._syncing is not None
    for _ in range(100):
        if directory.provisional:
            break
        await asyncio.sleep(0.01)
    versions, served = published[-1]
    assert versions == {"a": make_catalog("a", "a service", tools["a"]).version,
                        "b": make_catalog("b", "b service", tools["b"]).version}
    # a's tool and b's server document (its tool list grew) on their previous vectors; a's text still embedding
    assert directory.provisional == 2 and not directory._syncing.done()
    names = [c.name for c in served.texts.capabilities]
    assert names == ["forecast", "convert", "round"]  # b's new tool is served, embedded first
    old_row = [c.key for c in first.texts.capabilities].index("a/tool/forecast")
    np.testing.assert_array_equal(served.tools.vectors([0]), first.tools.vectors([old_row]))
    assert "REVISED" in served.texts.tool_sparse[0]  # BM25 reads the new description at once

    embedder.gate.set()
    await directory._syncing
    assert directory.provisional == 0
    # The full rebuild asked the model only for what was still missing: a's new text, b's server document.
    rebuilt = next(batch for batch in embedder.asked if served.texts.tool_dense[0] in batch)
    assert sorted(rebuilt) == sorted([served.texts.tool_dense[0], served.texts.server_dense[1]])
    final = published[-1][1]
    np.testing.assert_array_equal(final.tools.vectors([0])[0], embed_texts([final.texts.tool_dense[0]])[0])


class FailingEmbedder:
    """Embeds while `up`; raises as a model deployment that is restarting does."""

    model_id = "failing"

    def __init__(self) -> None:
        self.up = True

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not self.up:
            raise RuntimeError("the embedding deployment is restarting")
        return embed_texts(texts)


async def test_a_catalog_the_model_fails_to_embed_keeps_the_vectors_it_had_and_is_embedded_again(
        tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(directory_module, "_RETRY_S", 0.0)
    settings, tools, host = _two_backends()
    model = FailingEmbedder()
    published: list[CatalogIndex] = []
    directory = BackendDirectory(settings, ActorTable({n: BackendRef(host, n) for n in ("a", "b")}), None,
                                 CachedEmbedder(model, EmbeddingCache(tmp_path)),
                                 on_index=lambda cats, index: published.append(index))
    await directory.wait_ready(timeout_s=1)
    first = published[-1]

    model.up = False  # b gains a tool while the model is down
    tools["b"] = [*tools["b"], Capability(backend="b", name="round", description="Round a number.")]
    await directory.refresh_statuses(settle_s=0)
    assert directory._syncing is not None
    await directory._syncing
    served = published[-1]
    assert [c.name for c in served.texts.capabilities] == ["forecast", "convert", "round"]
    assert served.tools.dense and directory.dense_error is not None
    np.testing.assert_array_equal(served.tools.vectors([0, 1]), first.tools.vectors([0, 1]))  # kept
    assert not served.tools.vectors([2]).any()  # the new tool: found by its words until embedded
    assert directory.provisional == 2  # the new tool and b's server document

    model.up = True  # no catalog changes again: the poll embeds what the model failed
    await directory.refresh_statuses(settle_s=0)
    await directory._syncing
    final = published[-1]
    assert final is not served and directory.provisional == 0 and directory.dense_error is None
    np.testing.assert_array_equal(final.tools.vectors([2])[0], embed_texts([final.texts.tool_dense[2]])[0])


async def _versions(host: FakeHost, members: list[str]) -> dict[str, BackendStatus]:
    return {m: BackendStatus(name=m, kind="mcp_http", transport="streamable-http", health="ok",
                             catalog_version=host.catalog(m).version) for m in members}


async def test_a_new_index_is_served_at_once_and_its_tuned_fusion_weights_follow(
        tmp_path: Path, monkeypatch: Any) -> None:
    gate = _slow_tuning(monkeypatch, (0.9, 0.8))
    monkeypatch.setattr(directory_module, "_TUNED_BEFORE_READY", 1)  # a "large" catalog of two
    settings = RouterSettings.model_validate({"backends": [
        {"name": n, "kind": "mcp_http", "url": f"http://127.0.0.1:9/{n}/mcp"} for n in ("a", "b")]})
    host = FakeHost(["a", "b"])
    published: list[CatalogIndex] = []
    directory = BackendDirectory(settings, ActorTable({n: BackendRef(host, n) for n in ("a", "b")}), None,
                                 CachedEmbedder(GatedEmbedder(slow="\0"), EmbeddingCache(tmp_path)),
                                 on_index=lambda cats, index: published.append(index))

    def weights() -> list[tuple[float, float]]:
        return [(i.tools.alpha, i.servers.alpha) for i in published]

    await asyncio.wait_for(directory.wait_ready(timeout_s=1), 1)  # ready on the configured weight
    assert weights() == [(0.6, 0.6)]
    host.versions["a"] = 2  # a newer index before the tuning ends: that tuning is dropped
    await directory.sync_catalogs()
    served = len(published)
    assert served > 1 and set(weights()) == {(0.6, 0.6)}

    gate.set()
    await directory.tuned()
    assert len(published) == served + 1 and weights()[-1] == (0.9, 0.8)
    assert published[-1].texts is published[-2].texts  # the newest index, tuned: not the one it replaced
    assert published[-2].tools.alpha == 0.6  # a served index never changes under a search

    host.versions["b"] = 2  # the next rebuild starts from the tuned weights
    await directory.sync_catalogs()
    assert set(weights()[served + 1:]) == {(0.9, 0.8)}


async def test_a_small_catalog_is_tuned_before_the_replica_is_ready(tmp_path: Path, monkeypatch: Any) -> None:
    gate = _slow_tuning(monkeypatch, (0.9, 0.9))
    settings = RouterSettings.model_validate({"backends": [
        {"name": "a", "kind": "mcp_http", "url": "http://127.0.0.1:9/a/mcp"}]})
    published: list[CatalogIndex] = []
    directory = BackendDirectory(settings, ActorTable({"a": BackendRef(FakeHost(["a"]), "a")}), None,
                                 CachedEmbedder(GatedEmbedder(slow="\0"), EmbeddingCache(tmp_path)),
                                 on_index=lambda cats, index: published.append(index))
    ready = asyncio.ensure_future(directory.wait_ready(timeout_s=1))
    await asyncio.sleep(0.1)
    assert not ready.done() and len(published) == 1
    gate.set()
    await asyncio.wait_for(ready, 1)
    assert published[-1].tools.alpha == 0.9


def _slow_tuning(monkeypatch: Any, alphas: tuple[float, float]) -> asyncio.Event:
    """Tuning that ends at `alphas` once the returned gate opens (a large catalog's pseudo-queries embedding)."""
    gate = asyncio.Event()

    async def tune(index: CatalogIndex, embed: Any) -> tuple[float, float]:
        await gate.wait()
        index.tools.alpha, index.servers.alpha = alphas
        return alphas

    monkeypatch.setattr(CatalogIndex, "tune_alpha", tune)
    return gate


async def test_a_status_read_does_not_wait_on_a_backend_pool_that_never_answers(monkeypatch: Any) -> None:
    """A host that does not answer sends the directory to the pool for the backend's current actor; a pool with no
    live replica holds that call until one starts, and `/health` must not wait with it."""
    from actors import executor as executor_module

    monkeypatch.setattr(executor_module, "ACQUIRE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(directory_module, "_FRESH_WAIT_S", 0.2)

    class Silent(FakeHost):
        async def _statuses(self, members: list[str]) -> dict[str, BackendStatus]:
            raise TimeoutError("the host does not answer")

    async def never() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {}

    settings = RouterSettings.model_validate({"backends": [
        {"name": "a", "kind": "mcp_http", "url": "http://127.0.0.1:9/a/mcp"}]})
    table = ActorTable({"a": BackendRef(Silent(["a"]), "a")}, never)
    directory = BackendDirectory(settings, table, None, None, on_index=lambda cats, index: None)
    await asyncio.wait_for(directory.fresh_statuses(max_age_s=0), 1.0)  # the reader's wait is bounded
    assert not directory._refreshing.done() and directory.statuses()["a"].health == "down"  # and it reads it
    await asyncio.wait_for(directory._refreshing, 1.0)  # and so is the refresh: the pool was asked, in vain
    assert table.reacquired == 1 and directory.statuses()["a"].health == "down"
