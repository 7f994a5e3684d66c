"""The embedding model as its own Serve deployment, so router replicas do not each load it.

Single texts (queries) are batched across concurrent requests with `@serve.batch`; whole lists
(catalog documents) go straight to the model in its own batches. A query that arrives while none is
being embedded goes at once; only while others are in flight does the next batch wait up to
`max_batch_wait_s` to fill. (Serve forms a batch before it may run, so a wait of 0 would send
queries one by one under load; a fixed wait would delay every lone query by the whole wait.) A batch
holds several callers' questions: when it fails, each is embedded alone, so a text the model cannot
embed fails only its own question.
"""

from __future__ import annotations

import numpy as np
from ray import serve

from router.retrieval.embeddings import build_embedder, outage
from router.settings import EmbeddingSettings


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256)
class Embedder:
    def __init__(self, settings: EmbeddingSettings) -> None:
        self._model = build_embedder(settings)
        self._batch_size = settings.batch_size
        self._max_wait_s = settings.max_batch_wait_s
        self._inflight = 0
        self.batch_sizes: list[int] = []  # the last batches' sizes, for tests and debugging
        self._batched.set_max_batch_size(settings.batch_size)  # type: ignore[attr-defined]

    async def embed_one(self, text: str) -> np.ndarray:
        # Read by Serve when the next batch starts forming, on this same event loop.
        self._batched.set_batch_wait_timeout_s(self._max_wait_s if self._inflight else 0.0)  # type: ignore[attr-defined]
        self._inflight += 1
        try:
            vector = await self._batched(text)
        finally:
            self._inflight -= 1
        if isinstance(vector, Exception):
            raise vector
        return vector

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.0)
    async def _batched(self, texts: list[str]) -> list[np.ndarray | Exception]:
        self.batch_sizes = [*self.batch_sizes[-99:], len(texts)]
        try:
            return list(await self._model.embed(texts))
        except Exception as exc:
            if len(texts) == 1 or outage(exc):  # an outage fails every text alike, at once
                raise
        return [await self._alone(text) for text in texts]

    async def _alone(self, text: str) -> np.ndarray | Exception:
        """One text's vector, or the failure only its own question sees."""
        try:
            return (await self._model.embed([text]))[0]
        except Exception as exc:
            return exc

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._model.embed(texts)

    async def model_id(self) -> str:
        return self._model.model_id
