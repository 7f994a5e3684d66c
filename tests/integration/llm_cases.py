"""What the LLM-layer tests share: the fake OpenAI server, a client for it, capabilities, an executor."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from router.errors import ErrorKind
from router.llm.client import (
    LLMClient,
)
from router.settings import LLMSettings
from router.values import CallContext, CallOutcome, Capability
from tests.fakes import serve_app
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-test-SECRET-5f0c2a9d"
MODEL = "fake-gpt"
CONTEXT = CallContext(question="What time is it in Tokyo?", intent="general", session_id="s-1")
CLOCK = Capability(backend="clock", name="get_time", description="Current time in a time zone",
                   input_schema={"type": "object", "properties": {
                       "timezone": {"type": "string", "description": "IANA time zone"},
                       "format": {"type": "string", "enum": ["12h", "24h"]}}, "required": ["timezone"]})
CALC = Capability(backend="calc", name="divide", description="Divide a by b", input_schema={
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"]})
CANDIDATES = [("clock", "Time and time zones", ["get_time", "convert_time"]),
              ("weather", "Forecasts", ["forecast"]),
              ("calc", "Arithmetic", ["add", "divide"])]


@dataclass
class Served:
    fake: FakeOpenAI
    url: str


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    fake = FakeOpenAI(api_key=KEY)
    with serve_app(fake.app) as url:
        yield Served(fake, url)


@pytest.fixture
def fake(server: Served) -> FakeOpenAI:
    """The module's fake, reset: no scripted replies, no recorded requests, the default behaviour."""
    f = server.fake
    f.queue.clear()
    f.requests.clear()
    f.handler = None
    f.reverse_embeddings = False
    return f


def settings(url: str, **overrides: Any) -> LLMSettings:
    values: dict[str, Any] = {"base_url": f"{url}/v1", "model": MODEL, "api_key": KEY, "timeout_s": 5,
                              "max_retries": 0}
    return LLMSettings.model_validate({**values, **overrides})


@pytest.fixture
async def llm(server: Served, fake: FakeOpenAI) -> AsyncIterator[LLMClient]:
    client = LLMClient(settings(server.url))
    yield client
    await client.close()


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def response_format(body: dict[str, Any]) -> dict[str, Any]:
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    return fmt["json_schema"]


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"])


class RecordingExecutor:
    """An in-process Executor: `divide` by zero fails like a tool error, everything else answers."""

    def __init__(self) -> None:
        self.calls: list[tuple[Capability, dict[str, Any], CallContext, float]] = []

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        self.calls.append((capability, arguments, context, timeout_s))
        if capability.name == "divide" and arguments.get("b") == 0:
            return CallOutcome(backend=capability.backend, capability=capability.name, ok=False,
                               latency_ms=2.0, error_kind=ErrorKind.TOOL_FAILED, error="division by zero")
        return CallOutcome(backend=capability.backend, capability=capability.name, ok=True,
                           latency_ms=3.5, text=f"{capability.name} -> {json.dumps(arguments)}")


# -- configuration ---------------------------------------------------------------------------
