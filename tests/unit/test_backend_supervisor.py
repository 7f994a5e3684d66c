"""BackendSupervisor without Ray: a fault in a backend's own code is a failed call, never a stuck backend."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from actors.backend import BackendSupervisor
from router.errors import (
    BackendBusy,
    BackendRejectedArguments,
    BackendTimeout,
    BackendUnreachable,
    ErrorKind,
    ToolFailed,
)
from router.settings import RouterSettings
from router.values import CallContext, CallOutcome, Capability, Catalog

CTX = CallContext(question="q", intent="general")
TOOL = Capability(backend="flaky", name="work")


class ScriptedBackend:
    """A connected backend whose calls follow a script: "ok", "boom" (an unexpected exception)."""

    name, kind, transport, connected = "flaky", "mcp_stdio", "stdio", True
    on_change = None

    def __init__(self, script: list[str]) -> None:
        self.script = script

    async def connect(self) -> None: ...

    async def list_capabilities(self) -> Catalog:
        return Catalog(backend="flaky", version="1", description="", capabilities=(TOOL,))

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext) -> CallOutcome:
        step, said = self.script.pop(0), json.dumps(arguments)
        if step == "boom":
            raise KeyError("a bug in the backend adapter")
        if step == "tool-error":  # the tool's own error, echoing the caller's arguments as servers do
            raise ToolFailed(f"tool {capability.name!r}: invalid input {said}")
        if step == "rejected":
            raise BackendRejectedArguments(f"invalid params: {said}")
        if step == "timeout":
            raise BackendTimeout(f"no answer within {timeout_s} s to {said}")
        if step == "busy":
            raise BackendBusy("backend 'flaky' (flow 'f'): Flowise did not start the run (HTTP 429: quota)")
        if step == "refused":
            raise BackendUnreachable("backend 'flaky' (flow): cannot reach http://127.0.0.1:9: connection refused")
        if step == "slow":
            await asyncio.sleep(0.5)
        text = f"{timeout_s}" if step == "time-left" else "done"
        return CallOutcome(backend="flaky", capability=capability.name, ok=True, latency_ms=1.0, text=text)

    async def relay(self, method: str, params: dict[str, Any], *, timeout_s: float,
                    log_level: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """A relayed request: the server logs `params["logs"]` messages of 1 KB, then answers."""
        self.relayed_to_end = False
        for _ in range(params.get("logs", 0)):
            yield {"event": "log", "params": {"level": "info", "data": "x" * 1024}}
        yield {"event": "result", "result": {}}
        self.relayed_to_end = True

    async def health(self, timeout_s: float) -> None: ...

    async def close(self) -> None: ...

    async def shutdown(self) -> None: ...


def supervisor(script: list[str], failures: int = 1, ejection_s: float = 0.05, **spec: Any) -> BackendSupervisor:
    settings = RouterSettings.model_validate({
        "backends": [{"name": "flaky", "kind": "mcp_stdio", "command": "x", "max_concurrency": 1, **spec}],
        "resilience": {"ejection": {"consecutive_failures": failures, "base_ejection_s": ejection_s}}})
    sup = BackendSupervisor(settings.backends[0], settings.resilience)
    sup.backend = ScriptedBackend(script)  # type: ignore[assignment]
    return sup


async def call(sup: BackendSupervisor, arguments: dict[str, Any] | None = None, timeout_s: float = 30.0) -> CallOutcome:
    return await sup.call(TOOL, arguments or {}, timeout_s, CTX)


SECRET = {"timezone": "alice-secret-42"}


async def test_errors_a_caller_provokes_never_eject_the_backend_nor_reach_its_shared_state() -> None:
    sup = supervisor(["tool-error"] * 5 + ["rejected"] * 5 + ["ok"])  # one backend failure would eject it
    await sup.start(wait_s=2)
    for _ in range(10):
        outcome = await call(sup, SECRET)
        assert not outcome.ok and "alice-secret-42" in (outcome.error or "")  # the caller sees its own error
        assert outcome.error_kind in (ErrorKind.TOOL_FAILED, ErrorKind.BACKEND_REJECTED_ARGUMENTS)
    status = sup.status()
    assert (status.health, status.last_error, status.consecutive_failures) == ("healthy", None, 0)
    assert (await call(sup)).ok  # another caller's call goes through
    await sup.shutdown()


async def test_a_call_cut_short_by_the_callers_own_deadline_says_nothing_of_the_backend() -> None:
    sup = supervisor(["timeout", "ok"])
    await sup.start(wait_s=2)
    late = await call(sup, SECRET, timeout_s=0.5)  # shorter than the backend's timeout_s (30)
    assert late.error_kind is ErrorKind.DEADLINE_EXCEEDED and late.backend_answered is None
    assert sup.status().health == "healthy" and sup.status().last_error is None
    assert (await call(sup)).ok
    await sup.shutdown()


async def test_the_wait_for_a_call_slot_is_part_of_the_calls_time_and_one_never_sent_counts_for_no_one() -> None:
    sup = supervisor(["slow", "time-left"])  # one slot (max_concurrency 1)
    await sup.start(wait_s=2)
    flood = asyncio.create_task(sup.call(TOOL, {}, 30.0, CallContext(question="q", intent="general",
                                                                        principal="mallory")))
    await asyncio.sleep(0.05)
    bob = CallContext(question="q", intent="general", principal="bob")
    starved = await sup.call(TOOL, {}, 0.2, bob)
    assert starved.error_kind is ErrorKind.DEADLINE_EXCEEDED and not starved.sent and not starved.may_have_acted
    assert "call slots stayed taken" in (starved.error or "") and starved.backend_answered is None
    waited = asyncio.create_task(sup.call(TOOL, {}, 5.0, bob))  # gets the slot when mallory's call ends
    assert (await flood).ok
    answer = await waited
    assert answer.ok and float(answer.text or "") < 4.9  # what its wait left of its five seconds
    assert sup.status().health == "healthy" and sup.status().inflight == 0
    await sup.shutdown()


async def test_a_timeout_after_waiting_for_a_call_slot_is_the_callers_deadline_not_the_backends_fault() -> None:
    sup = supervisor(["slow", "timeout", "ok"], timeout_s=1.0)  # one slot; the backend's own timeout is 1 s
    await sup.start(wait_s=2)
    flood = asyncio.create_task(sup.call(TOOL, {}, 1.0, CallContext(question="q", intent="general",
                                                                       principal="mallory")))
    await asyncio.sleep(0.05)
    waited = await sup.call(TOOL, {}, 1.0, CallContext(question="q", intent="general", principal="bob"))
    assert (await flood).ok
    # Half of bob's second went to mallory's call: the rest running out says nothing of the backend.
    assert waited.error_kind is ErrorKind.DEADLINE_EXCEEDED and waited.backend_answered is None
    assert sup.status().health == "healthy" and sup.status().consecutive_failures == 0
    assert (await call(sup)).ok
    await sup.shutdown()


async def test_a_call_refused_at_connecting_was_never_sent_and_is_the_backends_fault() -> None:
    sup = supervisor(["refused"])
    await sup.start(wait_s=2)
    refused = await call(sup)
    assert refused.error_kind is ErrorKind.BACKEND_UNAVAILABLE and not refused.sent and not refused.may_have_acted
    assert "backend_unavailable" in (sup.status().last_error or "")  # and it reconnects at once
    await sup.shutdown()


async def test_a_backend_too_busy_to_start_a_run_is_neither_down_nor_ejected() -> None:
    sup = supervisor(["busy"] * 3 + ["ok"])  # one backend failure would eject it
    await sup.start(wait_s=2)
    for _ in range(3):
        started = time.monotonic()
        busy = await call(sup)
        assert busy.error_kind is ErrorKind.BACKEND_UNAVAILABLE and not busy.sent and not busy.may_have_acted
        assert time.monotonic() - started < 0.2  # no pause for a dying connection: the next backend at once
    status = sup.status()
    assert (status.health, status.last_error, status.consecutive_failures) == ("healthy", None, 0)
    assert (await call(sup)).ok
    await sup.shutdown()


async def test_a_relayed_request_is_bounded_by_all_the_server_sends_in_it_not_its_answer_alone() -> None:
    sup = supervisor(["ok"])
    sup._max_answer = 8 * 1024
    await sup.start(wait_s=2)
    few = [e async for e in sup.relay("tools/call", {"logs": 3}, 5.0)]
    assert [e["event"] for e in few] == ["log", "log", "log", "result"]
    flood = [e async for e in sup.relay("tools/call", {"logs": 1000}, 5.0)]
    assert len(flood) <= 9 and flood[-1]["data"] == {"kind": "answer_too_large"}
    assert not sup.backend.relayed_to_end  # type: ignore[attr-defined]  # the rest was never read
    assert sup.status().health == "healthy" and (await call(sup)).ok
    await sup.shutdown()


async def test_a_backend_fault_ejects_it_and_its_state_names_neither_the_call_nor_the_tool() -> None:
    sup = supervisor(["timeout"])
    await sup.start(wait_s=2)
    failed = await call(sup, SECRET)  # the backend's own timeout ran out
    assert failed.error_kind is ErrorKind.BACKEND_TIMEOUT and failed.backend_answered is False
    status = sup.status()
    assert status.health == "ejected" and status.last_error == "a tool call failed: backend_timeout"
    refused = await call(sup)
    assert refused.error is not None and "ejected" in refused.error and "after 1 failures" in refused.error
    for text in (status.last_error, refused.error):
        assert "alice-secret" not in text and "work" not in text
    await sup.shutdown()


async def test_one_named_callers_failures_refuse_the_backend_to_it_alone() -> None:
    """A caller can make a backend time out with its own arguments (a long-running operation, a heavy
    query): while others use the backend, its failures alone refuse the backend to it, not to everyone."""
    sup = supervisor(["ok", "timeout", "timeout", "ok", "timeout", "timeout"], failures=2)
    await sup.start(wait_s=2)
    mallory = CallContext(question="q", intent="general", principal="mallory")
    alice = CallContext(question="q", intent="general", principal="alice")
    assert (await sup.call(TOOL, {}, 30.0, alice)).ok
    for _ in range(2):
        assert (await sup.call(TOOL, {}, 30.0, mallory)).error_kind is ErrorKind.BACKEND_TIMEOUT
    assert sup.status().health == "healthy"
    assert (await sup.call(TOOL, {}, 30.0, alice)).ok  # the backend still serves everyone else
    refused = await sup.call(TOOL, {}, 30.0, mallory)
    assert not refused.sent and "refused to 'mallory'" in (refused.error or "") and "other callers" in refused.error
    # Failures of two callers are the backend's: it is ejected for everyone.
    await asyncio.sleep(0.06)
    assert (await sup.call(TOOL, {}, 30.0, mallory)).error_kind is ErrorKind.BACKEND_TIMEOUT
    assert sup.status().health == "healthy"
    assert (await sup.call(TOOL, {}, 30.0, alice)).error_kind is ErrorKind.BACKEND_TIMEOUT
    assert sup.status().health == "ejected"
    await sup.shutdown()


async def test_the_only_callers_failures_eject_the_backend_until_another_caller_comes() -> None:
    """As without keys while it is the only caller; but the ejection rests on its word alone, so another
    caller's call still goes, probes, and ends it for everyone but the first."""
    sup = supervisor(["timeout", "timeout", "ok", "ok"], failures=2, ejection_s=60)
    await sup.start(wait_s=2)
    mallory = CallContext(question="q", intent="general", principal="mallory")
    alice = CallContext(question="q", intent="general", principal="alice")
    for _ in range(2):
        assert (await sup.call(TOOL, {}, 30.0, mallory)).error_kind is ErrorKind.BACKEND_TIMEOUT
    status = sup.status()
    assert status.health == "ejected" and status.available_to("alice") and not status.available_to("mallory")
    assert (await sup.call(TOOL, {}, 30.0, alice)).ok
    assert sup.status().health == "healthy" and sup.status().ejected_by is None
    refused = await sup.call(TOOL, {}, 30.0, mallory)
    assert not refused.sent and "refused to 'mallory'" in (refused.error or "")
    assert (await sup.call(TOOL, {}, 30.0, alice)).ok
    await sup.shutdown()


