"""An in-process Executor whose behaviour per backend is scripted by the test."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from router.errors import ErrorKind
from router.values import CallContext, CallOutcome, Capability

Behaviour = Callable[["Call"], Awaitable[CallOutcome]]


@dataclass
class Call:
    backend: str
    capability: str
    arguments: dict[str, Any]
    timeout_s: float
    force: bool
    context: CallContext
    started: float  # loop time


def ok(text: str) -> Behaviour:
    async def run(call: Call) -> CallOutcome:
        return CallOutcome(
            backend=call.backend, capability=call.capability, ok=True, latency_ms=1.0, text=text
        )

    return run


def fail(error_type: str = "tool_failed", error: str = "it broke") -> Behaviour:
    async def run(call: Call) -> CallOutcome:
        return CallOutcome(
            backend=call.backend,
            capability=call.capability,
            ok=False,
            latency_ms=1.0,
            error_kind=ErrorKind(error_type),
            error=error,
        )

    return run


def timeout() -> Behaviour:
    """The executor's own timeout fired (it enforces `timeout_s` and reports it as a value)."""
    return fail("backend_timeout", "no answer within the timeout")


def unavailable() -> Behaviour:
    return fail("backend_unavailable", "connection refused")


def after(event: asyncio.Event, then: Behaviour) -> Behaviour:
    async def run(call: Call) -> CallOutcome:
        await event.wait()
        return await then(call)

    return run


def then_set(event: asyncio.Event, first: Behaviour) -> Behaviour:
    async def run(call: Call) -> CallOutcome:
        try:
            return await first(call)
        finally:
            event.set()

    return run


@dataclass
class ScriptedExecutor:
    script: dict[str, Behaviour]
    calls: list[Call] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    hang_forever: set[str] = field(default_factory=set)

    def hang(self, backend: str) -> None:
        """`backend` never answers; its coroutine records the CancelledError it receives."""
        self.hang_forever.add(backend)

    @property
    def called(self) -> list[str]:
        return [c.backend for c in self.calls]

    async def call(
        self,
        capability: Capability,
        arguments: dict[str, Any],
        *,
        timeout_s: float,
        context: CallContext,
        force: bool = False,
    ) -> CallOutcome:
        call = Call(
            capability.backend,
            capability.name,
            arguments,
            timeout_s,
            force,
            context,
            asyncio.get_running_loop().time(),
        )
        self.calls.append(call)
        if capability.backend in self.hang_forever:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.append(capability.backend)
                raise
        return await self.script[capability.backend](call)
