"""Embedders: the local all-MiniLM-L6-v2 models (ONNX, offline) and any OpenAI-compatible endpoint.

    embedder = build_embedder(settings.embeddings)          # LocalMiniLM or OpenAIEmbedder
    tuned = LocalMiniLM(model="all-MiniLM-L6-v2-tool-retrieval")  # the default: trained for tool retrieval
    base = LocalMiniLM()                                    # the untrained model (the RAG server's)
    cached = CachedEmbedder(embedder, EmbeddingCache(dir))  # vectors survive restarts
    vectors = await cached.embed(["get current time in a timezone", ...])   # (n, dim), L2-normalised

Every local model is an ONNX file with int8 weights and the model's `tokenizer.json`, both shipped in
`models/<name>/` (the base model and its fine-tunes, exported the same way by
`benchmarks/train_retriever.py`); nothing touches the network. onnxruntime instead of
sentence-transformers + torch: a tenth of the install size and a fraction of the per-query latency
(docs/design.md, "Embeddings"). `embeddings.model` chooses one by name; each has its own model id
(from its weights), so cached vectors never mix.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import platform
import re
import sqlite3
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from router.errors import ConfigError
from router.settings import EmbeddingSettings

BASE_MODEL = "all-MiniLM-L6-v2"
# Models up to this size run inside each router replica; larger ones in their own deployment.
REPLICA_MODEL_MAX_BYTES = 200 * 2**20
_MAX_TOKENS = 256
_PARALLEL_FROM = 32  # texts in one call from which they are a catalog (batched by length, in threads)
# Tokens in one run of a catalog's texts: a question waiting for a slot waits for at most about this many
# (~0.2 ms each on one core), while a catalog of short descriptions still runs two dozen at a time.
_RUN_TOKENS = 512
# From this many tokens a text runs in float where `compute` allows it. Below it the matrix products are bound
# by reading the weights, a quarter the size in int8: on an AVX-512 Xeon without VNNI, an 8-token text took
# 8-12 ms in int8 against 10-15 ms in float, a 32-token one 21-28 ms against 11-20 ms (the two cross at 12-16).
FLOAT_FROM_TOKENS = 16


class Embedder(Protocol):
    model_id: str

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""
        ...


def normalize(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.maximum(norms, 1e-12)


Compute = Literal["auto", "int8", "float"]


def int8_is_fast(machine: str | None = None, cpuinfo: str | None = None) -> bool:
    """Whether this processor multiplies int8 faster than float32. An x86 processor with int8 dot products
    (AVX-512 VNNI, AVX-VNNI, AMX) embeds a short question in about 2 ms in int8; one without them (an
    AVX-512 Xeon without VNNI, measured) takes 17 ms in int8 for a 32-token question and 11 ms in float.
    Other processors (ARM's dot-product instructions) keep int8, the file's own form."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i386", "i686"):
        return True
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:  # not Linux: keep the file's form
            return True
    found = re.search(r"^flags\s*:(.*)$", cpuinfo, re.MULTILINE)
    return bool(found and set(found.group(1).split()) & {"avx512_vnni", "avx_vnni", "amx_int8"})


