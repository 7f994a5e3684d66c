"""ChunkStore: an embedded, persistent vector store on SQLite (stdlib) and numpy.

    store = ChunkStore(".state/rag", collection="knowledge-base")
    store.replace_document("faq.md", content_hash, fingerprint, chunks, vectors)   # atomic per document
    store.document_hashes()                       # {"faq.md": ("3f2a...", "model|800|120|chars"), ...}
    chunks, matrix = store.load({"doc_type": {"$in": ["md", "jsonl"]}})
    best = store.query(question_vector, n=5, where={"topic": "routing"})

One file (``<path>/rag.sqlite3``, WAL mode, safe to read from several processes) holds the chunks
(id, document source, text, metadata as JSON, float32 vector) and, per document, the content hash
and ingest fingerprint, so re-ingesting an unchanged file does nothing. Search is exact cosine over
the filtered rows; filters (a subset of Chroma's ``where``) are translated to SQL over the metadata
JSON, so only the matching rows are read. A generation counter, bumped by every write, lets readers
in other processes notice changes. Why not Chroma: see README, "RAG knowledge-base server".
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DB_NAME = "rag.sqlite3"
_SCALARS = (str, int, float, bool)
MAX_FILTER_PARAMS = 1000  # values and field paths a filter's SQL binds
MAX_FILTER_DEPTH = 20
_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_OPERATORS = ("$eq", "$ne", "$in", "$nin", *_COMPARE)
_DELETE_CHUNKS = "DELETE FROM chunks WHERE collection = ? AND source = ?"
_NUMBER = "json_type(metadata, ?) IN ('integer', 'real')"


class FilterError(ValueError):
    """A `where` filter that is not in the supported subset; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Chunk:
    id: str
    source: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def canonical_filter(where: dict[str, Any] | None) -> str:
    """The cache key of a filter: canonical JSON (sorted keys, no spaces); ``{}`` for no filter."""
    return json.dumps(where or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compile_filter(where: dict[str, Any] | None) -> tuple[str, list[Any]]:
    """SQL condition on the ``metadata`` column and its parameters; raises `FilterError` when invalid."""
    if where is None or where == {}:
        return "1", []
    if not isinstance(where, dict):
        raise FilterError(f"filters must be an object, got {type(where).__name__}")
    params: list[Any] = []
    condition = _clause(where, params, "filters")
    if len(params) > MAX_FILTER_PARAMS:  # SQLite refuses an expression tree much larger than this
        raise FilterError(f"filters: {len(params)} terms; the limit is {MAX_FILTER_PARAMS}")
    return condition, params


def _clause(node: Any, params: list[Any], at: str, depth: int = 0) -> str:
    if not isinstance(node, dict) or not node:
        raise FilterError(f"{at}: expected a non-empty object")
    if depth >= MAX_FILTER_DEPTH:  # SQLite's parser stack overflows somewhat deeper
        raise FilterError(f"{at}: $and and $or are nested deeper than {MAX_FILTER_DEPTH} levels")
    parts = []
    for key, value in node.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise FilterError(f"{at}.{key}: expected a non-empty list of filters")
            inner = [_clause(v, params, f"{at}.{key}[{i}]", depth + 1) for i, v in enumerate(value)]
            parts.append("(" + f" {key[1:].upper()} ".join(inner) + ")")
        elif key.startswith("$"):
            raise FilterError(f"{at}: unknown operator {key!r} at field level; use $and or $or, "
                              f"or put it under a field name")
        else:
            parts.append(_field(key, value, params, f"{at}.{key}"))
    return parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")"


def _field(name: str, cond: Any, params: list[Any], at: str) -> str:
    # Quotes and backslashes would end the JSON path's quoting; SQLite ends the path at a control character.
    if not isinstance(name, str) or not name or '"' in name or "\\" in name or not name.isprintable():
        raise FilterError(f"{at}: invalid field name {name!r}")
    path = f'$."{name}"'
    if not isinstance(cond, dict):
        cond = {"$eq": cond}
    if len(cond) != 1:
        raise FilterError(f"{at}: one operator per field, got {', '.join(map(str, cond)) or 'none'}; "
                          f"combine several with $and")
    ((op, value),) = cond.items()
    args: list[Any]
    if op not in _OPERATORS:
        raise FilterError(f"{at}: unknown operator {op!r}; supported: {', '.join(_OPERATORS)}")
    if op in ("$eq", "$ne"):
        _scalar(value, f"{at}.{op}")
        if isinstance(value, bool):  # JSON true/false, not the numbers 1 and 0
            test, args = "json_type(metadata, ?) = ?", [path, "true" if value else "false"]
        elif isinstance(value, str):
            test, args = "json_extract(metadata, ?) = ?", [path, value]
        else:
            test, args = f"({_NUMBER} AND json_extract(metadata, ?) = ?)", [path, path, value]
    elif op in ("$in", "$nin"):
        if not isinstance(value, list) or not value:
            raise FilterError(f"{at}.{op}: expected a non-empty list of values")
        for i, v in enumerate(value):
            _scalar(v, f"{at}.{op}[{i}]")
            if isinstance(v, bool):
                raise FilterError(f"{at}.{op}[{i}]: booleans are not supported in {op}; use $eq")
        test = (f"(json_type(metadata, ?) NOT IN ('true', 'false') AND json_extract(metadata, ?) IN "
                f"({','.join('?' * len(value))}))")
        args = [path, path, *value]
    else:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FilterError(f"{at}.{op}: expected a number, got {value!r}")
        _scalar(value, f"{at}.{op}")
        test, args = f"({_NUMBER} AND json_extract(metadata, ?) {_COMPARE[op]} ?)", [path, path, value]
    if op in ("$ne", "$nin"):  # like Chroma: only chunks that have the field can match
        params.extend([path, *args])
        return f"(json_type(metadata, ?) IS NOT NULL AND NOT {test})"
    params.extend(args)
    return test


def _scalar(value: Any, at: str) -> None:
    if not isinstance(value, _SCALARS):
        raise FilterError(f"{at}: expected a string, number or boolean, got {type(value).__name__}")
    if isinstance(value, int) and not isinstance(value, bool) and not -2 ** 63 <= value < 2 ** 63:
        raise FilterError(f"{at}: {value} is beyond a 64-bit integer")
    if isinstance(value, float) and not math.isfinite(value):
        raise FilterError(f"{at}: expected a finite number, got {value!r}")


class ChunkStore:
    """Chunks, vectors and document hashes of one collection in a SQLite file under `path`."""

    def __init__(self, path: str | Path, collection: str = "knowledge-base") -> None:
        directory = Path(path).expanduser()
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / DB_NAME
        self.collection = collection
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript("""
                CREATE TABLE IF NOT EXISTS documents (collection TEXT, source TEXT, hash TEXT,
                    fingerprint TEXT, chunks INTEGER, PRIMARY KEY (collection, source));
                CREATE TABLE IF NOT EXISTS chunks (collection TEXT, id TEXT, source TEXT, ord INTEGER,
                    text TEXT, metadata TEXT, vector BLOB, PRIMARY KEY (collection, id));
                CREATE INDEX IF NOT EXISTS chunks_by_source ON chunks (collection, source);
                CREATE TABLE IF NOT EXISTS generations (collection TEXT PRIMARY KEY, value INTEGER);
            """)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- documents -------------------------------------------------------------------------------

    def document_hashes(self) -> dict[str, tuple[str, str]]:
        """Source -> (content hash, ingest fingerprint) of every stored document."""
        rows = self._read("SELECT source, hash, fingerprint FROM documents WHERE collection = ?", [])
        return {s: (h, f) for s, h, f in rows}

    def replace_document(self, source: str, content_hash: str, fingerprint: str, chunks: Sequence[Chunk],
                         vectors: np.ndarray) -> None:
        """Atomically replace every chunk of `source` (none left behind from an older version)."""
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(vectors)} vectors for {len(chunks)} chunks")
        rows = [(self.collection, c.id, source, i, c.text, json.dumps(c.metadata, ensure_ascii=False),
                 np.asarray(v, dtype=np.float32).tobytes()) for i, (c, v) in enumerate(zip(chunks, vectors,
                                                                                           strict=True))]
        with self._write():
            self._db.execute(_DELETE_CHUNKS, (self.collection, source))
            self._db.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            self._db.execute("INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?)",
                             (self.collection, source, content_hash, fingerprint, len(rows)))

    def delete_document(self, source: str) -> None:
        with self._write():
            self._db.execute(_DELETE_CHUNKS, (self.collection, source))
            self._db.execute(_DELETE_CHUNKS.replace("chunks", "documents"), (self.collection, source))

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """One transaction that bumps the generation: committed whole, or rolled back on any failure."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            committed = False
            try:
                yield
                self._bump()
                self._db.execute("COMMIT")
                committed = True
            finally:
                if not committed:
                    self._db.execute("ROLLBACK")

    def _bump(self) -> None:
        self._db.execute("INSERT INTO generations VALUES (?, 1) ON CONFLICT (collection) "
                         "DO UPDATE SET value = value + 1", (self.collection,))

    def generation(self) -> int:
        """Changes with every write to the collection, from any process."""
        rows = self._read("SELECT value FROM generations WHERE collection = ?", [])
        return int(rows[0][0]) if rows else 0

    # -- chunks ----------------------------------------------------------------------------------

    def count(self) -> tuple[int, int]:
        """(documents, chunks) in the collection."""
        docs = self._read("SELECT COUNT(*) FROM documents WHERE collection = ?", [])[0][0]
        chunks = self._read("SELECT COUNT(*) FROM chunks WHERE collection = ?", [])[0][0]
        return int(docs), int(chunks)

    def load(self, where: dict[str, Any] | None = None) -> tuple[list[Chunk], np.ndarray]:
        """The chunks matching `where`, in document order, and their vectors as one float32 matrix."""
        condition, params = compile_filter(where)
        rows = self._read("SELECT id, source, text, metadata, vector FROM chunks WHERE collection = ? AND "
                          f"{condition} ORDER BY source, ord", params)  # the condition holds only operators
        chunks = [Chunk(i, s, t, json.loads(m)) for i, s, t, m, _ in rows]
        if not rows:
            return chunks, np.zeros((0, 0), dtype=np.float32)
        return chunks, np.stack([np.frombuffer(r[4], dtype=np.float32) for r in rows])

    def query(self, vector: np.ndarray, n: int = 10, where: dict[str, Any] | None = None
              ) -> list[tuple[Chunk, float]]:
        """The `n` chunks nearest to `vector` by cosine (vectors are L2-normalised), best first."""
        chunks, matrix = self.load(where)
        if not chunks:
            return []
        sims = matrix @ np.asarray(vector, dtype=np.float32)
        order = np.argsort(-sims, kind="stable")[:n]
        return [(chunks[i], float(sims[i])) for i in order]

    def _read(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, [self.collection, *params]).fetchall()
