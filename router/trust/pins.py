"""Pinned tool definitions: a hash of each capability's name, description and schema, and what changed.

    pins = PinStore("backend", pin_dir=Path(state_dir) / "pins", lock_file=Path("mcp-router.lock.json"))
    kept, held, approved = pins.review(capabilities, trust_changes=False)
    approve(pin_dir, lock_file, "backend", "tool")          # what `mcp-router approve backend/tool` does

A tool server can change a tool's description after it was approved (a "rug pull"). The first time a
capability is seen its fingerprint is recorded (trust on first use) in `<state_dir>/pins/<backend>.json`,
a file every router replica and the backend's actor read; later, a capability whose fingerprint differs
is held out of routing, and the new definition waits in the file's `pending` section until approved;
meanwhile the definition the pin approved stands in for it, ranked but never called, so that a question
meant for it is refused by name instead of going to another tool.
When the operator commits a lock file (`mcp-router lock`) and it lists the backend, the lock is the
reference instead: a capability it does not list, or lists differently, is held until approved (which
updates the lock). A backend with `trust_changes` has changes pinned again at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from router.values import Capability

FIELDS = ("name", "description", "schema")


def _digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def pin_key(cap: Capability) -> str:
    return f"{cap.kind}/{cap.name}"


def fingerprint(cap: Capability) -> dict[str, Any]:
    """One hash per field (to say which changed) and one of the whole definition; beside them, what the tool
    claims of itself (its read-only and idempotent hints)."""
    parts = {"name": _digest(cap.name), "description": _digest(f"{cap.title or ''}\n{cap.description}"),
             "schema": _digest(cap.input_schema)}
    return {**parts, "hash": _digest([parts[f] for f in FIELDS]), "claims": _claims(cap)}


def _claims(cap: Capability) -> dict[str, bool]:
    return {"read_only": cap.read_only, "idempotent": cap.idempotent}


def _widened(before: Any, now: dict[str, bool]) -> bool:
    """Whether the tool now claims what it did not when approved: read-only or idempotent, which let the router
    call it more freely (beside others, again after a failure, from the response cache, on a weaker match).
    A pin from before claims were kept has none to compare."""
    return isinstance(before, dict) and any(now[k] and not before.get(k) for k in now)


def definition(cap: Capability) -> dict[str, Any]:
    """What a pin keeps of the definition it approved, so that while a change waits the tool can still be
    recognised (and refused by name) as it was approved."""
    return {"title": cap.title, "description": cap.description, "input_schema": cap.input_schema}


def as_approved(cap: Capability, before: Any, reason: str) -> Capability | None:
    """The held capability as it was last approved, marked held; None when its pin kept no definition."""
    kept = before.get("definition") if isinstance(before, dict) else None
    if not isinstance(kept, dict):
        return None
    claims = before.get("claims") if isinstance(before.get("claims"), dict) else {}
    return replace(cap, title=kept.get("title"), description=str(kept.get("description") or ""),
                   input_schema=kept.get("input_schema") or {}, held=reason,
                   read_only=bool(claims.get("read_only", cap.read_only)),
                   idempotent=bool(claims.get("idempotent", cap.idempotent)))


def read_json(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mtime(path: Path | None) -> float | None:
    if path is None:
        return None
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


class PinReview(NamedTuple):
    kept: tuple[Capability, ...]
    held: tuple[dict[str, Any], ...]
    approved: tuple[Capability, ...]  # the held ones as last approved, marked `held`


class PinStore:
    """The pins of one backend. Without a `pin_dir` they live in memory, for the life of the process."""

    def __init__(self, backend: str, pin_dir: Path | None = None, lock_file: Path | None = None) -> None:
        self.backend = backend
        self.path = pin_dir / f"{backend}.json" if pin_dir is not None else None
        self.lock_file = lock_file
        self._memory: dict[str, Any] = {"pinned": {}, "pending": {}}
        self._seen: tuple[float | None, float | None] = (None, None)

    def changed_on_disk(self) -> bool:
        """True when the pin file or the lock file changed since the last review (an approval)."""
        return (_mtime(self.path), _mtime(self.lock_file)) != self._seen

    def _load(self) -> dict[str, Any]:
        data = read_json(self.path) if self.path is not None else self._memory
        data.setdefault("pinned", {})
        data.setdefault("pending", {})
        return data

    def _save(self, data: dict[str, Any]) -> None:
        if self.path is None:
            self._memory = data
        else:
            write_json(self.path, data)

    def review(self, capabilities: Sequence[Capability], *, trust_changes: bool = False,
               unpinned: Collection[str] = ()) -> PinReview:
        """The capabilities that may be routed to, the held ones as {tool, kind, reason, changed}, and the
        held ones as last approved (where the pin kept their definition). `unpinned`: names whose definition is
        not to be pinned as it is now (quarantined: it would stand in for a later one as approved)."""
        data = self._load()
        locked = read_json(self.lock_file).get(self.backend)
        reference: dict[str, Any] = locked if isinstance(locked, dict) else data["pinned"]
        kept: list[Capability] = []
        held: list[dict[str, Any]] = []
        approved: list[Capability] = []
        pending: dict[str, Any] = {}
        dirty = False
        for cap in capabilities:
            key, now = pin_key(cap), fingerprint(cap)
            before = reference.get(key)
            widened = isinstance(before, dict) and _widened(before.get("claims"), now["claims"])
            if isinstance(before, dict) and before.get("hash") == now["hash"] and not widened:
                kept.append(cap)
                if locked is None and ("definition" not in before or "claims" not in before):
                    # Pinned before definitions and claims were kept: what it is now is what was approved.
                    before.update(definition=definition(cap), claims=now["claims"])
                    dirty = True
                continue
            if (before is None or trust_changes) and locked is None:
                if cap.name in unpinned:
                    continue  # neither pinned nor kept: held by the caller's quarantine
                data["pinned"][key] = {**now, "definition": definition(cap)}  # first seen, or trusted
                dirty = True
                kept.append(cap)
                continue
            changed = [f for f in FIELDS if not isinstance(before, dict) or before.get(f) != now[f]]
            changed += ["claims"] if widened else []
            reason = "not in the lock file" if before is None else "definition changed since it was pinned"
            held.append({"tool": cap.name, "kind": cap.kind, "reason": reason, "changed": changed})
            pending[key] = {**now, "changed": changed, "description_now": cap.description[:500],
                            "definition": definition(cap)}
            stand_in = as_approved(cap, before, reason)
            if stand_in is not None:
                approved.append(stand_in)
        if pending != data["pending"]:
            data["pending"] = pending
            dirty = True
        if dirty:
            self._save(data)
        self._seen = (_mtime(self.path), _mtime(self.lock_file))
        return PinReview(tuple(kept), tuple(held), tuple(approved))


def approve(pin_dir: Path, lock_file: Path | None, backend: str, tool: str | None = None) -> list[str]:
    """Pin the pending definitions of `backend` (all, or the capability named `tool`, with or without its
    kind: `search` or `tool/search`); the lock file is updated too when it lists the backend. Returns the
    keys approved."""
    path = pin_dir / f"{backend}.json"
    data = read_json(path)
    pending: dict[str, Any] = data.get("pending") or {}
    chosen = [k for k in pending if tool is None or k == tool or k.split("/", 1)[1] == tool]
    if not chosen:
        return []
    pinned = data.setdefault("pinned", {})
    for key in chosen:
        entry = pending.pop(key)
        pinned[key] = {f: entry[f] for f in (*FIELDS, "hash", "definition", "claims") if f in entry}
    write_json(path, data)
    lock = read_json(lock_file)
    if lock_file is not None and isinstance(lock.get(backend), dict):
        lock[backend].update({k: pinned[k] for k in chosen})
        write_json(lock_file, lock)
    return chosen