class LocalMiniLM:
    """all-MiniLM-L6-v2 (or a shipped fine-tune of it) on onnxruntime: mean pooling over the tokens,
    then L2 normalisation.

    `compute` is how the int8 weights are multiplied: `int8` (onnxruntime fuses each dequantisation with its
    matrix product, activations quantised row by row); `float`, which also loads the weights folded into
    float32 (about 65 MB more resident) and runs texts of `FLOAT_FROM_TOKENS` or more through them (vectors
    within cosine 0.9996 of int8's; shorter texts stay in int8); or `auto`, `float` where `int8_is_fast`
    says the processor lacks int8 dot products. A text's length alone says which it takes, so its vector
    still never depends on what is embedded beside it."""

    def __init__(self, threads: int = 1, model: str = BASE_MODEL, parallel: int = 1,
                 compute: Compute = "auto") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - installation problem
            raise ConfigError(f"the local embedding model needs onnxruntime and tokenizers: {exc}") from exc
        onnx_file, tokenizer_file = _model_files(model)
        # The id follows the weights and how texts are run, so a retrained model under the same name
        # never reuses old vectors, nor this one the vectors of padded batches.
        self.compute = compute if compute != "auto" else "int8" if int8_is_fast() else "float"
        digest = hashlib.blake2b(onnx_file.read_bytes() + b"one text per run", digest_size=6).hexdigest()
        self.model_id = f"{model}-onnx-{digest}" + (f"-float{FLOAT_FROM_TOKENS}" if self.compute == "float" else "")
        self.model = model
        self._tok = Tokenizer.from_file(str(tokenizer_file))
        self._tok.enable_truncation(max_length=_MAX_TOKENS)
        self._tok.no_padding()  # the file pads to 128 tokens; texts run unpadded
        opts = ort.SessionOptions()
        # One intra-op thread: on a small machine a second thread fights the neighbours (FACTS).
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
        self._float_session = self._session
        if self.compute == "float":  # each weight's DequantizeLinear folded at load instead of fused
            opts.add_session_config_entry("session.disable_quant_qdq", "1")
            self._float_session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
        # A catalog's runs go `parallel` at a time, each in its own thread (onnxruntime runs a session from
        # several threads), and a question waits for at most one run of a catalog being embedded.
        self._parallel = parallel
        self._slots = threading.BoundedSemaphore(parallel)
        self.dim = 384

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Synchronous CPU work; `embed` runs it off the event loop.

        A text's vector never depends on what else is embedded with it, so a question gets the same
        decision however many others arrive with it. Padding would break that (and on CPU it costs more
        than batching saves: one thread, 527 tool documents in 4.2 s alone against 26 s in padded batches
        of 64), so questions run alone, and a catalog runs in batches of texts of one token length, which
        need no padding and give the vectors each text gets alone, about a quarter faster."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encodings = self._tok.encode_batch([t if t.strip() else "." for t in texts])

        def run(rows: list[int]) -> None:
            ids = np.array([encodings[row].ids for row in rows], dtype=np.int64)
            session = self._float_session if ids.shape[1] >= FLOAT_FROM_TOKENS else self._session
            with self._slots:  # per run, so that questions interleave with a long catalog
                hidden = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                            "token_type_ids": np.zeros_like(ids)})[0]
            out[rows] = hidden.mean(axis=1)

        if len(texts) < _PARALLEL_FROM:
            for row in range(len(texts)):
                run([row])
            return normalize(out)
        by_length: dict[int, list[int]] = {}
        for row, encoding in enumerate(encodings):
            by_length.setdefault(len(encoding.ids), []).append(row)
        runs = [rows[k:k + max(1, _RUN_TOKENS // length)]
                for length, rows in by_length.items() for k in range(0, len(rows), max(1, _RUN_TOKENS // length))]
        with ThreadPoolExecutor(self._parallel) as pool:
            list(pool.map(run, runs))
        return normalize(out)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.encode, list(texts))


def placement(settings: EmbeddingSettings) -> str:
    """`replica` or `deployment`: the configured one, else by model size (remote endpoints: replica)."""
    if settings.placement is not None:
        return settings.placement
    if settings.provider != "local":
        return "replica"
    onnx_file = _model_files(settings.model)[0]
    return "replica" if onnx_file.stat().st_size <= REPLICA_MODEL_MAX_BYTES else "deployment"


def _model_files(name: str) -> tuple[Path, Path]:
    """(ONNX file, tokenizer file) of a model shipped in models/."""
    from mcp_router.models import model_dir

    try:
        folder = model_dir(name)
    except FileNotFoundError as exc:
        raise ConfigError(f"embeddings.model: {exc}") from exc
    files = folder / "model.onnx", folder / "tokenizer.json"
    for f in files:
        if not f.is_file():
            raise ConfigError(f"embeddings.model {name!r}: {f.name} missing in {folder}")
    return files


class OpenAIEmbedder:
    """Any OpenAI-compatible /v1/embeddings endpoint (OpenAI, vLLM, Ollama, TEI)."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        from openai import AsyncOpenAI

        api_key = os.environ.get(settings.api_key_env) or "unused"
        self._client = AsyncOpenAI(base_url=settings.base_url, api_key=api_key, timeout=settings.timeout_s,
                                   max_retries=2)
        self._model = settings.model
        self._batch = settings.batch_size
        self.model_id = f"openai:{settings.base_url or 'default'}:{settings.model}"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start:start + self._batch])
            resp = await self._client.embeddings.create(model=self._model, input=chunk)
            rows.extend(item.embedding for item in sorted(resp.data, key=lambda d: d.index))
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        return normalize(np.array(rows, dtype=np.float32))


class MicroBatcher:
    """Concurrent questions share embedding calls: while one call runs (in a thread), the questions
    that arrive queue up, and all of them go in the next call (one request to an endpoint; one hop to
    the local model's thread, which runs each text alone). A lone question goes at once; lists of
    texts (catalogs) bypass the queue."""

    def __init__(self, inner: Embedder, max_batch: int = 64) -> None:
        self._inner = inner
        self._max = max_batch
        self.model_id = inner.model_id
        self._queue: list[tuple[str, asyncio.Future[np.ndarray]]] = []
        self._worker: asyncio.Task[None] | None = None
        self.batch_sizes: list[int] = []  # the last batches' sizes, for tests and benchmarks

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) != 1:
            return await self._inner.embed(texts)
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._queue.append((texts[0], future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return np.asarray([await future])

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[: self._max], self._queue[self._max:]
            batch = [(t, f) for t, f in batch if not f.cancelled()]
            if not batch:
                continue
            self.batch_sizes = [*self.batch_sizes[-99:], len(batch)]
            try:
                vectors = await self._inner.embed([t for t, _ in batch])
            except Exception as exc:
                if len(batch) > 1 and not outage(exc):  # several callers' questions: one's text fails only its own
                    await self._one_by_one(batch)
                    continue
                for _, f in batch:  # an outage fails every text alike: each sees it at once
                    _settle(f, exc)
                continue
            for (_, f), v in zip(batch, vectors, strict=True):
                _settle(f, v)

    async def _one_by_one(self, batch: list[tuple[str, asyncio.Future[np.ndarray]]]) -> None:
        for text, future in batch:
            try:
                _settle(future, (await self._inner.embed([text]))[0])
            except Exception as exc:  # this question sees the model's failure on its own text
                _settle(future, exc)


def outage(exc: BaseException) -> bool:
    """A failure of the model or its endpoint as a whole (unreachable, timed out, overloaded), not of one text:
    each text of a batch alone would only fail again, one after another, while every other question waits."""
    status = getattr(exc, "status_code", None)
    overloaded = isinstance(status, int) and (status in (408, 429) or status >= 500)
    return (isinstance(exc, OSError | TimeoutError) or overloaded
            or any(cls.__name__ == "APIConnectionError" for cls in type(exc).__mro__))  # openai's, timeouts too


def _settle(future: asyncio.Future[np.ndarray], outcome: np.ndarray | Exception) -> None:
    """A waiting question's vector, or the failure it sees (nothing for a question whose caller left)."""
    if future.done():
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def build_embedder(settings: EmbeddingSettings) -> Embedder:
    if settings.provider == "openai":
        return OpenAIEmbedder(settings)
    return LocalMiniLM(threads=settings.threads, model=settings.model, parallel=settings.parallel,
                       compute=settings.compute)


class EmbeddingCache:
    """Vectors on disk keyed by model id and text hash (SQLite: safe across processes)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        path = Path(directory).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path / "embeddings.sqlite3", check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, vec BLOB, "
                         "PRIMARY KEY (model, hash))")
        self._lock = threading.Lock()

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get_many(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        keys = list({self.key(t) for t in texts})
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start:start + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT hash, vec FROM vectors WHERE model = ? AND hash IN ({marks})",
                    [model, *part]).fetchall()
                for h, blob in rows:
                    found[h] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                                 [(model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()])


class CachedEmbedder:
    """Wraps an embedder so each distinct text is embedded once per model, across restarts."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None, model_id: str | None = None) -> None:
        self._inner = inner
        self._cache = cache
        self.model_id = model_id or inner.model_id
        self.computed = 0  # texts embedded by the model (not served from the cache)

    def cached(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Each text's vector if the cache has it (nothing is embedded)."""
        known = self._cache.get_many(self.model_id, texts) if self._cache is not None else {}
        return [known.get(EmbeddingCache.key(t)) for t in texts]

    async def embed(self, texts: Sequence[str], found: list[np.ndarray | None] | None = None) -> np.ndarray:
        """`found`: what `cached` already gave of these texts, when the caller has read it (not read again)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if self._cache is None:
            self.computed += len(texts)
            return await self._inner.embed(texts)
        # Reading and writing tens of thousands of rows takes a good part of a second: off the event loop,
        # which keeps answering questions while a catalog is indexed.
        if found is None:
            found = await asyncio.to_thread(self.cached, texts)
        missing = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
        new: dict[str, np.ndarray] = {}
        if missing:
            fresh = await self._inner.embed(missing)
            self.computed += len(missing)
            new = {t: fresh[i] for i, t in enumerate(missing)}
            await asyncio.to_thread(self._cache.put_many, self.model_id,
                                    {EmbeddingCache.key(t): v for t, v in new.items()})
        return np.stack([new[t] if v is None else v for t, v in zip(texts, found, strict=True)]).astype(np.float32)
