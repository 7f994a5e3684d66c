"""plan: the calls a request makes, in order, with their arguments; or the refusal that answers it.

Refusals are values (`Plan.refusal`), not exceptions: no candidate confident enough (404 with the
closest candidates), too close to call or which of a backend's tools (409), a chosen backend that is
down (503), or a best match whose required arguments the question does not give (422 naming the tool
and its schema). Only candidates whose confidence reaches `routing.min_confidence` (and whose tool
confidence reaches `min_tool_confidence`) are ever planned, so neither a runner-up in fallback nor a
stand-in for a tool that lacks its arguments is a weaker, unlikely match. Before planning,
`settle_by_arguments` (settle.py) tells which of the candidates is meant. Down and
ejected backends are left out while any candidate is up; when none is, the least bad ones are
still planned, forced past their ejection, rather than failing without trying.
"""

from __future__ import annotations

from collections.abc import Mapping

from router.errors import (
    AmbiguousRoute,
    ArgumentsRequired,
    BackendUnavailable,
    NoRelevantBackend,
    RouterError,
)
from router.schemas import properties_of
from router.settings import RouterSettings, RoutingSettings
from router.stages.arguments import Derived
from router.stages.decide import below, tool_contenders, unclear_tool_message
from router.stages.serving import (
    ACTS,
    DATED,
    EITHER_WAY,
    LEFT,
    NOT_NOW,
    READS_ONLY,
    TODAY,
    UNTAKEN,
    Arguments,
    readable,
)
from router.stages.settle import FOR_A_CHANGE, FOR_READING, NAMED
from router.stages.written import takes_paths
from router.values import BackendStatus, Candidate, Capability, Decision, Plan, PlannedCall


def plan(decision: Decision, arguments: Arguments, statuses: Mapping[str, BackendStatus],
         settings: RouterSettings) -> Plan:
    request = arguments.request
    if not (request.backend or request.tool or readable(decision.analysis.question)):
        return Plan(calls=(), mode=request.mode, refusal=NoRelevantBackend(
            "the question has no word and no number to route by", candidates=[],
            request_id=request.request_id if decision.candidates else None))  # only a remembered one
    refusal = _refusal(decision, arguments, statuses, settings)
    if refusal is not None:
        return Plan(calls=(), mode=request.mode, refusal=refusal)
    calls, missing = planned_calls(decision, arguments, statuses)
    if (not calls and missing is None) or (calls and _passes_by_far(decision, calls[0], arguments, settings.routing)):
        return Plan(calls=(), mode=request.mode, refusal=_unserved(decision, arguments))
    if missing is not None:
        # The best match needs arguments the question does not give. A confident runner-up that is almost
        # as relevant and can be called with what the question says is preferred; otherwise 422. A held tool
        # was meant: only a copy of it as approved (the same tool on another backend) may answer for it.
        best = next(c for c in decision.candidates if c.relevant or request.backend)
        margin = settings.routing.callable_margin
        stand_in = calls[0].candidate.capability if calls else None
        if stand_in is None or calls[0].candidate.scores.composite < best.scores.composite - margin \
                or (best.capability.held and not stand_in.same_as(best.capability)) \
                or (stand_in.read_only and not best.capability.read_only):  # a reader is no stand-in for an action
            return Plan(calls=tuple(calls), mode=request.mode, refusal=missing)
    return Plan(calls=tuple(calls), mode=request.mode)


def _passes_by_far(d: Decision, first: PlannedCall, arguments: Arguments, routing: RoutingSettings) -> bool:
    """Whether the call passes by a best match that cannot serve the question for one much less relevant: a
    guess at what was meant (a currency question is no unit conversion because the converter of its closest
    backend takes none). Within `callable_margin` it stands, as for a best match that needs unknown arguments."""
    if arguments.request.backend or arguments.request.tool:
        return False
    best = next((c for c in d.candidates if c.relevant), None)
    return best is not None and best is not first.candidate and arguments.doubt(best) is not None and \
        first.candidate.scores.composite < best.scores.composite - routing.callable_margin


