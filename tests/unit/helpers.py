"""Test doubles shared by the unit tests: a deterministic embedder and a small catalog."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from router.errors import ArgumentsRequired
from router.retrieval.text import tokenize
from router.stages.arguments import derive_arguments
from router.values import Capability, Catalog

DIM = 256


def _bucket(token: str) -> int:
    return int.from_bytes(hashlib.sha256(token.encode("utf-8")).digest()[:4], "big") % DIM


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """Hashed bag of stemmed words, L2-normalised float32; an empty text is the zero vector."""
    m = np.zeros((len(texts), DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for tok in tokenize(text):
            m[row, _bucket(tok)] += 1.0
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return (m / np.maximum(norms, 1e-12)).astype(np.float32)


async def fake_embed(texts: list[str]) -> np.ndarray:
    return embed_texts(texts)


TIMEZONE_SCHEMA = {
    "type": "object",
    "properties": {"timezone": {"type": "string", "description": "IANA timezone name, e.g. Europe/London"}},
    "required": ["timezone"],
}
NUMBERS_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "number", "description": "first operand"},
        "b": {"type": "number", "description": "second operand"},
    },
    "required": ["a", "b"],
}
MESSAGE_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "text to repeat"}},
    "required": ["message"],
}


def catalog(backend: str, description: str, *caps: Capability) -> Catalog:
    return Catalog(backend=backend, version="v1", description=description, capabilities=tuple(caps))


def small_catalogs() -> list[Catalog]:
    """Four backends: two that tell the time, a calculator, and an echo server."""
    return [
        catalog(
            "time",
            "current time and time zone conversion",
            Capability(
                read_only=True,
                backend="time",
                name="get_current_time",
                description="Get the current time in a specific timezone",
                input_schema=TIMEZONE_SCHEMA,
            ),
        ),
        catalog(
            "clock",
            "world clock service",
            Capability(
                read_only=True,
                backend="clock",
                name="world_clock",
                description="Current local time for a timezone",
                input_schema=TIMEZONE_SCHEMA,
            ),
        ),
        catalog(
            "calc",
            "arithmetic calculator",
            Capability(
                read_only=True,
                backend="calc", name="add", description="Add two numbers", input_schema=NUMBERS_SCHEMA
            ),
            Capability(
                read_only=True,
                backend="calc",
                name="multiply",
                description="Multiply two numbers",
                input_schema=NUMBERS_SCHEMA,
            ),
        ),
        catalog(
            "echo",
            "echoes messages back",
            Capability(
                read_only=True,
                backend="echo",
                name="echo",
                description="Repeat a message back to the caller",
                input_schema=MESSAGE_SCHEMA,
            ),
        ),
    ]


class FakeClock:
    """A clock a test moves by hand (`clock.advance(5)`)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def derives(cap: Capability, question: str, arguments: dict[str, Any] | None) -> None:
    """The arguments derived for `cap` from `question`, or (None) the 422 asking for them."""
    derived = derive_arguments(cap, question)
    if arguments is None:
        assert isinstance(derived, ArgumentsRequired), derived
    else:
        assert not isinstance(derived, ArgumentsRequired) and derived[0] == arguments, derived
