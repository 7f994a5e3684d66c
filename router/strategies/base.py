"""What every strategy shares: the plan it runs, the context it runs in, and one timed attempt.

A strategy is a module with an ``async def run(plan, ctx) -> StrategyResult``; `STRATEGIES` in
`router.strategies` maps each mode name to it. Strategies never raise for backend faults: every
call becomes an `AttemptInfo` in the chain and the caller decides what the chain means.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from opentelemetry import trace

from router.errors import ErrorKind, RateLimited
from router.literals import ChargeFn
from router.models import AttemptInfo, ConsensusAnswer
from router.settings import ResilienceSettings
from router.telemetry import TRACER
from router.values import CallContext, CallOutcome, Capability, PlannedCall

_METHOD = {"tool": "tools/call", "prompt": "prompts/get", "resource": "resources/read", "flow": "flows/run"}


class Executor(Protocol):
    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        """Call one capability; returns a failed outcome instead of raising for backend faults.

        `force` asks an ejected backend to take the call anyway (every candidate is ejected)."""
        ...


class ChargedExecutor:
    """An executor that charges every call it sends to the caller's budget of backend calls (`charge` raises
    `RateLimited` when it is spent): a hedge, a fallback or a chat's tool call costs what it sends, and a
    call over the budget is not sent."""

    def __init__(self, inner: Executor, charge: ChargeFn) -> None:
        self.inner = inner
        self.charge = charge

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        try:
            await self.charge(1)
        except RateLimited as exc:
            return CallOutcome.failed(capability, ErrorKind.RATE_LIMITED, exc.message, sent=False)
        return await self.inner.call(capability, arguments, timeout_s=timeout_s, context=context, force=force)


@dataclass(kw_only=True)
class StrategyContext:
    executor: Executor
    settings: ResilienceSettings
    call: CallContext
    deadline: float  # time.monotonic() value
    timeout_for: Callable[[str], float]
    hedge_delay_ms: Callable[[str], float]
    on_outcome: Callable[[PlannedCall, CallOutcome], None]
    embed: Callable[[list[str]], Awaitable[np.ndarray]] | None = None
    on_step: Callable[[str, dict[str, Any]], None] | None = None  # tracing hook: fallback, hedge, ...
    started: float = field(default_factory=time.monotonic)
    attempts: list[AttemptInfo] = field(default_factory=list)

    def step(self, name: str, **attrs: Any) -> None:
        if self.on_step is not None:
            self.on_step(name, attrs)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


@dataclass(kw_only=True)
class StrategyResult:
    outcome: CallOutcome | None
    call: PlannedCall | None
    attempts: list[AttemptInfo]
    agreement: float | None = None
    answers: list[ConsensusAnswer] | None = None
    disagreed: list[str] | None = None
    not_retried: str | None = None  # why no other candidate was tried after the last failure


def outcome_name(outcome: CallOutcome) -> str:
    """success, or how the failure is reported: error, timeout, unavailable, cancelled."""
    return "success" if outcome.ok else (outcome.error_kind or ErrorKind.BACKEND_FAILED).outcome


async def attempt(ctx: StrategyContext, call: PlannedCall) -> CallOutcome:
    """One backend call bounded by the backend's timeout and the request deadline, recorded in the chain
    and traced as a span with the GenAI / MCP semantic-convention attributes."""
    cap = call.capability
    with TRACER.start_as_current_span(f"{_METHOD.get(cap.kind, 'call')} {cap.name}",
                                      kind=trace.SpanKind.CLIENT) as span:
        span.set_attribute("mcp.method.name", _METHOD.get(cap.kind, "call"))
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", cap.name)
        span.set_attribute("router.backend", cap.backend)
        span.set_attribute("router.capability.kind", cap.kind)
        outcome = await _attempt(ctx, call)
        span.set_attribute("router.outcome", outcome_name(outcome))
        span.set_attribute("router.latency_ms", round(outcome.latency_ms, 2))
        if not outcome.ok:
            span.set_attribute("error.type", str(outcome.error_kind or ErrorKind.BACKEND_FAILED))
            span.set_status(trace.Status(trace.StatusCode.ERROR, outcome.error or ""))
        return outcome


async def _attempt(ctx: StrategyContext, call: PlannedCall) -> CallOutcome:
    started = time.monotonic()
    remaining = ctx.deadline - started
    if remaining <= 0:
        outcome = CallOutcome.failed(call.capability, ErrorKind.DEADLINE_EXCEEDED,
                                     "the request deadline passed before this attempt", sent=False)
        _record(ctx, call, outcome, started)
        return outcome
    timeout = min(ctx.timeout_for(call.backend), remaining)
    try:
        # The executor enforces `timeout` itself; the extra second only guards the hop to it.
        async with asyncio.timeout(timeout + 1.0):
            outcome = await ctx.executor.call(call.capability, call.arguments, timeout_s=timeout, context=ctx.call,
                                              force=call.force)
    except TimeoutError:
        elapsed = (time.monotonic() - started) * 1000
        kind = ErrorKind.DEADLINE_EXCEEDED if timeout < ctx.timeout_for(call.backend) else ErrorKind.BACKEND_TIMEOUT
        outcome = CallOutcome.failed(call.capability, kind, f"{call.backend}/{call.capability.name} did not answer "
                                                            f"within {timeout:.1f} s", elapsed)
    except asyncio.CancelledError:
        elapsed = (time.monotonic() - started) * 1000
        cancelled = CallOutcome.failed(call.capability, ErrorKind.CANCELLED, "cancelled: another attempt won", elapsed)
        _record(ctx, call, cancelled, started)
        raise
    _record(ctx, call, outcome, started)
    return outcome


def _record(ctx: StrategyContext, call: PlannedCall, outcome: CallOutcome, started: float) -> None:
    name = outcome_name(outcome)
    ctx.attempts.append(AttemptInfo(
        backend=call.backend, capability=call.capability.name, outcome=name,  # type: ignore[arg-type]
        latency_ms=round(outcome.latency_ms, 2), started_ms=round((started - ctx.started) * 1000, 2),
        error_type=outcome.error_kind.value if outcome.error_kind else None, error=outcome.error,
    ))
    if name != "cancelled":
        # The history keeps the latency as the router waits it (the hop to the backend's actor included):
        # hedging waits on it, and it is what a caller of this backend waits.
        waited = (time.monotonic() - started) * 1000
        ctx.on_outcome(call, dataclasses.replace(outcome, latency_ms=max(outcome.latency_ms, waited)))


def refused_as_invalid(outcome: CallOutcome) -> bool:
    """The backend's adapter refused the request itself as invalid (a Langflow tweak naming a session): the
    caller's 400, which no other backend would make right."""
    return outcome.error_kind is ErrorKind.INVALID_REQUEST


