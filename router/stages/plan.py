"""plan: the calls a request makes, in order, with their arguments; or the refusal that answers it.

Refusals are values (`Plan.refusal`), not exceptions: no candidate confident enough (404 with the
closest candidates), too close to call or which of a backend's tools (409), a chosen backend that is
down (503), or a best match whose required arguments the question does not give (422 naming the tool
and its schema). Only candidates whose confidence reaches `routing.min_confidence` (and whose tool
confidence reaches `min_tool_confidence`) are ever planned, so neither a runner-up in fallback nor a
stand-in for a tool that lacks its arguments is a weaker, unlikely match. Before planning,
`settle_by_arguments` lets the question's values tell a backend's close tools apart. Down and
ejected backends are left out while any candidate is up; when none is, the least bad ones are
still planned, forced past their ejection, rather than failing without trying.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from router.errors import (
    AmbiguousRoute,
    ArgumentsRequired,
    BackendUnavailable,
    NoRelevantBackend,
    RouterError,
)
from router.schemas import properties_of
from router.settings import RouterSettings, RoutingSettings
from router.stages.argument_order import words_for
from router.stages.arguments import AS_NAMED, NONE_NEEDED, Derived
from router.stages.decide import below, named_tools, too_close, tool_contenders, unclear_tool_message
from router.stages.serving import (
    ACTS,
    DATED,
    EITHER_WAY,
    LEFT,
    NOT_NOW,
    READS_ONLY,
    UNTAKEN,
    Arguments,
    readable,
)
from router.stages.written import takes_paths, words_of
from router.values import BackendStatus, Candidate, Capability, Decision, Plan, PlannedCall

FOR_A_CHANGE = "the question asks for a change, and its backend's best match only reads"  # `placed` of the others
FOR_READING = "the question only asks, and its backend's best match may change something"  # `placed` of its readers
A_READING_CALL = "it may change something, and the action its call is given only reads"
WIDER = "it reads as the closest does, taking every value of the question the closest takes, and more of them"


def settle_by_arguments(d: Decision, arguments: Arguments, settings: RouterSettings) -> Decision:
    """Which of the best backend's tools, told by the values the question gives. When the best tool is
    unclear, or clear but unable to take the question, and exactly one of that backend's close tools has
    every required argument extracted from the question by its shape (a time zone from a city, an enum
    value, numbers, a time of day), that tool goes first. When the best tool takes the question, a close
    tool that takes more of its values goes first ("9am in London" gives a time and a second place that
    the current time of one place leaves unused). A free-text slot or no parameter at all fits any
    question, so it settles nothing ("Remember that ..." is not a search); but a request to change something
    whose best match only reads asks which of that backend's other tools was meant, and a question that only
    asks whose best match may change something goes to a reader (or asks which). Settling says which tool,
    not whether to act: a tool that may change something is still called only when it is likely enough to be
    the one meant (its backend's confidence times its tool confidence), as the scorer asks of it."""
    if arguments.request.arguments is not None or d.kind == "override" or d.verdict == "no_match":
        return d
    first = next((c for c in d.candidates if c.contending), None)
    if first is None or first.capability.held:  # a held tool was meant: no sibling answers for it
        return d
    why = arguments.doubt(first)
    if why == READS_ONLY:
        return _writers_for_a_change(d, first, arguments)
    if first.unsure_action and arguments.reads(first.capability):
        return _a_reading_call(d, first, settings.routing)
    if why == ACTS or (arguments.read is not None and first.unsure_action):
        return _readers_for_a_question(d, first, arguments, settings.routing)
    close = [c for c in d.candidates if c.capability.backend == first.capability.backend and c.contending
             and c.scores.composite >= first.scores.composite - settings.routing.callable_margin
             and arguments.doubt(c) in (None, DATED)]  # the tool the values settle on is the one a date rules out
    # A path settles a choice only when the first tool takes none: a spreadsheet server's tools all take the file.
    paths = not any(takes_paths(n, spec) for n, spec in properties_of(first.capability.input_schema).items())
    taken = {c.capability.key: values_taken(c.capability, arguments.of(c.capability), paths, first.capability,
                                            arguments.request.question) for c in close}
    if first.unclear_tool or isinstance(arguments.of(first.capability), ArgumentsRequired):
        fitting = [c for c in close if taken[c.capability.key]]
        chosen = fitting[0] if len(fitting) == 1 and (fitting[0] is not first or first.unclear_tool) else None
    else:
        most = max(taken.values(), default=0)
        best = [c for c in close if taken[c.capability.key] == most]
        chosen = best[0] if len(best) == 1 and most > taken.get(first.capability.key, 0) else None
    if chosen is None:
        return _to_a_wider_reader(d, first, arguments, settings.routing)
    guess = not chosen.capability.read_only and \
        chosen.scores.confidence * chosen.scores.tool_confidence < settings.routing.min_action_confidence
    placed = "the question's values: of the backend's close tools, it takes the most of them"
    settled = dataclasses.replace(chosen, relevant=not guess, unclear_tool=False, unsure_action=guess, placed=placed)
    rest = [c for c in d.candidates if c is not chosen]
    return dataclasses.replace(d, candidates=(settled, *rest), verdict="ambiguous" if guess else "route",
                               message=f"routed to {chosen.capability.backend}/{chosen.capability.name}: {placed}")


def _a_reading_call(d: Decision, first: Candidate, routing: RoutingSettings) -> Decision:
    """A tool that may change something, called with an action that only reads ("List the open tabs"): it acts on
    nothing, so it is held to the bars of a reader (its backend's confidence and its tool confidence, which it
    cleared), not to an action's. Too close to another likely candidate, it is still asked about."""
    settled = dataclasses.replace(first, relevant=True, unsure_action=False, placed=A_READING_CALL)
    rest = [c for c in d.candidates if c is not first]
    if too_close([settled, *(c for c in rest if c.relevant)], routing.ambiguity_margin):
        return d
    key = f"{first.capability.backend}/{first.capability.name}"
    return dataclasses.replace(d, candidates=(settled, *rest), verdict="route",
                               message=f"routed to {key}: {A_READING_CALL}")


def _writers_for_a_change(d: Decision, reader: Candidate, arguments: Arguments) -> Decision:
    """A request to change something ("Remember that Bob likes tea") whose best match only reads: the tools of
    that backend that may change something go first, and which of them is meant is asked (a configured LLM may
    choose). A backend without any keeps the decision, which the plan then declines."""
    writers = [c for c in d.candidates if c.capability.backend == reader.capability.backend
               and not c.capability.read_only and arguments.may_serve(c)]
    return _ask_which(d, reader, writers, FOR_A_CHANGE, f"asks to {arguments.change} something", "only reads",
                      "that may change something") if writers else d


def _readers_for_a_question(d: Decision, writer: Candidate, arguments: Arguments, routing: RoutingSettings) -> Decision:
    """A question that only asks ("List all entities in memory", "What is the log of 1000?") whose best match may
    change something (by its server's word, or not likely enough to act on): the best read-only candidate likely
    enough on its own answers ("log" drew the demo's logging switch above the calculator); failing one, the
    readers of that backend that fit are asked about. Readers the question does not fit are not offered, nor another
    backend's when the question names this one."""
    named = _names(arguments.request.question, writer.capability.backend)
    readers = [c for c in d.candidates if c.capability.read_only and arguments.may_serve(c)
               and c.scores.confidence >= routing.min_confidence
               and not (named and c.capability.backend != writer.capability.backend)]
    sure = [c for c in readers if c.relevant and arguments.doubt(c) is None]
    own = [c for c in readers if c.capability.backend == writer.capability.backend]
    # The closest reader, or one of its backend that takes more of the question; failing a sure one, of the
    # writer's backend ("Which files changed in the last commit?": the commit's reader, not the staged diff).
    clear = sure[0] if sure and not too_close(sure, routing.ambiguity_margin) else None
    closest = clear or (own[0] if own else None)
    reader = (_wider_reader(closest, readers, arguments, routing) if closest else None) or clear
    if reader is not None and closest is not None:  # reading is no guess
        rest = [c for c in d.candidates if c is not reader]
        wider = f"; of its readers, {reader.capability.name} takes more of the question's values than " \
                f"{closest.capability.name}" if reader is not closest else ""
        return dataclasses.replace(d, candidates=(dataclasses.replace(reader, relevant=True, placed=FOR_READING),
                                                  *rest), verdict="route",
                                   message=f"routed to {reader.capability.backend}/{reader.capability.name}: the "
                                   f"closest, {writer.capability.key}, may change something, and the question only "
                                   f"asks{wider}")
    return _ask_which(d, writer, own, FOR_READING, f"only asks ({arguments.read!r})", "may change something",
                      "that only read") if own else d


def _to_a_wider_reader(d: Decision, first: Candidate, arguments: Arguments, routing: RoutingSettings) -> Decision:
    """A best match that only reads, before a reader of its backend that takes more of the question: see
    `_wider_reader`."""
    if not (first.relevant and first.capability.read_only):
        return d
    wider = _wider_reader(first, d.candidates, arguments, routing)
    if wider is None:
        return d
    rest = [c for c in d.candidates if c is not wider]
    return dataclasses.replace(d, candidates=(dataclasses.replace(wider, relevant=True, placed=WIDER), *rest),
                               message=f"routed to {wider.capability.key}: {WIDER} ({first.capability.key})")


def _wider_reader(first: Candidate, candidates: Sequence[Candidate], arguments: Arguments,
                  routing: RoutingSettings) -> Candidate | None:
    """The one read-only tool of `first`'s backend, nearly as close (`callable_margin`), that takes every value of
    the question `first` takes and more of them: "the biggest file in /srv" is a listing of /srv by size, not the
    information of /srv; "the files changed in the last commit" are those of the commit the question names, which
    a diff of what is staged leaves unused. A tool the scorer gives little chance of being meant still reads, and
    the values say more of what was asked than its words did. Free text takes any question, so it widens nothing."""
    mine = _given(first.capability, arguments, first.capability)
    if mine is None:
        return None
    wider = [c for c in candidates if c is not first and c.capability.backend == first.capability.backend
             and c.capability.read_only and not c.capability.same_as(first.capability)
             and c.scores.confidence >= routing.min_confidence
             and c.scores.composite >= first.scores.composite - routing.callable_margin
             and arguments.doubt(c) is None and (theirs := _given(c.capability, arguments, first.capability))
             is not None and theirs > mine]
    return wider[0] if len(wider) == 1 else None


def _given(cap: Capability, arguments: Arguments, first: Capability) -> frozenset[str] | None:
    """The values a call takes from the question, as JSON, as `values_taken` counts them but for a thing's name
    (None: it takes the question as free text, or cannot take it)."""
    derived = arguments.of(cap)
    if isinstance(derived, ArgumentsRequired) or not (derived[1] == NONE_NEEDED or derived[1].startswith("extracted")):
        return None
    taken = _values_taken(cap, derived, first=first, question=arguments.request.question, names=True)
    return frozenset(json.dumps(v, sort_keys=True) for v in taken.values())


def _names(question: str, backend: str) -> bool:
    """Whether the question names the backend ("notion", "google_maps" as "Google Maps")."""
    words = r"[\s_-]+".join(map(re.escape, re.split(r"[\s_-]+", backend.strip())))
    return bool(words) and re.search(rf"(?<!\w){words}(?!\w)", question, re.I) is not None


def _ask_which(d: Decision, closest: Candidate, fitting: list[Candidate], why: str, asks: str, does: str,
               kind: str) -> Decision:
    """`fitting` (tools of `closest`'s backend) first, marked `placed`, and a 409 asking which of them."""
    message = (f"the question {asks}, and the closest, {closest.capability.key}, {does}; backend "
               f"{closest.capability.backend!r} fits (confidence {closest.scores.confidence:.2f}), and of its tools "
               f"{kind} none is clearly meant: {named_tools(tool_contenders(closest, fitting))}; name the tool")
    asked = [dataclasses.replace(c, relevant=False, unclear_tool=True, unsure_action=False, placed=why)
             for c in fitting]
    rest = [c for c in d.candidates if all(c is not f for f in fitting)]
    return dataclasses.replace(d, candidates=(*asked, *rest), verdict="ambiguous", message=message)


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
            return AmbiguousRoute(d.message, candidates=closest(), request_id=request.request_id)
        if first is not None and first.unclear_tool:  # which of one backend's tools
            # Those that could serve the question: the memory's readers are no choice for "Remember that ...".
            listed = tool_contenders(first, d.candidates)
            if first.placed in (FOR_A_CHANGE, FOR_READING):  # the decision's message names them
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


def _unserved(d: Decision, arguments: Arguments) -> RouterError:
    """Nothing that fits can serve the question: the router declines rather than call a tool that cannot do
    it (a unit converter asked for currencies, a reader asked to remember whose backend has nothing else that
    fits; when it has, settling asked which of those tools)."""
    closest = next((c for c in d.candidates if c.relevant), d.candidates[0] if d.candidates else None)
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


def values_taken(cap: Capability, derived: Derived, paths: bool = True, first: Capability | None = None,
                 question: str = "") -> int:
    """How many of a tool's arguments the question's own values gave. Its words as free text give none, and
    neither does a thing's name: "the 'Guest' role" fits creating a role as well as deleting one; nor, unless
    `paths`, a path: which file says nothing of what is asked of it; nor a choice whose word the `first` tool's
    own texts speak of too, unless the `question` puts it beside its parameter's word ("sorted by size"): "the size
    and modification date of b.txt" names `list_directory_with_sizes`'s sort by size, and the file's information,
    which tells its size, was the first match."""
    return len(_values_taken(cap, derived, paths, first, question))


def _values_taken(cap: Capability, derived: Derived, paths: bool = True, first: Capability | None = None,
                  question: str = "", names: bool = False) -> dict[str, Any]:
    """The arguments `values_taken` counts, by parameter (with a thing's name too when `names`)."""
    if isinstance(derived, ArgumentsRequired) or not derived[1].startswith("extracted"):
        return {}
    props = properties_of(cap.input_schema)
    taken = derived[1].split(": ", 1)[-1].split(", ")
    named = set() if names else {p.removesuffix(AS_NAMED).rstrip() for p in taken if p.endswith(AS_NAMED)}
    own = f"{first.name} {first.description}".lower() if first is not None and first is not cap else ""

    def shared(name: str, value: object) -> bool:
        if not own or not isinstance(value, str) or value not in props.get(name, {}).get("enum", ()):
            return False
        word = re.escape(value.lower())
        beside = "|".join(re.escape(w) for w in {*words_for(name), *words_of(name)} if len(w) > 2)
        # A choice the question names by the order it puts first ("the biggest file") is no word of the first tool's.
        return bool(re.search(rf"\b{word}\b", own)) and bool(re.search(rf"\b{word}", question, re.I)) and not re.search(
            rf"\b(?:{beside})\w*\s+(?:\w+\s+)?{word}\b", question, re.I)

    return {n: v for n, v in derived[0].items() if n not in named and not shared(n, v)
            and (paths or not takes_paths(n, props.get(n, {})))}
