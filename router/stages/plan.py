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
from collections.abc import Mapping

from router.errors import (
    AmbiguousRoute,
    ArgumentsRequired,
    BackendNotCallable,
    BackendUnavailable,
    NoRelevantBackend,
    RouterError,
)
from router.request import Request
from router.settings import RouterSettings, RoutingSettings
from router.stages.arguments import OPTIONAL_ONLY, Derived, derive_with_leftovers, needs_nothing, values_taken
from router.stages.decide import below, named_tools, too_close, tool_contenders, unclear_tool_message
from router.stages.serving import (
    asks_for_change,
    asks_one_way,
    asks_to_read,
    readable,
    toggles,
    unmatched_words,
    unserved,
    value_kinds,
)
from router.values import BackendStatus, Candidate, Capability, Catalog, Decision, Plan, PlannedCall

READS_ONLY = "a change"  # what a read-only capability cannot serve: a request to change something
ACTS = "a question"  # what a capability that may change something does not answer: a question that only asks
UNTAKEN = "the question's words"  # what a call that takes nothing of the question cannot serve: its specifics
LEFT = "the question's other values"  # what a call taking some of the question's values of a kind leaves
EITHER_WAY = "one way"  # what a tool that toggles cannot serve: a request to switch something one way
MODEL_CHOICE = "the model's choice"  # `placed` of a candidate an LLM chose, having read the question
FOR_A_CHANGE = "the question asks for a change, and its backend's best match only reads"  # `placed` of the others
FOR_READING = "the question only asks, and its backend's best match may change something"  # `placed` of its readers


