"""respond: what a request answers with: the response and its routing metadata, or the error that
names what failed (specific for one attempt, the whole chain otherwise).

The response cache wraps this stage: an answer of a read-only capability is kept per (question, intent,
backends) and served, marked `cached`, only when every backend a request would call is unavailable (an
action's answer is never replayed: it would say something was done that was not).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from router.cache import LRU
from router.errors import (
    AllBackendsFailed,
    BackendFailed,
    BackendTimeout,
    BackendUnavailable,
    DeadlineExceeded,
    ErrorKind,
    RateLimited,
    RouterError,
    ToolFailed,
    error_of_kind,
)
from router.models import QueryResponse, RoutingMetadata
from router.request import Request
from router.settings import ResilienceSettings
from router.strategies import StrategyResult
from router.values import BackendStatus, Decision, Plan, PlannedCall


def failure_error(result: StrategyResult) -> RouterError:
    """The error a request whose every attempt failed answers with: specific for one attempt, and saying
    why no other candidate was tried when one may not be."""
    error = _chain_error(result)
    if result.not_retried:
        error = type(error)(f"{error.message}; {result.not_retried}", **error.details)
    return error


# The failures of a lone attempt that keep their own kind rather than becoming `backend_failed`.
_OWN_KINDS = frozenset({ErrorKind.BACKEND_REJECTED_ARGUMENTS, ErrorKind.BACKEND_UNAUTHORIZED, ErrorKind.FLOW_NOT_FOUND,
                        ErrorKind.ANSWER_TOO_LARGE, ErrorKind.BACKEND_NOT_CALLABLE, ErrorKind.INVALID_REQUEST})


def _chain_error(result: StrategyResult) -> RouterError:
    chain = [a.model_dump() for a in result.attempts]
    if result.attempts and all(a.error_type == ErrorKind.RATE_LIMITED for a in result.attempts):
        return RateLimited(result.attempts[0].error or "over the backend-call rate", retry_after_s=1)
    if not result.attempts:
        # Nothing failed upstream: the request's own deadline ran out while it was being routed.
        return DeadlineExceeded("the request deadline passed before any backend could be tried; "
                                "deadline_s is too short", attempts=chain)
    if all(a.error_type == ErrorKind.DEADLINE_EXCEEDED for a in result.attempts):
        # Every attempt was cut short by the request's deadline, not by a backend's own timeout.
        names = ", ".join(f"{a.backend}/{a.capability}" for a in result.attempts)
        one = result.attempts[0] if len(result.attempts) == 1 else None
        return DeadlineExceeded(f"the request deadline passed before {names} answered: {result.attempts[-1].error}",
                                backend=one and one.backend, tool=one and one.capability, attempts=chain)
    if len(result.attempts) == 1:
        a = result.attempts[0]
        where = f"backend {a.backend!r}, tool {a.capability!r}"
        if a.outcome == "timeout":
            return BackendTimeout(f"{where} timed out: {a.error}", backend=a.backend, tool=a.capability,
                                  attempts=chain)
        if a.outcome == "unavailable":
            return BackendUnavailable(f"{where} is unavailable: {a.error}", backend=a.backend,
                                      tool=a.capability, attempts=chain)
        if a.error_type == ErrorKind.TOOL_FAILED:
            return ToolFailed(f"{where} reported an error: {a.error}", backend=a.backend,
                              tool=a.capability, attempts=chain)
        if a.error_type in _OWN_KINDS:
            # Its own kind and status: rejected arguments are the caller's 422, an answer too large a 502 saying so.
            return error_of_kind(ErrorKind(a.error_type), f"{where}: {a.error}", backend=a.backend,
                                 tool=a.capability, attempts=chain)
        return BackendFailed(f"{where} failed: {a.error}", backend=a.backend, tool=a.capability,
                             attempts=chain)
    names = ", ".join(f"{a.backend}/{a.capability} ({a.outcome})" for a in result.attempts)
    return AllBackendsFailed(f"every attempt failed: {names}", attempts=chain)


def routing_metadata(d: Decision, started: float, result: StrategyResult | None, req: Request,
                     call: PlannedCall | None, stages: dict[str, float] | None = None) -> RoutingMetadata:
    chosen = None
    if call is not None:
        chosen = next((c.info(i + 1) for i, c in enumerate(d.candidates) if c is call.candidate), None)
    attempts = result.attempts if result else []
    return RoutingMetadata(
        intent=d.intent, intent_source=d.analysis.intent_source, intent_scores=d.analysis.intent_scores,
        method=d.method, mode=req.mode, decision=d.kind, chosen=chosen,
        confidence=chosen.scores.confidence if chosen else None,
        candidates=[c.info(i + 1) for i, c in enumerate(d.candidates)], attempts=attempts,
        fallbacks_used=max(0, sum(a.outcome != "cancelled" for a in attempts) - 1) if req.mode == "fallback" else 0,
        arguments=call.arguments if call else None, arguments_source=call.arguments_source if call else None,
        decision_ms=d.decision_ms,
        execution_ms=round(result.outcome.latency_ms, 2) if result and result.outcome else 0.0,
        total_ms=round((time.monotonic() - started) * 1000, 2), session_id=req.session_id,
        request_id=req.request_id,
        agreement=result.agreement if result else None, answers=result.answers if result else None,
        disagreed=result.disagreed if result else None, stages_ms=stages or {},
    )


def respond(result: StrategyResult, d: Decision, started: float, req: Request,
            stages: dict[str, float] | None = None) -> QueryResponse | RouterError:
    """The answer of the attempt that won, with its routing metadata; the failure's error otherwise.
    `stages`: each stage's milliseconds so far; this one's own time is the request's remainder."""
    if result.outcome is None or result.call is None:
        return failure_error(result)
    o, call = result.outcome, result.call
    if stages is not None:
        stages["respond"] = max(0.0, round((time.monotonic() - started) * 1000 - sum(stages.values()), 3))
    meta = routing_metadata(d, started, result, req, call, stages)
    # The caller's session as it named it; a session a flow platform started, as the platform named it.
    session = req.session_id if o.session_id in (None, req.session) else o.session_id
    return QueryResponse(answer=o.text, backend=o.backend, capability=o.capability, kind=call.capability.kind,
                         content=list(o.content), structured=o.structured, session_id=session,
                         routing=meta if req.include_routing_metadata else None)


