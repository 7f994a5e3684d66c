"""Labelled examples of which capability answers which question, and the nearest-neighbour evidence
routing draws from them.

    store = ExampleStore(f"{settings.state_dir}/feedback.sqlite", cap=200)
    store.add([Example(backend="clock", kind="tool", name="now", label=1, question="time in Tokyo?",
                       vector=vec, source="feedback")])
    index = ExampleIndex(store.all(), settings.learning)
    evidence = index.evidence(question_vector)    # capability key -> Evidence, for scoring

An example says "this capability was right (+1) / wrong (-1) for this question". For a new question,
a capability's score comes from its nearest examples: each one within `min_similarity` counts with a
kernel that grows linearly to 1 at cosine 1; the score is the kernel-weighted mean label times the
nearest example's kernel, so one close example speaks clearly, far ones barely, and a mix of right
and wrong cancels out. The score (-1 .. 1) times `learning.weight` is added to `match`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from router.config import LearningSettings, RouterSettings
from router.security.identity import is_loopback
from router.values import capability_key

Source = Literal["feedback", "chat", "routed"]
FEEDBACK_FILE = "feedback.sqlite"  # under `state_dir`


def accepts_feedback(settings: RouterSettings) -> bool:
    """Whether this deployment takes examples at all: the config switch, and unset, only on a loopback
    address. (Each caller's own right is its policy's `feedback`, checked where the caller is known.)"""
    accept = settings.learning.accept_feedback
    if accept is None:
        return is_loopback(settings.server.host)
    return accept


@dataclass(frozen=True, slots=True, kw_only=True)
class Example:
    backend: str
    kind: str
    name: str
    label: int  # +1 the capability was right for the question, -1 it was wrong
    question: str
    vector: np.ndarray = field(repr=False)  # float32, the question's embedding
    source: Source = "feedback"
    principal: str | None = None
    created: float = field(default_factory=time.time)
    document: str = ""  # the capability's text as the retriever sees it (for training)
    id: int | None = None

    @property
    def key(self) -> str:
        return capability_key(self.backend, self.kind, self.name)

    def info(self) -> dict[str, Any]:
        """What an operator sees (no vector)."""
        return {"id": self.id, "backend": self.backend, "kind": self.kind, "name": self.name, "label": self.label,
                "question": self.question, "source": self.source, "principal": self.principal,
                "created": self.created}


_SCHEMA = """
CREATE TABLE IF NOT EXISTS examples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    backend TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    label INTEGER NOT NULL CHECK (label IN (-1, 1)),
    question TEXT NOT NULL, vector BLOB NOT NULL, source TEXT NOT NULL,
    principal TEXT, created REAL NOT NULL, document TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS examples_capability ON examples (backend, kind, name, id);