def planned_calls(decision: Decision, arguments: Arguments, statuses: Mapping[str, BackendStatus],
                  skip: Candidate | None = None) -> tuple[list[PlannedCall], ArgumentsRequired | None]:
    """The callable candidates in order, and the best one's missing arguments, if it has any."""
    request = arguments.request
    eligible = [c for c in decision.candidates if c.relevant and c is not skip]
    head = decision.candidates[0] if decision.candidates else None
    if request.backend and skip is None and head is not None and head.capability.backend == request.backend \
            and all(c is not head for c in eligible):
        eligible.insert(0, head)  # the caller chose the backend: its best match, even if weak, before any fallback
    up = [c for c in eligible
          if c.capability.backend not in statuses or statuses[c.capability.backend].available_to(request.principal)]
    force = not up
    if up and not (request.backend and not request.fallback_on_override):
        eligible = up
    calls: list[PlannedCall] = []
    missing: ArgumentsRequired | None = None
    # A tool that cannot take the kind of value the question gives is not called, however close it is.
    eligible = [c for c in eligible if arguments.doubt(c) is None]
    for i, cand in enumerate(eligible):
        derived = arguments.of(cand.capability)
        if isinstance(derived, tuple) and not cand.capability.read_only and \
                (paths := paths_taken(cand.capability, derived)):
            derived = ArgumentsRequired(
                f"tool {cand.capability.name!r} of backend {cand.capability.backend!r} may change something, and "
                f"would act on the path {derived[0][paths[0]]!r} taken from the question for {paths[0]!r}: which "
                "path a change acts on is the caller's to say; pass `arguments`", backend=cand.capability.backend,
                tool=cand.capability.name, missing=paths[0], input_schema=cand.capability.input_schema)
        if isinstance(derived, ArgumentsRequired):
            if i == 0 and skip is None:
                missing = derived
            continue  # a candidate that cannot take the question is skipped, never guessed at
        args, source = derived
        calls.append(PlannedCall(candidate=cand, arguments=args, arguments_source=source, force=force))
    return calls, missing


def _refusal(d: Decision, arguments: Arguments, statuses: Mapping[str, BackendStatus],
             settings: RouterSettings) -> RouterError | None:
    request = arguments.request
    def closest() -> list[dict]:  # built only for a refusal: most requests make none
        return [c.info(i + 1).model_dump() for i, c in enumerate(d.candidates[:3])]

    if not d.candidates:
        return NoRelevantBackend("no backend offers anything to route to" if not request.backend else
                                 f"backend {request.backend!r} has nothing to call", candidates=[])
    # A question the router declines or asks about names its request: the caller may still say what should
    # have answered (POST /v1/feedback).
    if d.verdict == "no_match":
        return NoRelevantBackend(d.message + "; closest candidates listed", candidates=closest(),
                                 request_id=request.request_id)
    if d.verdict == "ambiguous":
        first = next((c for c in d.candidates if c.contending), None)
        if first is not None and first.unsure_action:  # whether to act at all
            if arguments.doubt(first) in (ACTS, EITHER_WAY):  # however likely, it would not be called: say why
                return _unserved(d, arguments, first)
            return AmbiguousRoute(d.message, candidates=closest(), request_id=request.request_id)
        if first is not None and first.unclear_tool:  # which of one backend's tools
            # Those that could serve the question: the memory's readers are no choice for "Remember that ...".
            listed = tool_contenders(first, d.candidates)
            if first.placed in (FOR_A_CHANGE, FOR_READING, NAMED):  # the decision's message names them
                tools, asked = tool_contenders(first, [c for c in d.candidates if c.placed == first.placed]), True
            else:
                tools = tool_contenders(first, [c for c in d.candidates if arguments.may_serve(c)]) or listed
                asked = tools == listed
            message = d.message if asked else unclear_tool_message(first, tools, settings.routing.min_tool_confidence)
            return AmbiguousRoute(message, request_id=request.request_id,
                                  candidates=[c.info(i + 1).model_dump() for i, c in enumerate(tools)])
        return AmbiguousRoute(d.message, candidates=_too_close_pair(d), request_id=request.request_id)
    if request.backend and not request.fallback_on_override:
        status = statuses.get(request.backend)
        if status is not None and not status.available_to(request.principal):
            return BackendUnavailable(
                f"backend {request.backend!r} is {status.health}"
                + (f" ({status.last_error})" if status.last_error else "")
                + "; set fallback_on_override to let the router pick another", backend=request.backend)
    return None