async def test_a_timeout_that_had_the_backends_whole_timeout_but_routings_moment_is_the_backends() -> None:
    """With the defaults the request's deadline equals the backend's timeout: once routing took its few
    milliseconds the call has a moment less than the timeout, and a hang must still count."""
    sup = supervisor(["timeout"], timeout_s=30)
    await sup.start(wait_s=2)
    assert (await call(sup, timeout_s=29.99)).error_kind is ErrorKind.BACKEND_TIMEOUT
    assert sup.status().health == "ejected"
    await sup.shutdown()


async def test_an_unexpected_exception_is_a_backend_failed_outcome_that_releases_the_call_slot() -> None:
    sup = supervisor(["boom", "ok"])
    await sup.start(wait_s=2)
    failed = await call(sup)
    assert not failed.ok and failed.error_kind is ErrorKind.BACKEND_FAILED
    assert "KeyError" in (failed.error or "") and "adapter" not in (failed.error or "")  # the type, not the text
    assert sup.status().inflight == 0
    await asyncio.sleep(0.06)  # the one-failure ejection runs out; the next call is the probe
    assert (await call(sup)).ok  # the only slot (max_concurrency 1) was given back
    await sup.shutdown()


async def test_a_half_open_probe_that_raises_unexpectedly_does_not_leave_the_backend_refusing_calls() -> None:
    sup = supervisor(["boom", "boom", "ok"])
    await sup.start(wait_s=2)
    assert not (await call(sup)).ok  # ejected after one failure
    await asyncio.sleep(0.06)
    probe = await call(sup)  # the probe: the backend raises something unexpected
    assert not probe.ok and probe.error_kind is ErrorKind.BACKEND_FAILED
    refused = await call(sup)  # ejected again, for a while
    assert refused.error_kind is ErrorKind.BACKEND_UNAVAILABLE and "ejected" in (refused.error or "")
    assert not refused.sent and not refused.may_have_acted  # refused before sending: another backend may act
    for _ in range(50):  # the next probe goes through once the (doubled) ejection is over
        await asyncio.sleep(0.05)
        outcome = await call(sup)
        if outcome.ok:
            break
    assert outcome.ok and sup.status().health == "healthy"
    await sup.shutdown()


