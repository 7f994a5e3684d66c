"""Ingest a folder of Markdown, text and JSONL documents into a `ChunkStore`.

    chunking = Chunking(size=800, overlap=120, unit="chars")
    report = await ingest_folder("examples/docs", store, embedder, chunking)
    report.as_dict()   # {"documents": 9, "added": 9, "unchanged": 0, "chunks_embedded": 41, ...}

Markdown is split at its headings first (a chunk never spans two sections), then at blank lines;
a paragraph longer than the chunk size is split at sentence ends, a sentence longer than that at
word boundaries. Consecutive chunks of one section share `overlap` characters (or words). A
``.jsonl`` file holds one object per line: ``text`` is chunked, every other field becomes metadata
(``{"text": "...", "topic": "routing"}`` can then be filtered with ``{"topic": "routing"}``).

Every chunk's metadata has ``source`` (path relative to the folder), ``heading``, ``doc_type`` and
``chunk_index``. A file whose bytes and chunking settings are unchanged since the last ingest is
skipped without embedding anything; a changed file has all its chunks replaced; a deleted file's
chunks are removed. Chunks are embedded in batches with the project's embedder.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mcp_router.servers.knowledge_base.store import Chunk, ChunkStore
from router.retrieval.embeddings import Embedder

DOC_TYPES = {".md": "md", ".markdown": "md", ".txt": "txt", ".jsonl": "jsonl"}
RESERVED = ("source", "heading", "doc_type", "chunk_index", "line")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Chunking:
    size: int = 800
    overlap: int = 120
    unit: Literal["chars", "words"] = "chars"

    def __post_init__(self) -> None:
        if self.unit not in ("chars", "words"):
            raise ValueError(f"chunk unit must be 'chars' or 'words', not {self.unit!r}")
        least = 20 if self.unit == "chars" else 5
        if self.size < least:
            raise ValueError(f"chunk size must be at least {least} {self.unit}, got {self.size}")
        if not 0 <= self.overlap < self.size // 2 + 1:
            raise ValueError(f"chunk overlap must be between 0 and half the chunk size ({self.size // 2}), "
                             f"got {self.overlap}")

    def length(self, text: str) -> int:
        return len(text) if self.unit == "chars" else len(text.split())

    def fingerprint(self, model_id: str) -> str:
        """Changes when re-chunking or re-embedding is needed even though the file did not change."""
        return f"{model_id}|{self.size}|{self.overlap}|{self.unit}|v1"


@dataclass
class IngestReport:
    documents: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_embedded: int = 0
    chunks_total: int = 0
    embed_batches: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def index_text(chunk: Chunk) -> str:
    """What is embedded and BM25-indexed for a chunk: its heading, then its text."""
    heading = str(chunk.metadata.get("heading") or "")
    return f"{heading}\n{chunk.text}" if heading else chunk.text


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`; list items and lines ending without punctuation count as sentences too."""
    out: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).strip()
        out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def discover(folder: Path) -> list[Path]:
    """Supported files under `folder`, recursively, hidden files and folders excluded, in a stable order. A
    symbolic link is not followed: it could publish any file the server can read to every caller."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
                  and p.suffix.lower() in DOC_TYPES
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def chunk_text(text: str, chunking: Chunking) -> list[str]:
    """Chunks of one section: paragraphs packed up to the size, with overlap between neighbours."""
    pieces: list[tuple[str, str]] = []  # (separator before the piece, piece)
    for para in re.split(r"\n\s*\n", text.strip()):
        para = para.strip()
        if not para:
            continue
        if chunking.length(para) <= chunking.size:
            pieces.append(("\n\n", para))
            continue
        sep = "\n\n"
        for sentence in _SENTENCE_END.split(para):
            fits = chunking.length(sentence) <= chunking.size
            for part in [sentence] if fits else _windows(sentence, chunking):
                pieces.append((sep, part))
                sep = " "
    chunks: list[str] = []
    current = ""
    for sep, piece in pieces:
        joined = f"{current}{sep}{piece}" if current else piece
        if not current or chunking.length(joined) <= chunking.size:
            current = joined
            continue
        chunks.append(current)
        tail = _tail(current, min(chunking.overlap, chunking.size - chunking.length(piece) - 1), chunking)
        current = f"{tail}{sep}{piece}" if tail else piece
    if current:
        chunks.append(current)
    return chunks


def _windows(sentence: str, chunking: Chunking) -> Iterator[str]:
    words, current = sentence.split(), ""
    for word in words:
        joined = f"{current} {word}" if current else word
        if current and chunking.length(joined) > chunking.size:
            yield current
            joined = word
        current = joined
    if current:
        yield current


def _tail(text: str, amount: int, chunking: Chunking) -> str:
    """The last `amount` characters or words of `text`, starting at a word boundary."""
    if amount <= 0:
        return ""
    if chunking.unit == "words":
        return " ".join(text.split()[-amount:])
    tail = text[-amount:]
    words = tail.split()
    if len(tail) < len(text) and not text[-amount - 1].isspace() and not tail[0].isspace():
        words = words[1:]  # the first word was cut
    tail = " ".join(words)
    start = _SENTENCE_END.search(tail)
    # Start at a sentence boundary when the tail contains one.
    return tail[start.end():] if start and start.end() < len(tail) else tail


def sections(text: str) -> Iterator[tuple[str, str]]:
    """(heading, body) of each Markdown section; headings inside fenced code blocks are ignored."""
    heading, fenced = "", False
    lines: list[str] = []
    for line in _lines(text):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        m = None if fenced else _HEADING.match(line)
        if m:
            if "\n".join(lines).strip():
                yield heading, "\n".join(lines)
            heading, lines = m.group(2).strip(), []
        else:
            lines.append(line)
    if "\n".join(lines).strip():
        yield heading, "\n".join(lines)


def document_parts(path: Path, source: str, raw: str, warnings: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(heading, text, extra metadata) of each part of one file: a Markdown section, a JSONL record, a
    whole text file."""
    doc_type = DOC_TYPES[path.suffix.lower()]
    if doc_type == "md":
        return [(h, body, {}) for h, body in sections(raw)]
    if doc_type == "txt":
        return [("", raw, {})]
    parts: list[tuple[str, str, dict[str, Any]]] = []
    for n, line in enumerate(_lines(raw), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_constant=_no_constant)
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except json.JSONDecodeError as exc:
            warnings.append(f"{source}:{n}: not valid JSON ({exc.msg}); line skipped")
            continue
        except UnicodeEncodeError:  # "\ud800": valid JSON, but no text a store or a model can hold
            warnings.append(f"{source}:{n}: a lone surrogate (\\ud800-\\udfff) is not text; line skipped")
            continue
        except (ValueError, RecursionError) as exc:  # NaN and Infinity; nesting past Python's limit
            warnings.append(f"{source}:{n}: {exc or 'nested too deeply'}; line skipped")
            continue
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str) or not text.strip():
            warnings.append(f"{source}:{n}: expected an object with a non-empty 'text' string; "
                            "line skipped")
            continue
        extra = {k: _meta_value(v) for k, v in record.items()
                 if k != "text" and k not in RESERVED and v is not None}
        heading = str(record.get("title") or record.get("question") or record.get("heading") or "")
        parts.append((heading, text, {**extra, "line": n}))
    return parts