class Arguments:
    """The arguments of each candidate for one request, derived once: settling and planning both ask; and
    what of the question only some tools can serve (`unserved`): the kinds of value it carries, and a request
    to change something, which a read-only tool cannot do, and a question that only asks, which a tool its server
    declares may change something does not answer; values of a kind the call takes that it leaves unused;
    and, below `min_untaken_confidence`, words of the question that a call taking nothing from it could not be
    about."""

    def __init__(self, request: Request, min_untaken_confidence: float = 0.0,
                 catalogs: Mapping[str, Catalog] | None = None) -> None:
        self.request = request
        self.catalogs = catalogs or {}  # what each backend says it is for
        self._derived: dict[str, Derived] = {}
        self.named = request.tool is not None  # a named tool is the caller's choice
        self.kinds = value_kinds(request.question) if not self.named else {}
        self.change = asks_for_change(request.question) if not self.named else None
        self.read = asks_to_read(request.question) if not self.named else None
        self.one_way = asks_one_way(request.question) if not self.named else None
        self.min_untaken_confidence = min_untaken_confidence
        self.unmatched: dict[str, list[str]] = {}
        self.left: dict[str, list] = {}  # the question's values each derivation left unused
        self._annotated: dict[str, bool] = {}

    def may_serve(self, candidate: Candidate) -> bool:
        """Whether the candidate is one to offer when the router asks which tool: not a reader for a change, nor
        a tool without the question's kind of value. One that takes nothing from the question, or not all of its
        values, is not called on a guess, but may still be what the caller means."""
        return self.doubt(candidate) in (None, UNTAKEN, LEFT, EITHER_WAY)

    def doubt(self, candidate: Candidate) -> str | None:
        """`unserved` for a candidate at its confidence; one an LLM chose has had the question read."""
        sure = candidate.placed == MODEL_CHOICE
        return self.unserved(candidate.capability, 1.0 if sure else candidate.scores.confidence)

    def ruled_out(self, candidate: Candidate) -> str | None:
        """Why a relevant candidate would not be called, in words (None: nothing rules it out)."""
        if not candidate.relevant:
            return None
        why = self.doubt(candidate)
        if why is None:
            derived = self.of(candidate.capability)
            if isinstance(derived, BackendNotCallable):
                return "there is nothing on it to call (a backend known by its description, or a held tool)"
            if isinstance(derived, ArgumentsRequired):
                return f"it needs {derived.details.get('missing')!r}, which the question does not give"
            return None
        return {READS_ONLY: f"it only reads, and the question asks to {self.change} something",
                ACTS: f"it may change something, and the question only asks ({self.read!r})",
                LEFT: "it would leave some of the question's values unused",
                EITHER_WAY: f"it switches whichever way things are now, and the question asks to {self.one_way}",
                UNTAKEN: f"it {self.takes_little(candidate.capability, so=False)}, and on a match this weak it "
                         "says nothing about " + ", ".join(map(repr, self.unmatched.get(candidate.capability.key, [])))
                }.get(why, f"it takes no {why} value, which the question gives")

    def unserved(self, capability: Capability, confidence: float = 1.0) -> str | None:
        """What of the question the capability cannot serve (a kind of value, `READS_ONLY`, `LEFT` or `UNTAKEN`),
        else None. A call that takes nothing from the question answers the same whatever was asked ("How do I run
        it on a cluster?" starting a demo's long-running operation): on a weak match, a word of the question
        that neither the capability's texts nor its server's description name is one its answer cannot be about."""
        if self.change is not None and capability.read_only:
            return READS_ONLY
        if self.read is not None and not capability.read_only and self._declares_readers(capability.backend):
            return ACTS
        if self.one_way is not None and not capability.read_only and toggles(capability):
            return EITHER_WAY
        if self.kinds and (kind := unserved(capability, self.kinds)) is not None:
            return kind
        if self._leaves_values(capability):
            return LEFT
        if confidence < self.min_untaken_confidence and self._takes_nothing(capability):
            key = capability.key
            if key not in self.unmatched:
                catalog = self.catalogs.get(capability.backend)
                self.unmatched[key] = unmatched_words(capability, self.request.question,
                                                      catalog.description if catalog is not None else "")
            return UNTAKEN if self.unmatched[key] else None
        return None

    def _declares_readers(self, backend: str) -> bool:
        """Whether the backend marks some of its tools read-only: then the others may change something by its
        own word ("Is logging enabled?" toggled the demo's logging), not by the MCP default for a server that
        says nothing (most do, and their tools answer questions)."""
        if backend not in self._annotated:
            catalog = self.catalogs.get(backend)
            self._annotated[backend] = catalog is not None and any(
                c.read_only and c.kind == "tool" for c in catalog.capabilities)
        return self._annotated[backend]

    def _leaves_values(self, capability: Capability) -> bool:
        self.of(capability)
        return not self.named and bool(self.left[capability.key])

    def _takes_nothing(self, capability: Capability) -> bool:
        if self.named or capability.kind == "flow":  # a flow is sent the question itself
            return False
        return needs_nothing(self.of(capability))  # it answers much the same whatever else was asked

    def takes_little(self, capability: Capability, so: bool = True) -> str:
        """What a call `_takes_nothing` takes from the question, in words (`so`: and what follows)."""
        derived = self.of(capability)
        if isinstance(derived, tuple) and derived[1].startswith(OPTIONAL_ONLY):
            optional = derived[1][len(OPTIONAL_ONLY):]
            return (f"needs nothing from the question (it would take only its optional {optional})"
                    + (", so its answer would not be about the rest" if so else ""))
        return "takes nothing from the question" + (", so its answer would be the same whatever was asked"
                                                      if so else "")

    def of(self, capability: Capability) -> Derived:
        key = capability.key
        if key not in self._derived:
            self._derived[key], self.left[key] = derive_with_leftovers(capability, self.request.question,
                                                                      self.request.arguments)
        return self._derived[key]


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
    if why == ACTS or (arguments.read is not None and first.unsure_action):
        return _readers_for_a_question(d, first, arguments, settings.routing)
    close = [c for c in d.candidates if c.capability.backend == first.capability.backend and c.contending
             and c.scores.composite >= first.scores.composite - settings.routing.callable_margin
             and arguments.doubt(c) is None]
    taken = {c.capability.key: values_taken(arguments.of(c.capability)) for c in close}
    if first.unclear_tool or isinstance(arguments.of(first.capability), ArgumentsRequired):
        fitting = [c for c in close if taken[c.capability.key]]
        chosen = fitting[0] if len(fitting) == 1 and (fitting[0] is not first or first.unclear_tool) else None
    else:
        most = max(taken.values(), default=0)
        best = [c for c in close if taken[c.capability.key] == most]
        chosen = best[0] if len(best) == 1 and most > taken.get(first.capability.key, 0) else None
    if chosen is None:
        return d
    guess = not chosen.capability.read_only and \
        chosen.scores.confidence * chosen.scores.tool_confidence < settings.routing.min_action_confidence
    placed = "the question's values: of the backend's close tools, it takes the most of them"
    settled = dataclasses.replace(chosen, relevant=not guess, unclear_tool=False, unsure_action=guess, placed=placed)
    rest = [c for c in d.candidates if c is not chosen]
    return dataclasses.replace(d, candidates=(settled, *rest), verdict="ambiguous" if guess else "route",
                               message=f"routed to {chosen.capability.backend}/{chosen.capability.name}: {placed}")


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
    readers of that backend that fit are asked about. Readers the question does not fit are not offered."""
    readers = [c for c in d.candidates if c.capability.read_only and arguments.may_serve(c)
               and c.scores.confidence >= routing.min_confidence]
    sure = [c for c in readers if c.relevant and arguments.doubt(c) is None]
    if sure and not too_close(sure, routing.ambiguity_margin):  # reading is no guess
        rest = [c for c in d.candidates if c is not sure[0]]
        return dataclasses.replace(d, candidates=(dataclasses.replace(sure[0], placed=FOR_READING), *rest),
                                   verdict="route", message=f"routed to {sure[0].capability.backend}/"
                                   f"{sure[0].capability.name}: the closest, {writer.capability.key}, may change "
                                   "something, and the question only asks")
    own = [c for c in readers if c.capability.backend == writer.capability.backend]
    return _ask_which(d, writer, own, FOR_READING, f"only asks ({arguments.read!r})", "may change something",
                      "that only read") if own else d


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
        if not calls or calls[0].candidate.scores.composite < best.scores.composite - settings.routing.callable_margin \
                or (best.capability.held and not calls[0].candidate.capability.same_as(best.capability)):
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
