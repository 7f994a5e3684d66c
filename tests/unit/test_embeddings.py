"""EmbeddingCache and CachedEmbedder only: the ONNX model is never loaded here."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from router.retrieval.embeddings import CachedEmbedder, EmbeddingCache, MicroBatcher, normalize
from tests.unit.helpers import embed_texts


class CountingEmbedder:
    model_id = "fake-bow"

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.append(list(texts))
        return embed_texts(texts)


def test_normalize_gives_unit_rows_and_leaves_zero_rows_at_zero() -> None:
    m = normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert m.dtype == np.float32
    np.testing.assert_allclose(m, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)


def test_cache_round_trips_vectors_per_model(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    v = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    cache.put_many("m1", {EmbeddingCache.key("hello"): v})
    found = cache.get_many("m1", ["hello", "other"])
    assert list(found) == [EmbeddingCache.key("hello")]
    np.testing.assert_array_equal(found[EmbeddingCache.key("hello")], v)
    assert cache.get_many("m2", ["hello"]) == {}


async def test_each_distinct_text_is_embedded_once(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, EmbeddingCache(tmp_path))
    first = await cached.embed(["alpha tool", "beta tool", "alpha tool"])
    assert inner.seen == [["alpha tool", "beta tool"]]
    assert cached.computed == 2
    second = await cached.embed(["beta tool", "gamma tool"])
    assert inner.seen[-1] == ["gamma tool"]
    assert cached.computed == 3
    np.testing.assert_allclose(first, embed_texts(["alpha tool", "beta tool", "alpha tool"]), rtol=1e-6)
    np.testing.assert_allclose(second, embed_texts(["beta tool", "gamma tool"]), rtol=1e-6)
    assert first.dtype == np.float32


async def test_vectors_survive_a_restart(tmp_path: Path) -> None:
    await CachedEmbedder(CountingEmbedder(), EmbeddingCache(tmp_path)).embed(["persisted text"])
    inner = CountingEmbedder()
    again = CachedEmbedder(inner, EmbeddingCache(tmp_path))
    out = await again.embed(["persisted text"])
    assert inner.seen == []
    assert again.computed == 0
    np.testing.assert_allclose(out, embed_texts(["persisted text"]), rtol=1e-6)


async def test_a_different_model_id_does_not_reuse_vectors(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    await CachedEmbedder(CountingEmbedder(), cache).embed(["shared text"])
    inner = CountingEmbedder()
    other = CachedEmbedder(inner, cache, model_id="another-model")
    await other.embed(["shared text"])
    assert inner.seen == [["shared text"]]


async def test_without_a_cache_every_call_reaches_the_model() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, None)
    await cached.embed(["a text"])
    await cached.embed(["a text"])
    assert len(inner.seen) == 2
    assert cached.computed == 2


async def test_an_empty_batch_embeds_nothing(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    out = await CachedEmbedder(inner, EmbeddingCache(tmp_path)).embed([])
    assert out.shape[0] == 0
    assert inner.seen == []


@pytest.mark.parametrize("n", [1, 501, 1200])
def test_cache_lookup_handles_many_keys(tmp_path: Path, n: int) -> None:
    cache = EmbeddingCache(tmp_path)
    texts = [f"text {i}" for i in range(n)]
    cache.put_many("m", {EmbeddingCache.key(t): np.full(2, i, dtype=np.float32) for i, t in enumerate(texts)})
    found = cache.get_many("m", texts)
    assert len(found) == n
    assert found[EmbeddingCache.key(texts[-1])].tolist() == [n - 1, n - 1]


class SlowModel:
    """Records the batches it is given; each takes a little while, like the real model in its thread."""

    model_id = "slow"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        await asyncio.sleep(0.02)
        return normalize(np.array([[float(len(t)), 1.0] for t in texts]))


async def test_a_lone_question_is_embedded_at_once_and_concurrent_ones_share_the_next_model_call() -> None:
    model = SlowModel()
    batcher = MicroBatcher(model, max_batch=64)
    first = await batcher.embed(["alone"])
    assert model.batches == [["alone"]] and first.shape == (1, 2)
    texts = [f"question {'x' * i}" for i in range(10)]
    running = asyncio.create_task(batcher.embed([texts[0]]))
    await asyncio.sleep(0.005)  # the model is busy with the first question
    vectors = [await running, *await asyncio.gather(*(batcher.embed([t]) for t in texts[1:]))]
    # The nine that arrived while the model ran went together in its next call.
    assert model.batches[1:] == [texts[:1], texts[1:]]
    for t, v in zip(texts, vectors, strict=True):
        assert np.allclose(v[0], normalize(np.array([[float(len(t)), 1.0]]))[0])


async def test_a_failing_model_fails_every_question_of_its_batch_and_the_next_batch_runs() -> None:
    class Broken(SlowModel):
        async def embed(self, texts: Sequence[str]) -> np.ndarray:
            if texts[0] == "boom":
                raise RuntimeError("model crashed")
            return await super().embed(texts)

    batcher = MicroBatcher(Broken())
    results = await asyncio.gather(batcher.embed(["boom"]), return_exceptions=True)
    assert isinstance(results[0], RuntimeError)
    assert (await batcher.embed(["fine"])).shape == (1, 2)


async def test_a_text_the_model_refuses_fails_only_its_own_question_of_a_shared_batch() -> None:
    class Picky(SlowModel):
        async def embed(self, texts: Sequence[str]) -> np.ndarray:
            if any(t.startswith("bad") for t in texts):
                raise TypeError("the tokenizer cannot read it")
            return await super().embed(texts)

    model = Picky()
    batcher = MicroBatcher(model)
    running = asyncio.create_task(batcher.embed(["first"]))
    await asyncio.sleep(0.005)  # the model is busy: the next three wait, then go together
    results = await asyncio.gather(*(batcher.embed([t]) for t in ("alice's", "bad one", "bob's")),
                                   return_exceptions=True)
    assert (await running).shape == (1, 2) and isinstance(results[1], TypeError)
    assert results[0].shape == (1, 2) and results[2].shape == (1, 2)  # type: ignore[union-attr]


async def test_an_unreachable_model_fails_a_shared_batch_at_once_not_text_by_text() -> None:
    class Down(SlowModel):
        async def embed(self, texts: Sequence[str]) -> np.ndarray:
            if self.batches:  # down after the first call
                self.batches.append(list(texts))
                raise ConnectionRefusedError("the embedding endpoint is down")
            return await super().embed(texts)

    model = Down()
    batcher = MicroBatcher(model)
    running = asyncio.create_task(batcher.embed(["first"]))
    await asyncio.sleep(0.005)
    results = await asyncio.gather(*(batcher.embed([t]) for t in ("a", "b", "c")), return_exceptions=True)
    assert (await running).shape == (1, 2) and all(isinstance(r, ConnectionRefusedError) for r in results)
    assert model.batches == [["first"], ["a", "b", "c"]]  # one call for the three, no retry of each


async def test_lists_of_texts_bypass_the_queue() -> None:
    model = SlowModel()
    out = await MicroBatcher(model).embed(["a", "bb", "ccc"])
    assert out.shape == (3, 2) and model.batches == [["a", "bb", "ccc"]]
