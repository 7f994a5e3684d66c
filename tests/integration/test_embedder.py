"""The Embedder's batching: a lone query is embedded at once, and queries that arrive while another
is being embedded wait to travel together as one batch."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from ray import serve

from deployments.embedder import Embedder
from router.settings import EmbeddingSettings


class SlowModel:
    model_id = "slow"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        await asyncio.sleep(0.3)
        return np.ones((len(texts), 4), dtype=np.float32) / 2


class PickyModel(SlowModel):
    """Fails every run that holds the text "poison"."""

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if "poison" in texts:
            raise ValueError("cannot embed 'poison'")
        return await super().embed(texts)


@serve.deployment(ray_actor_options={"num_cpus": 0})
class ScriptedEmbedder(Embedder.func_or_class):  # type: ignore[misc,name-defined]
    """The real Embedder with a slow model, driving its own arrivals so that their timing is exact."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        super().__init__(settings)
        self._model = SlowModel()

    async def scenario(self) -> tuple[list[int], list[int], int]:
        await self.embed_one("alone")
        lone = list(self.batch_sizes)
        first = asyncio.create_task(self.embed_one("first"))
        await asyncio.sleep(0.05)  # `first` is being embedded; the next five arrive 10 ms apart
        later = []
        for i in range(5):
            later.append(asyncio.create_task(self.embed_one(f"later {i}")))
            await asyncio.sleep(0.01)
        vectors = await asyncio.gather(first, *later)
        return lone, list(self.batch_sizes), len(vectors)

    async def poisoned_batch(self) -> tuple[list[int], list[str]]:
        """Four questions batched behind a first, one of them a text the model fails on."""
        self._model = PickyModel()
        first = asyncio.create_task(self.embed_one("first"))
        await asyncio.sleep(0.05)
        later = [asyncio.create_task(self.embed_one(t)) for t in ("a", "poison", "b", "c")]
        outcomes = await asyncio.gather(first, *later, return_exceptions=True)
        return list(self.batch_sizes), [repr(o) if isinstance(o, Exception) else "vector" for o in outcomes]


def test_a_lone_query_goes_at_once_and_later_arrivals_are_gathered(ray_local: Any) -> None:
    handle = serve.run(ScriptedEmbedder.bind(EmbeddingSettings(max_batch_wait_s=0.2)), name="embedder-test",
                       route_prefix=None)
    try:
        lone, sizes, answered = handle.scenario.remote().result(timeout_s=60)
    finally:
        serve.delete("embedder-test")
    assert lone == [1]
    # With no wait, the first of the five would have left alone and the other four after it.
    assert sizes == [1, 1, 5] and answered == 6


def test_a_text_the_model_fails_on_fails_only_its_own_question(ray_local: Any) -> None:
    handle = serve.run(ScriptedEmbedder.bind(EmbeddingSettings(max_batch_wait_s=0.2)), name="embedder-test",
                       route_prefix=None)
    try:
        sizes, outcomes = handle.poisoned_batch.remote().result(timeout_s=60)
    finally:
        serve.delete("embedder-test")
    assert sizes[-2:] == [1, 4]  # the four did travel together
    assert outcomes == ["vector", "vector", "ValueError(\"cannot embed 'poison'\")", "vector", "vector"]