"""
_COLUMNS = "id, backend, kind, name, label, question, vector, source, principal, created, document"


class ExampleStore:
    """Examples in one SQLite file, capped per capability (the oldest go first). Every write bumps
    `version`, so a reader can tell whether its copy is current."""

    def __init__(self, path: str | Path, cap: int) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.cap = cap
        self._lock = threading.Lock()  # one connection, used from whichever thread the owner runs on
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self.version = self._db.execute("SELECT COALESCE(MAX(id), 0) FROM examples").fetchone()[0]

    def add(self, examples: Iterable[Example]) -> list[Example]:
        """Store examples; returns them with their ids."""
        stored = []
        with self._lock:
            self._db.execute("BEGIN")
            for e in examples:
                vector = np.asarray(e.vector, dtype=np.float32).ravel()
                cur = self._db.execute(
                    f"INSERT INTO examples ({_COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (e.backend, e.kind, e.name, int(e.label), e.question, vector.tobytes(), e.source, e.principal,
                     e.created, e.document))
                self._db.execute(
                    "DELETE FROM examples WHERE backend = ? AND kind = ? AND name = ? AND id NOT IN ("
                    "SELECT id FROM examples WHERE backend = ? AND kind = ? AND name = ? ORDER BY id DESC LIMIT ?)",
                    (e.backend, e.kind, e.name, e.backend, e.kind, e.name, self.cap))
                stored.append(_with_id(e, vector, cur.lastrowid))
            self._db.execute("COMMIT")
            self.version += 1
        return stored

    def all(self) -> list[Example]:
        return self._select("", ())

    def for_backend(self, backend: str) -> list[Example]:
        return self._select("WHERE backend = ?", (backend,))

    def delete_backend(self, backend: str) -> int:
        with self._lock:
            deleted = self._db.execute("DELETE FROM examples WHERE backend = ?", (backend,)).rowcount
            self.version += 1
        return int(deleted)

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM examples").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _select(self, where: str, params: tuple[Any, ...]) -> list[Example]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM examples {where} ORDER BY id", params).fetchall()
        return [Example(id=r[0], backend=r[1], kind=r[2], name=r[3], label=r[4], question=r[5],
                        vector=np.frombuffer(r[6], dtype=np.float32), source=r[7], principal=r[8], created=r[9],
                        document=r[10]) for r in rows]


def _with_id(e: Example, vector: np.ndarray, row_id: int | None) -> Example:
    return Example(id=row_id, backend=e.backend, kind=e.kind, name=e.name, label=e.label, question=e.question,
                   vector=vector, source=e.source, principal=e.principal, created=e.created, document=e.document)


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """What a capability's examples say about one question."""

    examples: int  # how many examples the capability has
    nearest: float  # cosine of the nearest one to the question
    score: float  # -1 .. 1: the nearest examples' verdict, weighted by closeness
    contribution: float  # score * learning.weight: what is added to `match`


class ExampleIndex:
    """The examples as one matrix, grouped by capability, for the evidence of a question vector."""

    def __init__(self, examples: Sequence[Example], settings: LearningSettings) -> None:
        self.settings = settings
        ordered = sorted(examples, key=lambda e: (e.key, e.id or 0))
        self.size = len(ordered)
        self.keys: list[str] = []
        starts: list[int] = []
        for i, e in enumerate(ordered):
            if not self.keys or self.keys[-1] != e.key:
                self.keys.append(e.key)
                starts.append(i)
        self._bounds = list(zip(starts, [*starts[1:], len(ordered)][:len(starts)], strict=True))
        dims = {np.asarray(e.vector).size for e in ordered}
        self.dim = dims.pop() if len(dims) == 1 else None  # mixed sizes: a model change left stale vectors
        if ordered and self.dim is not None:
            m = np.stack([np.asarray(e.vector, dtype=np.float32) for e in ordered])
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            self._matrix = m / np.where(norms == 0, 1.0, norms)
        else:
            self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._labels = np.array([e.label for e in ordered], dtype=np.float32)

    def __len__(self) -> int:
        return self.size

    def evidence(self, vector: Any) -> dict[str, Evidence]:
        """Capability key -> evidence, for every capability with examples (none without a vector)."""
        if vector is None or not self._matrix.size:
            return {}
        q = np.asarray(vector, dtype=np.float32).ravel()
        if q.size != self.dim:
            return {}
        q = q / (float(np.linalg.norm(q)) or 1.0)
        sims = self._matrix @ q
        tau, k, weight = self.settings.min_similarity, self.settings.neighbours, self.settings.weight
        out: dict[str, Evidence] = {}
        for key, (lo, hi) in zip(self.keys, self._bounds, strict=True):
            s = sims[lo:hi]
            nearest = float(s.max())
            score = 0.0
            if nearest > tau:
                top = np.argpartition(-s, k - 1)[:k] if s.size > k else np.arange(s.size)
                kernel = np.clip((s[top] - tau) / (1.0 - tau), 0.0, 1.0)
                score = float((kernel * self._labels[lo:hi][top]).sum() / kernel.sum() * kernel.max())
            out[key] = Evidence(examples=hi - lo, nearest=round(nearest, 4), score=round(score, 4),
                                contribution=round(weight * score, 4))
        return out