def unknown_effect(call: PlannedCall, outcome: CallOutcome) -> str | None:
    """Why no other candidate may be tried after this failed call: it may have acted (`may_have_acted`: it
    was sent, and timed out, lost its connection, failed in the server or answered what the router would not
    pass on) and is neither read-only nor idempotent; None otherwise."""
    if call.capability.repeatable or not outcome.may_have_acted:
        return None
    return (f"{call.backend}/{call.capability.name} may have acted before it failed and is not declared "
            "read-only or idempotent, so no other backend was tried")


def only_copies_after(call: PlannedCall, outcome: CallOutcome) -> Capability | None:
    """After an idempotent call that may have acted (it may act, and was sent before it failed), only its
    copies may be tried: repeating it is safe, but another tool is another action on the same request."""
    if call.capability.read_only or not outcome.may_have_acted:
        return None
    return call.capability


def fan_out(calls: Sequence[PlannedCall], k: int) -> list[PlannedCall]:
    """The calls a fan-out mode (parallel, consensus) sends at once: the best call per backend, at most
    `k`, of read-only capabilities (a runner-up is a different call, and must not act on a request meant
    for another); none when the best call may act, and the request runs one call at a time."""
    if not calls or not calls[0].capability.read_only:
        return []
    out: list[PlannedCall] = []
    seen: set[str] = set()
    for c in calls:
        if not c.capability.read_only:
            continue
        if c.backend not in seen:
            seen.add(c.backend)
            out.append(c)
        if len(out) == k:
            break
    return out


async def cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel the losers and wait for them, so their cancellation reaches the backends."""
    for t in tasks:
        if not t.done():
            t.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
