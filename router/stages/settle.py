"""settle: which of the decided candidates a request means, told by what the question says beside the scores.

The question's values tell a backend's close tools apart (`settle_by_arguments`); a request to change something
goes to a tool that may, and a question that only asks to one that only reads; a reader that takes more of the
question answers before one that leaves it; a backend the question names is answered by its own tools or asked
about. Settling says which tool, not whether to act: the plan stage still holds a tool that may change something to
its bars.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

from router.errors import ArgumentsRequired
from router.schemas import properties_of
from router.settings import RouterSettings, RoutingSettings
from router.stages.argument_order import words_for
from router.stages.arguments import AS_NAMED, NONE_NEEDED, Derived
from router.stages.decide import named_tools, too_close, tool_contenders, unsure_action_message
from router.stages.search_terms import unmatched_words
from router.stages.serving import ACTS, DATED, READS_ONLY, Arguments
from router.stages.written import takes_paths, words_of
from router.values import Candidate, Capability, Decision

FOR_A_CHANGE = "the question asks for a change, and its backend's best match only reads"  # `placed` of the others
FOR_READING = "the question only asks, and its backend's best match may change something"  # `placed` of its readers
A_READING_CALL = "it may change something, and the action its call is given only reads"
NAMED = "the question names its backend"
EVERY_READER = "of all its backend's readers, it alone takes every value of the question the others take, and more"
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
    the one meant (its backend's confidence times its tool confidence), as the scorer asks of it. Before all
    this, a backend the question names is answered by its own tools or asked about (`_for_the_named_backend`);
    after it, a reader that takes more of the question answers before one that leaves it (`_wider_reader`)."""
    if arguments.request.arguments is not None or d.kind == "override" or d.verdict == "no_match":
        return d
    first = next((c for c in d.candidates if c.contending), None)
    if first is None or first.capability.held:  # a held tool was meant: no sibling answers for it
        return d
    named = _for_the_named_backend(d, first, arguments)
    if named is not d:
        return named
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
    # Settled on a tool too unlikely to act on, the answer says that, not where it would have been routed.
    message = f"{unsure_action_message(settled, settings.routing.min_action_confidence)} ({placed})" if guess \
        else f"routed to {chosen.capability.backend}/{chosen.capability.name}: {placed}"
    return dataclasses.replace(d, candidates=(settled, *rest), verdict="ambiguous" if guess else "route",
                               message=message)


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
    # The backend's one reader that fits, when its texts say every word of the question ("Show the insights memo":
    # the SQLite server's memo, beside tools that write): there is nothing else to read there, and nothing to guess.
    only = own[0] if len(own) == 1 and not arguments.words_unmatched(own[0].capability) else None
    reader = (_wider_reader(closest, readers, arguments, routing) if closest else None) or clear or only \
        or _widest(own, arguments)
    if reader is not None and closest is not None:  # reading is no guess
        rest = [c for c in d.candidates if c is not reader]
        wider = f"; of its readers, {reader.capability.name} takes more of the question's values than " \
                f"{closest.capability.name}" if reader is not closest else ""
        return dataclasses.replace(d, candidates=(dataclasses.replace(reader, relevant=True, placed=FOR_READING),
                                                  *rest), verdict="route",
                                   message=f"routed to {reader.capability.backend}/{reader.capability.name}: the "
                                   f"closest, {writer.capability.key}, may change something, and the question only "
                                   f"asks{wider}")
    return _by_every_reader(d, writer, arguments, routing, f"the closest, {writer.capability.key}, may change "
                            "something, and the question only asks") \
        or (_ask_which(d, writer, own, FOR_READING, f"only asks ({arguments.read!r})", "may change something",
                       "that only read") if own else d)


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


def _widest(own: Sequence[Candidate], arguments: Arguments) -> Candidate | None:
    """The closest of a backend's readers when it takes every value of the question each other one takes, and more
    ("How many rows does Sheet1 of a.xlsx have?": the sheet's description, which takes the sheet as well as the file,
    not the workbook's). `_wider_reader` looks past the closest; this is the closest being the widest."""
    if len(own) < 2 or (mine := _given(own[0].capability, arguments, own[0].capability)) is None:
        return None
    theirs = [_given(c.capability, arguments, own[0].capability) for c in own[1:]]
    return own[0] if all(t is None or t < mine for t in theirs) else None


def _by_every_reader(d: Decision, first: Candidate, arguments: Arguments, routing: RoutingSettings,
                     why: str) -> Decision | None:
    """The decision routed to the one reader of all `first`'s backend's tools that the question's values tell
    (`_widest_of_all`), when that backend is likely enough; else None."""
    reader = None if first.scores.confidence < routing.min_confidence else \
        _widest_of_all(arguments.tools_of(first.capability.backend), arguments)
    if reader is None:
        return None
    rest = [c for c in d.candidates if c.capability.key != reader.capability.key]
    chosen = dataclasses.replace(reader, relevant=True, unclear_tool=False, unsure_action=False, placed=EVERY_READER)
    return dataclasses.replace(d, candidates=(chosen, *rest), verdict="route",
                               message=f"routed to {reader.capability.key}: {why}; {EVERY_READER}")