async def test_an_idle_backend_is_checked_at_the_idle_interval_and_a_called_one_at_every_interval() -> None:
    sup = supervisor(["ok"] * 100, health_interval_s=0.05, health_idle_interval_s=0.6)
    checks: list[float] = []

    async def health(timeout_s: float) -> None:
        checks.append(asyncio.get_running_loop().time())

    sup.backend.health = health  # type: ignore[method-assign]
    await sup.start(wait_s=2)
    await asyncio.sleep(0.5)
    assert checks == []  # idle: nobody pinged it for nothing
    for _ in range(8):  # in use: checked at every interval again
        assert (await call(sup)).ok
        await asyncio.sleep(0.05)
    assert len(checks) >= 3
    await sup.shutdown()


async def test_health_intervals_are_jittered_so_backends_started_together_do_not_check_together() -> None:
    sup = supervisor(["ok"] * 100, health_interval_s=0.02)
    slept: list[float] = []
    sleep = sup._sleep

    async def recorded(seconds: float) -> None:
        slept.append(seconds)
        await sleep(seconds)

    sup._sleep = recorded  # type: ignore[method-assign]
    await sup.start(wait_s=2)
    await asyncio.sleep(0.5)
    await sup.shutdown()
    assert len(slept) >= 10 and all(0.018 <= s <= 0.022 for s in slept)
    assert len(set(slept)) == len(slept)  # no two intervals alike