def parse_document(path: Path, source: str, raw: str, chunking: Chunking,
                   warnings: list[str]) -> list[Chunk]:
    """The chunks of one file, with their metadata and stable ids (``<source>#<n>``)."""
    doc_type = DOC_TYPES[path.suffix.lower()]
    chunks: list[Chunk] = []
    for heading, body, extra in document_parts(path, source, raw, warnings):
        for text in chunk_text(body, chunking):
            meta = {**extra, "source": source, "heading": heading, "doc_type": doc_type,
                    "chunk_index": len(chunks)}
            chunks.append(Chunk(f"{source}#{len(chunks)}", source, text, meta))
    return chunks


def _lines(text: str) -> list[str]:
    """Lines ended by "\n" (or "\r\n") only: `str.splitlines` also ends one at U+2028, U+0085 and others,
    which JSON keeps raw inside a string and so cut a record in two."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _no_constant(name: str) -> Any:
    # SQLite's JSON functions refuse a stored NaN, and with it every filtered query of the collection
    raise ValueError(f"{name} is not a JSON number")


def folder_sections(folder: Path) -> list[tuple[str, str, str]]:
    """(source, heading, text) of every part of the folder's documents, in a stable order."""
    out: list[tuple[str, str, str]] = []
    for path in discover(folder):
        source = path.relative_to(folder).as_posix()
        try:
            raw = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # ingesting reports it
        out += [(source, heading, text.strip()) for heading, text, _ in document_parts(path, source, raw, [])]
    return out


