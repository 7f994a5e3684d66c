"""plan: the calls a request makes, in order, with their arguments; or the refusal that answers it.

Refusals are values (`Plan.refusal`), not exceptions: no candidate confident enough (404 with the
closest candidates), too close to call (409), a chosen backend that is down (503), or a best match
whose required arguments the question does not give (422 naming the tool and its schema). Only
candidates whose confidence reaches `routing.min_confidence` are ever planned, so neither a runner-up
in fallback nor a stand-in for a tool that lacks its arguments is a weaker, unlikely match. Down and
ejected backends are left out while any candidate is up; when none is, the least bad ones are
still planned, forced past their ejection, rather than failing without trying.
"""

from __future__ import annotations

from collections.abc import Mapping

from router.arguments import derive_arguments
from router.config import RouterSettings
from router.errors import AmbiguousRoute, ArgumentsRequired, BackendUnavailable, NoRelevantBackend, RouterError
from router.models import Mode, QueryRequest
from router.values import BackendStatus, Candidate, Decision, Plan, PlannedCall


def plan(decision: Decision, request: QueryRequest, statuses: Mapping[str, BackendStatus],
         settings: RouterSettings) -> Plan:
    mode: Mode = request.mode or settings.resilience.default_mode
    refusal = _refusal(decision, request, statuses)
    if refusal is not None:
        return Plan(calls=(), mode=mode, refusal=refusal)
    calls, missing = planned_calls(decision, request, statuses)
    if missing is not None:
        # The best match needs arguments the question does not give. A confident runner-up that is almost
        # as relevant and can be called with what the question says is preferred; otherwise 422.
        best = next(c for c in decision.candidates if c.relevant or request.backend).scores.composite
        if not calls or calls[0].candidate.scores.composite < best - settings.routing.callable_margin:
            return Plan(calls=tuple(calls), mode=mode, refusal=missing)
    return Plan(calls=tuple(calls), mode=mode)


def planned_calls(decision: Decision, request: QueryRequest, statuses: Mapping[str, BackendStatus],
                  skip: Candidate | None = None) -> tuple[list[PlannedCall], ArgumentsRequired | None]:
    """The callable candidates in order, and the best one's missing arguments, if it has any."""
    eligible = [c for c in decision.candidates if c.relevant and c is not skip]
    if not eligible and request.backend and skip is None:
        eligible = list(decision.candidates[:1])  # the caller chose the backend: its best match, even if weak
    up = [c for c in eligible if c.capability.backend not in statuses or statuses[c.capability.backend].available]
    force = not up
    if up and not (request.backend and not request.fallback_on_override):
        eligible = up
    calls: list[PlannedCall] = []
    missing: ArgumentsRequired | None = None
    for i, cand in enumerate(eligible):
        derived = derive_arguments(cand.capability, request.question, request.arguments)
        if isinstance(derived, ArgumentsRequired):
            if i == 0 and skip is None:
                missing = derived
            continue  # a candidate that cannot take the question is skipped, never guessed at
        args, source = derived
        calls.append(PlannedCall(candidate=cand, arguments=args, arguments_source=source, force=force))
    return calls, missing


def _refusal(d: Decision, request: QueryRequest, statuses: Mapping[str, BackendStatus]) -> RouterError | None:
    closest = [c.info(i + 1).model_dump() for i, c in enumerate(d.candidates[:3])]
    if not d.candidates:
        return NoRelevantBackend("no backend offers anything to route to" if not request.backend else
                                 f"backend {request.backend!r} has nothing to call", candidates=[])
    if d.verdict == "no_match":
        return NoRelevantBackend(d.message + "; closest candidates listed", candidates=closest)
    if d.verdict == "ambiguous":
        return AmbiguousRoute(d.message, candidates=closest[:2])
    if request.backend and not request.fallback_on_override:
        status = statuses.get(request.backend)
        if status is not None and not status.available:
            return BackendUnavailable(
                f"backend {request.backend!r} is {status.health}"
                + (f" ({status.last_error})" if status.last_error else "")
                + "; set fallback_on_override to let the router pick another", backend=request.backend)
    return None
