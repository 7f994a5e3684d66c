"""Limits and cleaning for what a backend says about itself: names, descriptions and input schemas.

    problem = over_limits(description, capabilities, settings.security)   # a message, or None
    description, capabilities, notes = sanitise(description, capabilities)

Catalogs come from servers the router does not control, and their texts reach an LLM's context. A
catalog whose texts exceed `security.max_*` is rejected whole (the backend is reported with a
`catalog_error` and nothing of it is indexed); otherwise control and invisible characters are removed
from every name, description and schema string, and each field that lost some is listed in `notes`
(shown on `/v1/backends` as `sanitized`). Lengths are measured on the text as received.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from router.settings import SecuritySettings
from router.values import Capability

# Kept: the line breaks and tabs that format a description.
_KEEP = frozenset("\n\t")
# Variation selectors carry no text of their own; long runs of them can smuggle bytes (emoji "smuggling").
_SELECTORS = ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
# What hides text from a reader: Unicode tag characters, bidirectional overrides, zero-width spaces.
# Zero-width joiners and variation selectors are left out of the count: emoji sequences use them.
_HIDING = ((0xE0000, 0xE007F), (0x202A, 0x202E), (0x2066, 0x2069), (0x200B, 0x200C), (0x2060, 0x2064),
           (0xFEFF, 0xFEFF), (0x180E, 0x180E))


def _removed(ch: str) -> bool:
    if ch in _KEEP:
        return False
    if unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs"):
        return True
    o = ord(ch)
    return any(lo <= o <= hi for lo, hi in _SELECTORS)


# `_HIDING` and the control characters (category Cc) other than line breaks and tabs, as one character class:
# every tool description of every catalog is scanned, a thousand backends' in a few seconds.
_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
                     + "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in _HIDING) + "]")


def invisible_characters(text: str) -> int:
    """How many characters in `text` hide content from a person reading it (see `_HIDING`), plus control
    characters other than line breaks and tabs."""
    return len(_HIDDEN.findall(text))


def strip_invisible(text: str) -> str:
    """`text` without control, format (zero-width, bidi, tags), private-use and variation-selector characters."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(ch for ch in text if not _removed(ch))


def clean_strings(value: Any) -> Any:
    """A JSON value with every string and key stripped of invisible characters."""
    if isinstance(value, str):
        return strip_invisible(value)
    if isinstance(value, dict):
        return {strip_invisible(str(k)): clean_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_strings(v) for v in value]
    return value


def schema_size(schema: dict[str, Any]) -> int:
    return len(json.dumps(schema, ensure_ascii=False, default=str).encode())


def over_limits(description: str, capabilities: Sequence[Capability], limits: SecuritySettings) -> str | None:
    """Why this catalog is refused, naming the first capability and field over its limit; None when it fits."""
    if len(capabilities) > limits.max_capabilities:
        return (f"the catalog lists {len(capabilities)} capabilities, more than security.max_capabilities "
                f"({limits.max_capabilities})")
    if len(description) > limits.max_description_length:
        return (f"the server's description has {len(description)} characters, more than "
                f"security.max_description_length ({limits.max_description_length})")
    for cap in capabilities:
        label = f"{cap.kind} {cap.name[:80]!r}"
        if len(cap.name) > limits.max_name_length:
            return f"{label}: its name has {len(cap.name)} characters, more than security.max_name_length " \
                   f"({limits.max_name_length})"
        text = (cap.title or "") + cap.description
        if len(text) > limits.max_description_length:
            return (f"{label}: its description has {len(text)} characters, more than "
                    f"security.max_description_length ({limits.max_description_length})")
        size = schema_size(cap.input_schema)
        if size > limits.max_schema_bytes:
            return f"{label}: its input schema has {size} bytes, more than security.max_schema_bytes " \
                   f"({limits.max_schema_bytes})"
    return None


# A note on the server's own description has no ": ", which every capability's note has ("<name>: <fields>"), so
# that a tool named "server" is never taken for the server.
SERVER_NOTE = "the server's description"


def noted_capability(note: str) -> str | None:
    """The capability a `sanitise` or review note is about; None for the server's own description."""
    return note.rsplit(": ", 1)[0] if ": " in note else None


def sanitise(description: str, capabilities: Sequence[Capability]
             ) -> tuple[str, tuple[Capability, ...], tuple[str, ...]]:
    """Every text without invisible characters, and the fields that lost some ("search: description")."""
    notes: list[str] = []
    clean_description = strip_invisible(description)
    if clean_description != description:
        notes.append(SERVER_NOTE)
    out = []
    for cap in capabilities:
        name = strip_invisible(cap.name)
        changes: dict[str, Any] = {}
        if name != cap.name:
            changes["name"] = name
        for field in ("description", "title"):
            value = getattr(cap, field)
            if value and (clean := strip_invisible(value)) != value:
                changes[field] = clean
        schema = clean_strings(cap.input_schema)
        if schema != cap.input_schema:
            changes["input_schema"] = schema
        if changes:
            notes.append(f"{name}: {', '.join(sorted(changes))}")
            cap = replace(cap, **changes)
        out.append(cap)
    return clean_description, tuple(out), tuple(notes)