def _too_close_pair(d: Decision) -> list[dict]:
    """The two choices a "too close to call" compared: the first, and the first that is not a copy of it."""
    ranked = list(enumerate(d.candidates, 1))
    relevant = [(i, c) for i, c in ranked if c.relevant] or ranked
    first = relevant[0][1]
    other = next(((i, c) for i, c in relevant if not c.capability.same_as(first.capability)), None)
    return [c.info(i).model_dump() for i, c in (relevant[0], *([other] if other else []))]


def _unserved(d: Decision, arguments: Arguments, closest: Candidate | None = None) -> RouterError:
    """Nothing that fits can serve the question: the router declines rather than call a tool that cannot do
    it (a unit converter asked for currencies, a reader asked to remember whose backend has nothing else that
    fits; when it has, settling asked which of those tools)."""
    closest = closest or next((c for c in d.candidates if c.relevant), d.candidates[0] if d.candidates else None)
    why = arguments.doubt(closest) if closest is not None else None
    if closest is not None and why == READS_ONLY:
        message = (f"the question asks to {arguments.change} something, and no capability that fits it may change "
                   f"anything: the closest, {closest.capability.key}, only reads")
    elif closest is not None and why == ACTS:
        message = (f"the question only asks ({arguments.read!r}), and the closest, {closest.capability.key}, may "
                   "change something: it is not called for a question; name it to call it anyway")
    elif closest is not None and why == EITHER_WAY:
        message = (f"the question asks to {arguments.one_way}, and the closest, {closest.capability.key}, switches "
                   "whichever way things are now, which the router cannot see: it could do the opposite; name it to "
                   "call it anyway")
    elif closest is not None and why == DATED:
        message = (f"the question gives a date, and the closest, {closest.capability.key}, converts a time as of "
                   f"today: on that date {arguments.off_by(closest.capability)}; it is not called")
    elif closest is not None and why == NOT_NOW:
        message = (f"the question asks about another time than now, and the closest, {closest.capability.key}, tells "
                   "the time now: it is not called")
    elif closest is not None and why == TODAY:
        message = (f"the question asks about another day, and the closest, {closest.capability.key}, answers as of "
                   "now: it is not called")
    elif closest is not None and why == LEFT:
        left = ", ".join(repr(v) if isinstance(v, str) else f"{v:g}" for v in arguments.left[closest.capability.key])
        message = (f"the question also gives {left}, which the closest, {closest.capability.key}, would leave unused: "
                   "it would answer only part of the question")
    elif closest is not None and why == UNTAKEN:
        unmatched = ", ".join(repr(w) for w in arguments.unmatched[closest.capability.key])
        weak = below(closest.scores.confidence, arguments.min_untaken_confidence, "routing.min_action_confidence")
        message = (f"the closest, {closest.capability.key}, {arguments.takes_little(closest.capability)}, and nothing "
                   f"it says is about {unmatched}: at confidence {weak} it is not called; name it to call it anyway")
    else:
        kinds = "; ".join(f"{kind} ({', '.join(values)})" for kind, values in arguments.kinds.items())
        near = f": the closest, {closest.capability.key}, does not say it does" if closest is not None else ""
        message = f"the question gives values of a kind no capability that fits it takes, {kinds}{near}"
    return NoRelevantBackend(message,
                             candidates=[c.info(i + 1).model_dump() for i, c in enumerate(d.candidates[:3])],
                             request_id=arguments.request.request_id)


def paths_taken(cap: Capability, derived: Derived) -> list[str]:
    """The parameters a call derived from the question took a path for. A tool that may act is not called so:
    which path a request to change files acts on, and in which role, is more than a path's shape tells ("Remove
    old logs from /var/log" names the folder they are in; "Copy into /backup the file /etc/hosts" the destination
    first). Its derivation still counts them, so that a reader is not put in its place for taking the path."""
    if isinstance(derived, ArgumentsRequired) or not derived[1].startswith("extracted"):
        return []
    props = properties_of(cap.input_schema)
    return [n for n in derived[0] if takes_paths(n, props.get(n, {}))]