def _meta_value(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) else json.dumps(value, ensure_ascii=False)


def scan_folder(root: Path, known: dict[str, tuple[str, str]], fingerprint: str, chunking: Chunking,
                report: IngestReport) -> tuple[list[tuple[str, str, list[Chunk]]], set[str]]:
    """Read the folder: the new and changed documents, chunked, and every source present."""
    root = root.expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"document folder not found: {root}")
    pending: list[tuple[str, str, list[Chunk]]] = []
    seen: set[str] = set()
    for path in discover(root):
        source = path.relative_to(root).as_posix()
        report.documents += 1
        try:
            data = path.read_bytes()
        except OSError as exc:  # unreadable, or gone since listed: as a file that is not text
            report.warnings.append(f"{source}: could not be read ({exc.strerror or type(exc).__name__}); skipped")
            continue
        digest = hashlib.sha256(data).hexdigest()
        if known.get(source) == (digest, fingerprint):
            seen.add(source)
            report.unchanged += 1
            continue
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError:  # unseen: what an earlier version of it said is removed, not served on
            report.warnings.append(f"{source}: not UTF-8 text; skipped")
            continue
        seen.add(source)
        if source in known:
            report.updated += 1
        else:
            report.added += 1
        pending.append((source, digest, parse_document(path, source, raw, chunking, report.warnings)))
    return pending, seen


async def ingest_folder(folder: str | Path, store: ChunkStore, embedder: Embedder, chunking: Chunking, *,
                        batch_size: int = 16, remove_missing: bool = True) -> IngestReport:
    """Bring the store up to date with `folder`; returns what was done."""
    started = time.perf_counter()
    report = IngestReport()
    fingerprint = chunking.fingerprint(embedder.model_id)
    known = store.document_hashes()
    changed, seen = await asyncio.to_thread(scan_folder, Path(folder), known, fingerprint, chunking, report)
    pending: list[tuple[str, str, list[Chunk]]] = []
    for doc in changed:  # embedded in batches; each group of documents is written once embedded
        pending.append(doc)
        if sum(len(c) for _, _, c in pending) >= batch_size * 4:
            await _flush(pending, store, embedder, fingerprint, batch_size, report)
    await _flush(pending, store, embedder, fingerprint, batch_size, report)
    if remove_missing:
        for source in sorted(set(known) - seen):
            store.delete_document(source)
            report.removed += 1
    report.chunks_total = store.count()[1]
    report.seconds = round(time.perf_counter() - started, 3)
    return report


async def _flush(pending: list[tuple[str, str, list[Chunk]]], store: ChunkStore, embedder: Embedder,
                 fingerprint: str, batch_size: int, report: IngestReport) -> None:
    """Embed the chunks of the pending documents in batches, then write each document atomically."""
    texts = [index_text(c) for _, _, chunks in pending for c in chunks]
    parts = []
    for start in range(0, len(texts), batch_size):
        parts.append(np.asarray(await embedder.embed(texts[start:start + batch_size]), dtype=np.float32))
        report.embed_batches += 1
    vectors = np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
    report.chunks_embedded += len(texts)
    offset = 0
    for source, digest, chunks in pending:
        store.replace_document(source, digest, fingerprint, chunks, vectors[offset:offset + len(chunks)])
        offset += len(chunks)
    pending.clear()