def cached_response(cached: QueryResponse, d: Decision, started: float, req: Request) -> QueryResponse:
    """A cached answer served because every candidate backend is down, marked as cached."""
    meta = routing_metadata(d, started, None, req, None).model_copy(
        update={"cached": True, "chosen": cached.routing.chosen if cached.routing else None})
    return cached.model_copy(update={"routing": meta if req.include_routing_metadata else None,
                                     "session_id": req.session_id})


CacheKey = tuple[str, str, str, frozenset[tuple[str, str, str]]]


class ResponseCache:
    """The last answer per (principal, question, intent, calls), served only when every backend those calls
    go to is down. A call is its backend, capability and arguments: an answer never stands in for another
    tool's or other arguments' answer, and never crosses principals."""

    def __init__(self, settings: ResilienceSettings) -> None:
        self._answers: LRU[CacheKey, QueryResponse] = LRU(settings.response_cache_size,
                                                          ttl_s=settings.response_cache_ttl_s, fair=True)

    @staticmethod
    def key(request: Request, d: Decision, plan: Plan) -> CacheKey:
        calls = frozenset((c.backend, c.capability.name, json.dumps(c.arguments, sort_keys=True, default=str))
                          for c in plan.calls)
        principal = request.access.principal.name if request.access is not None else ""
        return (principal, " ".join(request.question.lower().split()), d.intent, calls)

    def lookup(self, key: CacheKey, statuses: Mapping[str, BackendStatus],
               principal: str | None = None) -> QueryResponse | None:
        """The answer kept for `key`, when none of its backends is available to `principal`."""
        backends = {backend for backend, _, _ in key[3]}
        if not all(b in statuses and not statuses[b].available_to(principal) for b in backends):
            return None
        return self._answers.get(key)

    def store(self, key: CacheKey, response: QueryResponse) -> None:
        self._answers.put(key, response, owner=key[0])  # one caller's many answers push out only its own
