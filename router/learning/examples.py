"""Labelled examples of which capability answers which question, and the store that keeps them.

    store = ExampleStore(f"{settings.state_dir}/feedback.sqlite", cap=200)
    store.add([Example(backend="clock", kind="tool", name="now", label=1, question="time in Tokyo?",
                       vector=vec, source="feedback", confidence=0.4, top_confidence=0.4)])

An example says "this capability was right (+1) / wrong (-1) for this question", with the question's
vector and how sure retrieval was when it was given. What routing draws from them is in
`router.learning.evidence`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from router.security.identity import is_loopback
from router.settings import RouterSettings
from router.values import CapabilityId

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
    # How sure retrieval was when the example was given (None: not recorded): its confidence in this
    # capability (0 when it was not a candidate), and in its own first candidate.
    confidence: float | None = None
    top_confidence: float | None = None
    request_id: str | None = None  # the routed request it was given on: feedback on it again replaces it
    id: int | None = None

    @property
    def key(self) -> str:
        return CapabilityId(self.backend, self.kind, self.name).key

    def info(self) -> dict[str, Any]:
        """What an operator sees (no vector)."""
        return {"id": self.id, "backend": self.backend, "kind": self.kind, "name": self.name, "label": self.label,
                "question": self.question, "source": self.source, "principal": self.principal,
                "created": self.created, "confidence": self.confidence, "top_confidence": self.top_confidence}


_SCHEMA = """
CREATE TABLE IF NOT EXISTS examples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    backend TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    label INTEGER NOT NULL CHECK (label IN (-1, 1)),
    question TEXT NOT NULL, vector BLOB NOT NULL, source TEXT NOT NULL,
    principal TEXT, created REAL NOT NULL, document TEXT NOT NULL DEFAULT '',
    confidence REAL, top_confidence REAL, request_id TEXT
);
CREATE INDEX IF NOT EXISTS examples_capability ON examples (backend, kind, name, id);
"""
# Columns added since the first version of the file; a file without them gets them (as NULL) on opening.
_ADDED = {"confidence": "REAL", "top_confidence": "REAL", "request_id": "TEXT"}
_COLUMNS = ("id, backend, kind, name, label, question, vector, source, principal, created, document, confidence, "
            "top_confidence, request_id")


class ExampleStore:
    """Examples in one SQLite file, capped per capability. Every write bumps `version`, so a reader can tell
    whether its copy is current.

    What one principal gives cannot crowd out another's: feedback given again on the same request replaces
    what it gave before (a caller replaying it adds nothing), and a capability over its cap gives up the
    oldest example of the principal holding the most of its examples (with one principal, its oldest)."""

    def __init__(self, path: str | Path, cap: int) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.cap = cap
        self._lock = threading.Lock()  # one connection, used from whichever thread the owner runs on
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(examples)")}
        for column, kind in _ADDED.items():
            if column not in have:
                self._db.execute(f"ALTER TABLE examples ADD COLUMN {column} {kind}")
        self._db.execute("CREATE INDEX IF NOT EXISTS examples_request ON examples (request_id)")
        self.version = self._db.execute("SELECT COALESCE(MAX(id), 0) FROM examples").fetchone()[0]

    def add(self, examples: Iterable[Example]) -> list[Example]:
        """Store examples; returns them with their ids."""
        stored = []
        examples = list(examples)
        with self._lock, self._transaction():
            for request_id in {e.request_id for e in examples if e.source == "feedback" and e.request_id}:
                self._db.execute("DELETE FROM examples WHERE request_id = ?", (request_id,))
            for e in examples:
                if e.source == "routed" and e.request_id and self._db.execute(
                        "SELECT 1 FROM examples WHERE request_id = ? AND source = 'feedback' LIMIT 1",
                        (e.request_id,)).fetchone():
                    continue  # sent a moment after the answer, it came after the caller's feedback, which speaks
                vector = np.asarray(e.vector, dtype=np.float32).ravel()
                cur = self._db.execute(
                    f"INSERT INTO examples ({_COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (e.backend, e.kind, e.name, int(e.label), e.question, vector.tobytes(), e.source, e.principal,
                     e.created, e.document, e.confidence, e.top_confidence, e.request_id))
                self._evict(e.backend, e.kind, e.name)
                stored.append(_with_id(e, vector, cur.lastrowid))
            self.version += 1
        return stored

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """All or nothing; a write that fails (the disk full, the file locked by another process) is rolled
        back, so the connection is not left inside a transaction every later write fails to begin."""
        self._db.execute("BEGIN")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # a COMMIT that failed (the file busy) leaves it open too
                self._db.execute("ROLLBACK")
            raise

    def _evict(self, backend: str, kind: str, name: str) -> None:
        """The capability back to its cap: the principal holding the most of its examples gives up its oldest."""
        cap = (backend, kind, name)
        (held,) = self._db.execute("SELECT COUNT(*) FROM examples WHERE backend = ? AND kind = ? AND name = ?",
                                   cap).fetchone()
        for _ in range(held - self.cap):
            self._db.execute(
                "DELETE FROM examples WHERE id = (SELECT id FROM examples WHERE backend = ? AND kind = ? AND name = ? "
                "AND principal IS (SELECT principal FROM examples WHERE backend = ? AND kind = ? AND name = ? "
                "GROUP BY principal ORDER BY COUNT(*) DESC, MIN(id) LIMIT 1) ORDER BY id LIMIT 1)", cap + cap)

    def all(self) -> list[Example]:
        return self._select("", ())

    def for_backend(self, backend: str) -> list[Example]:
        return self._select("WHERE backend = ?", (backend,))

    def delete_backend(self, backend: str, names: list[str] | None = None) -> int:
        """The backend's examples, or only those of the capabilities `names` (what a narrower policy covers)."""
        only = f" AND name IN ({', '.join('?' * len(names))})" if names is not None else ""
        with self._lock, self._transaction():
            deleted = self._db.execute(f"DELETE FROM examples WHERE backend = ?{only}",
                                       (backend, *(names or ()))).rowcount
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
                        document=r[10], confidence=r[11], top_confidence=r[12], request_id=r[13]) for r in rows]


def _with_id(e: Example, vector: np.ndarray, row_id: int | None) -> Example:
    return dataclasses.replace(e, id=row_id, vector=vector)