def test_an_answers_size_is_its_utf8_bytes_counted_once() -> None:
    # An MCP answer's text is made from its content blocks: counting both, or JSON's \u escapes, would refuse
    # a non-ASCII answer far below the limit.
    words = "東京" * 1000  # 6,000 bytes in UTF-8
    blocks = ({"type": "text", "text": words},)
    outcome = CallOutcome(backend="b", capability="t", ok=True, latency_ms=1.0, text=words, content=blocks)
    assert 6000 < outcome.answer_size() < 6100
    assert CallOutcome(backend="b", capability="t", ok=True, latency_ms=1.0, text=words).answer_size() == 6000


async def test_a_relayed_probe_whose_client_leaves_at_its_error_does_not_leave_the_backend_refusing_calls() -> None:
    class TimingOut(ScriptedBackend):
        async def relay(self, method: str, params: dict[str, Any], *, timeout_s: float,
                        log_level: str | None = None) -> AsyncIterator[dict[str, Any]]:
            raise BackendTimeout("no answer")
            yield {}  # a generator, as the real relay is

    sup = supervisor(["boom", "ok"])
    sup.backend = TimingOut(["boom", "ok"])  # type: ignore[assignment]
    await sup.start(wait_s=2)
    assert not (await call(sup)).ok  # ejected after one failure
    await asyncio.sleep(0.06)
    events = sup.relay("tools/call", {}, 5.0)
    assert (await anext(events))["event"] == "error"  # the probe failed; its client is gone before reading on
    await events.aclose()
    for _ in range(50):  # the next probe goes through once the ejection is over
        await asyncio.sleep(0.05)
        if (outcome := await call(sup)).ok:
            break
    assert outcome.ok and sup.status().health == "healthy"
    await sup.shutdown()


