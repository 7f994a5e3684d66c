"""RagEngine: hybrid retrieval over the stored chunks, then an answer from them (LLM or extractive).

    engine = RagEngine(ChunkStore(".state/rag"), LocalMiniLM(), chunking=Chunking())
    await engine.ingest("examples/docs")
    result = await engine.query("How is the composite score computed?", k=5, filters={"doc_type": "md"})
    result["data"]["answer"], result["chunks"][0]["scores"]["hybrid"], result["retrieval"]["warnings"]

Retrieval is the router's own `HybridIndex`: dense top-N by cosine, BM25 over those candidates,
min-max normalisation and ``hybrid = alpha * dense_norm + (1 - alpha) * bm25_norm``. One index is
built per filter (key: the filter's canonical JSON) over only the chunks that filter admits, so a
tenant's filter can never rank, or leak, another tenant's chunks; the indexes are rebuilt after any
write to the store (its generation counter), from this process or another.

With an OpenAI-compatible LLM configured (`router.settings.LLMSettings`) the answer comes from a
prompt that allows only the numbered chunks as evidence; otherwise, or when the LLM call fails, the
answer is extractive: the sentences of the top chunks that share most terms with the question,
quoted verbatim with their chunk numbers, never rewritten.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcp_router.servers.knowledge_base.ingest import Chunking, IngestReport, index_text, ingest_folder, split_sentences
from mcp_router.servers.knowledge_base.store import Chunk, ChunkStore, canonical_filter, compile_filter
from router.retrieval.embeddings import Embedder
from router.retrieval.hybrid import HybridIndex
from router.retrieval.text import tokenize
from router.settings import LLMSettings

log = logging.getLogger("mcp_router.knowledge_base")
NO_EVIDENCE = "The documents do not contain an answer to this question."
EXTRACTIVE_LABEL = "Extractive answer (sentences quoted from the retrieved chunks, no language model):"
SYSTEM_PROMPT = (
    "You answer questions about a knowledge base using only the numbered chunks you are given. "
    "Cite every chunk you use as [n]. Do not use any other knowledge. If the chunks do not contain the "
    f"answer, reply exactly: {NO_EVIDENCE}"
)


class QueryError(ValueError):
    """A query the engine refuses (empty question, k or alpha out of range); the message says why."""


@dataclass(frozen=True, slots=True)
class EngineSettings:
    alpha: float = 0.5          # weight of the dense score in the fusion
    dense_top_n: int = 50       # dense candidates BM25 re-scores
    default_k: int = 5
    max_k: int = 20             # larger k is capped, with a warning
    answer_chunks: int = 3      # top chunks the extractive answer quotes from
    answer_sentences: int = 3
    cache_size: int = 64        # filters whose index is kept
    cache_chunks: int = 4       # ... holding at most this many times the collection's chunks


@dataclass(slots=True)
class _Slice:
    generation: int
    chunks: list[Chunk]
    index: HybridIndex


class RagEngine:
    def __init__(self, store: ChunkStore, embedder: Embedder, *, chunking: Chunking | None = None,
                 settings: EngineSettings | None = None, llm: LLMSettings | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.chunking = chunking or Chunking()
        self.settings = settings or EngineSettings()
        self.llm = llm if llm is not None and llm.configured else None
        self._client: Any = None
        self._slices: OrderedDict[str, _Slice] = OrderedDict()
        self._build_lock = asyncio.Lock()
        self.index_builds = 0

    async def ingest(self, folder: str | Path, *, batch_size: int = 16) -> IngestReport:
        report = await ingest_folder(folder, self.store, self.embedder, self.chunking, batch_size=batch_size)
        self._slices.clear()
        return report

    def health(self) -> dict[str, Any]:
        documents, chunks = self.store.count()
        return {"status": "ok" if chunks else "empty", "collection": self.store.collection,
                "documents": documents, "chunks": chunks, "embedding_model": self.embedder.model_id,
                "alpha": self.settings.alpha, "chunk_size": self.chunking.size,
                "chunk_overlap": self.chunking.overlap}

    def validate(self, question: Any, k: Any, alpha: Any, filters: Any) -> tuple[str, int, float, list[str]]:
        """Checked and defaulted arguments plus warnings; raises `QueryError` or `FilterError`."""
        if not isinstance(question, str) or not question.strip():
            raise QueryError("question must be a non-empty string")
        if len(question) > 4000:
            raise QueryError(f"question is {len(question)} characters long; the limit is 4000")
        warnings = []
        k = self.settings.default_k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
            raise QueryError(f"k must be an integer from 1 to 100, got {k!r}")
        if k > self.settings.max_k:
            warnings.append(f"k capped at {self.settings.max_k} (asked for {k})")
            k = self.settings.max_k
        alpha = self.settings.alpha if alpha is None else alpha
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not (
                math.isfinite(alpha) and 0 <= alpha <= 1):
            raise QueryError(f"alpha must be a number from 0 (BM25 only) to 1 (dense only), got {alpha!r}")
        compile_filter(filters)  # raises FilterError with the offending path
        return question.strip(), k, float(alpha), warnings

    async def search(self, question: str, k: int, alpha: float, filters: dict[str, Any] | None,
                     warnings: list[str]) -> list[dict[str, Any]]:
        piece = await self._slice(filters)
        if not piece.chunks:
            if self.store.count()[1] == 0:
                warnings.append("the knowledge base is empty: nothing has been ingested")
            else:
                warnings.append(f"no chunk matched the filter {canonical_filter(filters)}")
            return []
        vector = (await self.embedder.embed([question]))[0]
        hits = piece.index.search(question, np.asarray(vector, dtype=np.float32), k, alpha=alpha)
        return [{"id": piece.chunks[h.doc].id, "rank": rank, "source": piece.chunks[h.doc].source,
                 "preview": _preview(piece.chunks[h.doc].text), "text": piece.chunks[h.doc].text,
                 "scores": {"dense": round(h.dense, 6), "bm25": round(h.bm25, 6),
                            "dense_norm": round(h.dense_norm, 6), "bm25_norm": round(h.bm25_norm, 6),
                            "hybrid": round(h.hybrid, 6)}}
                for rank, h in enumerate(hits, 1)]

    async def query(self, question: str, *, k: int | None = None, alpha: float | None = None,
                    filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """The tool's result: answer, ranked chunks with every score, ids used, retrieval settings."""
        question, k, alpha, warnings = self.validate(question, k, alpha, filters)
        chunks = await self.search(question, k, alpha, filters, warnings)
        mode, answer, used = "extractive", NO_EVIDENCE, []
        if chunks and self.llm is not None:
            try:
                mode, answer, used = "llm", *await self._llm_answer(question, chunks)
            except Exception as exc:  # any LLM failure falls back to the extractive answer
                # The details (a provider's message may name its URL or part of a key) go to the server's log.
                log.warning("LLM call failed, answered extractively: %s: %s", type(exc).__name__, exc)
                warnings.append(f"LLM call failed ({type(exc).__name__}); answered extractively")
                mode = "extractive"
        if mode == "extractive" and chunks:
            answer, used = extractive_answer(question, chunks, self.settings.answer_chunks,
                                             self.settings.answer_sentences)
            if not used:
                warnings.append("no sentence of the top chunks shares a term with the question")
        return {"data": {"question": question, "answer": answer, "answer_mode": mode}, "chunks": chunks,
                "used_chunk_ids": used,
                "retrieval": {"k": k, "alpha": alpha, "filters": filters or {}, "warnings": warnings}}

    async def _slice(self, filters: dict[str, Any] | None) -> _Slice:
        key = canonical_filter(filters)
        generation = self.store.generation()
        cached = self._slices.get(key)
        if cached is not None and cached.generation == generation:
            self._slices.move_to_end(key)
            return cached
        async with self._build_lock:
            cached = self._slices.get(key)
            if cached is None or cached.generation != generation:
                cached = await asyncio.to_thread(self._build, filters, generation, dict(self._slices))
                self._slices[key] = cached
                self._slices.move_to_end(key)  # rebuilt after a write: just used, not the oldest
                self._evict()
        return cached

    def _evict(self) -> None:
        """Least recently used filters' indexes out, until at most `cache_size` are kept and they hold at most
        `cache_chunks` times the collection's chunks (a caller's every new filter builds an index of its own).
        The unfiltered index stays: every query without a filter needs it."""
        unfiltered = canonical_filter(None)
        limit = self.settings.cache_chunks * max(1, self.store.count()[1])
        while len(self._slices) > 1 and (len(self._slices) > self.settings.cache_size or
                                         sum(len(s.chunks) for s in self._slices.values()) > limit):
            oldest = next(k for k in self._slices if k != unfiltered)
            del self._slices[oldest]

    def _build(self, filters: dict[str, Any] | None, generation: int, kept: dict[str, _Slice]) -> _Slice:
        """The filter's index: one already kept that admits exactly the same chunks (a filter written another
        way, or one admitting every chunk), else a new one. Reading the rows is cheap; indexing them is not, and
        a caller could otherwise make every request a new filter that admits everything."""
        chunks, matrix = self.store.load(filters)
        ids = [c.id for c in chunks]
        same = next((s for s in kept.values() if s.generation == generation and [c.id for c in s.chunks] == ids),
                    None)
        if same is not None:
            return same
        self.index_builds += 1
        index = HybridIndex([index_text(c) for c in chunks], matrix if chunks else None,
                            alpha=self.settings.alpha, dense_top_n=self.settings.dense_top_n)
        return _Slice(generation, chunks, index)

    async def _llm_answer(self, question: str, chunks: list[dict[str, Any]]) -> tuple[str, list[str]]:
        assert self.llm is not None
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(base_url=self.llm.base_url,
                                       api_key=self.llm.resolved_api_key() or "unused",
                                       timeout=self.llm.timeout_s, max_retries=self.llm.max_retries)
        context = "\n\n".join(f"[{c['rank']}] ({c['source']})\n{c['text']}" for c in chunks)
        resp = await self._client.chat.completions.create(
            model=self.llm.model, temperature=0,
            messages=[{"role": "system", "content": SYSTEM_PROMPT},
                      {"role": "user", "content": f"Chunks:\n\n{context}\n\nQuestion: {question}"}])
        answer = (resp.choices[0].message.content or "").strip() or NO_EVIDENCE
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
        used = [c["id"] for c in chunks if c["rank"] in cited]
        if not used and NO_EVIDENCE not in answer:
            used = [c["id"] for c in chunks]
        return answer, used