def _widest_of_all(tools: Sequence[Candidate], arguments: Arguments) -> Candidate | None:
    """Of a backend's every tool (`Arguments.tools_of`), the one reader that takes every value of the question each
    other reader takes, and more, and at least two of them: "Show row 1 of Sheet1 in a.xlsx" reads the sheet's row
    (file, sheet and row), where the workbook's description or its macros would take the file alone. Retrieval ranked
    it below the decision's candidates; the values tell it. A reader that may take the whole question as free text
    takes none of its values here."""
    readers = [(c, given) for c in tools if c.capability.read_only and arguments.doubt(c) is None
               and (given := _given(c.capability, arguments, c.capability))]
    widest = max(readers, key=lambda r: len(r[1]), default=None)
    if widest is None or len(widest[1]) < 2 or any(
            len(given) >= len(widest[1]) or not all(_within(v, widest[1]) for v in given)
            for c, given in readers if c is not widest[0]):
        return None
    # The values say where, the words what: a word another reader's texts say and its own do not ("the data
    # validation rules of A1:A10", "the note on B3": the sheet's description lists both) was what was asked. Their
    # server's description, which speaks for all of them, tells none apart.
    question = arguments.request.question
    unsaid = set(unmatched_words(widest[0].capability, question))
    return widest[0] if all(unsaid <= set(unmatched_words(c.capability, question)) for c in tools
                            if c.capability.read_only and c is not widest[0]) else None


def _within(value: str, values: frozenset[str]) -> bool:
    """Whether a value (as JSON) is one of `values` or written within one: the 1 of "row 1" within its range "1:1"."""
    text = str(json.loads(value))
    return value in values or any(re.search(rf"(?<!\w){re.escape(text)}(?!\w)", str(json.loads(v))) for v in values)


def _given(cap: Capability, arguments: Arguments, first: Capability) -> frozenset[str] | None:
    """The values a call takes from the question, as JSON, as `values_taken` counts them but for a thing's name
    (None: it takes the question as free text, or cannot take it)."""
    derived = arguments.of(cap)
    if isinstance(derived, ArgumentsRequired) or not (derived[1] == NONE_NEEDED or derived[1].startswith("extracted")):
        return None
    taken = _values_taken(cap, derived, first=first, question=arguments.request.question, names=True)
    return frozenset(json.dumps(v, sort_keys=True) for v in taken.values())


def _for_the_named_backend(d: Decision, first: Candidate, arguments: Arguments) -> Decision:
    """A question that names a backend ("Search Notion for meeting notes") whose best match is on another one: the
    named backend's best candidate that fits answers when it is likely enough (the scorer's `relevant`), else which
    of its tools was meant is asked. Another backend's reader is no answer to a question put to this one."""
    question = arguments.request.question
    lowered = question.lower()
    named = {b for b in {c.capability.backend for c in d.candidates}
             if _first_word(b) in lowered and _names_as_a_name(question, b)}  # a substring first: most name none
    if first.capability.backend in named:
        return d
    theirs = [c for c in d.candidates if c.capability.backend in named]
    if len(named) != 1 or not theirs:
        return d
    fit = next((c for c in theirs if arguments.may_serve(c)), None)
    if fit is not None and fit.relevant and not fit.unsure_action:
        others = [c for c in d.candidates if c is not fit]
        return dataclasses.replace(d, candidates=(dataclasses.replace(fit, placed=NAMED), *others),
                                   verdict="route", message=f"routed to {fit.capability.key}: {NAMED}")
    asked = _ask_which(d, theirs[0], theirs, NAMED, "", "", "")
    return dataclasses.replace(asked, message=(
        f"the question names backend {theirs[0].capability.backend!r}, and none of its tools is likely enough to be "
        f"meant: {named_tools(tool_contenders(theirs[0], theirs))}; {first.capability.key}, of another backend, is no "
        "answer to it; name the tool"))


def _names(question: str, backend: str) -> bool:
    """Whether the question names the backend ("notion", "google_maps" as "Google Maps")."""
    return next(_mentions(question, backend), None) is not None


def _names_as_a_name(question: str, backend: str) -> bool:
    """Whether the question names the backend as a name: capitalised, within a sentence ("Search Notion for ...",
    "on Slack"), or called the server or backend ("using the everything server"; not "my local server"). A backend
    called by a common word ("search", "local", "now") is not named by the word's use."""
    return any((m.group(0)[0].isupper() and question[:m.start()].strip() and not re.search(r"[.!?:]\s*$", question[
        :m.start()])) or (_THE.search(question, 0, m.start()) and _SERVER.match(question, m.end()))
        for m in _mentions(question, backend))


_THE, _SERVER = re.compile(r"\bthe\s+$", re.I), re.compile(r"\s+(?:mcp\s+)?(?:server|backend)\b", re.I)


def _mentions(question: str, backend: str) -> Iterator[re.Match[str]]:
    pattern = _mention(backend)
    return pattern.finditer(question) if pattern is not None else iter(())


@lru_cache(maxsize=4096)
def _mention(backend: str) -> re.Pattern[str] | None:
    words = r"[\s_-]+".join(map(re.escape, _words(backend)))
    return re.compile(rf"(?<!\w){words}(?!\w)", re.I) if words else None


def _first_word(backend: str) -> str:
    return _words(backend)[0].lower()


@lru_cache(maxsize=4096)
def _words(backend: str) -> tuple[str, ...]:
    """A backend's name as the words a question writes it in ("google_maps": google, maps)."""
    return tuple(re.split(r"[\s_-]+", backend.strip()))


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