async def test_the_wait_for_a_restarting_backends_first_connection_is_part_of_the_calls_time() -> None:
    class SlowToConnect(ScriptedBackend):
        async def connect(self) -> None:
            await asyncio.sleep(0.5)

    sup = supervisor(["time-left"])
    sup.backend = SlowToConnect(["time-left"])  # type: ignore[assignment]
    answer = await call(sup, timeout_s=5.0)  # reaches the backend while it connects
    assert answer.ok and float(answer.text or "") < 4.6  # what the wait left of its five seconds
    await sup.shutdown()


async def test_a_ping_unanswered_while_a_call_runs_keeps_the_session_the_call_needs() -> None:
    # the check closed the session: the call, which would have answered, failed as one that may have acted
    sup = supervisor([], health_interval_s=0.05, health_idle_interval_s=0.05)
    closed: list[bool] = []
    checked = asyncio.Event()

    async def busy(timeout_s: float) -> None:
        checked.set()
        raise BackendTimeout("backend 'flaky' did not answer a health check within 0.1 s")

    async def close() -> None:
        closed.append(True)

    async def long_call(capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                        context: CallContext) -> CallOutcome:
        await asyncio.wait_for(checked.wait(), 5)
        await asyncio.sleep(0.05)
        return CallOutcome(backend="flaky", capability=capability.name, ok=True, latency_ms=1.0, text="done")

    await sup.start(wait_s=2)
    sup.backend.health, sup.backend.close, sup.backend.call = busy, close, long_call  # type: ignore[method-assign]
    outcome = await call(sup)
    assert outcome.ok and closed == []
    await sup.shutdown()


async def test_calls_waiting_for_a_starting_backend_are_bounded_as_calls_waiting_for_a_slot() -> None:
    # they held no slot nor waiting place: a slow handshake filled the host's places its other backends need
    class SlowToConnect(ScriptedBackend):
        async def connect(self) -> None:
            await asyncio.sleep(0.5)

    sup = supervisor(["ok"] * 100)
    sup.backend = SlowToConnect(["ok"] * 100)  # type: ignore[assignment]
    sup._slots.max_waiting = 3
    outcomes = await asyncio.gather(*(call(sup, timeout_s=5.0) for _ in range(5)))
    refused = [o for o in outcomes if not o.ok]
    assert len(refused) == 2 and all(not o.sent and "is starting" in (o.error or "") for o in refused)
    await sup.shutdown()
