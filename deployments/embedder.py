"""The embedding model as its own Serve deployment, so router replicas do not each load it.

Single texts (queries) are batched across concurrent requests with `@serve.batch`; whole lists
(catalog documents) go straight to the model in its own batches.
"""

from __future__ import annotations

import numpy as np
from ray import serve

from router.config import EmbeddingSettings
from router.embeddings import build_embedder


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256)
class Embedder:
    def __init__(self, settings: EmbeddingSettings) -> None:
        self._model = build_embedder(settings)
        self._batch_size = settings.batch_size
        self.embed_one.set_max_batch_size(settings.batch_size)  # type: ignore[attr-defined]
        self.embed_one.set_batch_wait_timeout_s(settings.max_batch_wait_s)  # type: ignore[attr-defined]

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.005)
    async def embed_one(self, texts: list[str]) -> list[np.ndarray]:
        vectors = await self._model.embed(texts)
        return list(vectors)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._model.embed(texts)

    async def model_id(self) -> str:
        return self._model.model_id