def extractive_answer(question: str, chunks: list[dict[str, Any]], top_chunks: int = 3,
                      max_sentences: int = 3) -> tuple[str, list[str]]:
    """The best sentences of the top chunks by overlap with the question's terms, quoted verbatim."""
    terms = set(tokenize(question))
    scored = []
    for chunk in chunks[:top_chunks]:
        for pos, sentence in enumerate(split_sentences(chunk["text"])):
            overlap = len(terms & set(tokenize(sentence)))
            if overlap:
                scored.append((-overlap, chunk["rank"], pos, sentence, chunk["id"]))
    if not scored:
        return NO_EVIDENCE, []
    scored.sort()
    need = (-scored[0][0] + 2) // 2  # more than half the best sentence's overlap (1 when the best has 1)
    picked: list[tuple[int, int, int, str, str]] = []
    seen: set[str] = set()
    for item in scored:  # overlapping chunks repeat sentences: quote each once
        if -item[0] >= need and item[3] not in seen and len(picked) < max_sentences:
            picked.append(item)
            seen.add(item[3])
    lines = [f"- {sentence} [{rank}]" for _, rank, _, sentence, _ in picked]
    used = list(dict.fromkeys(cid for *_, cid in picked))
    return "\n".join([EXTRACTIVE_LABEL, *lines]), used


def _preview(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1].rsplit(" ", 1)[0] + "…"
