"""What of a question a capability can serve, whatever its arguments: the kinds of value it carries (amounts
in a currency), a request to change something (which a read-only tool cannot do), and the words a call that
takes nothing from the question would have to be about. `Arguments` holds, for one request, each candidate's
arguments (derived once) and what of the question it cannot serve (`doubt`); the plan stage declines a call that
cannot serve the question rather than make it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

from router.errors import ArgumentsRequired, BackendNotCallable
from router.request import Request
from router.retrieval.text import CJK
from router.schemas import choices_of, properties_of, type_of
from router.stages.arguments import OPTIONAL_ONLY, Derived, derive_with_leftovers, needs_nothing
from router.stages.clocks import (
    answers_as_of_now,
    asks_another_day,
    asks_another_time,
    takes_date,
    tells_the_time_now,
)
from router.stages.currencies import CURRENCY
from router.stages.names import reads_by_its_action
from router.stages.search_terms import schema_words, unmatched_words
from router.stages.timezones import dates_in, gap_changes, zone_named
from router.stages.written import PATH, SQL_LEAD, SQL_VERBS, names_a_path
from router.values import Candidate, Capability, Catalog, fixed_digest

# Kinds of value a question can carry that only some tools take. A tool whose own texts (name, description,
# parameters) never name the kind cannot serve such a value, however close its other words are: "Convert 100
# USD to EUR" is not a unit conversion. (An ISO code counts in capitals only: "eur" is a word's part.)
VALUE_KINDS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "currency": (
        re.compile(rf"{CURRENCY.pattern}|[$€£¥₹]\s?\d|\d\s?[$€£¥₹]|(?i:\b(?:dollars?|rupees?)\b)"),
        re.compile(r"(?i)currenc|exchange|forex|\bfx\b|money|price|payment|invoice|stock|crypto|bitcoin|"
                   r"\b(?:usd|eur|gbp|dollars?|euros?)\b"),
    ),
    # A SQL statement that is the request goes to a tool of SQL whose texts name its verb, or name none ("Execute a
    # SELECT query" runs no DELETE; "Run a SQL statement" may run any).
    **{f"SQL {verb}": (re.compile(rf"{SQL_LEAD}[\"'`]?(?:{opening})"), re.compile(
        rf"^(?=[\s\S]*(?i:sql))(?:(?![\s\S]*\b(?:{'|'.join(SQL_VERBS)})\b)|[\s\S]*\b{verb}\b)"))
       for verb, opening in SQL_VERBS.items()},
}


def value_kinds(question: str) -> dict[str, list[str]]:
    """The kinds of `VALUE_KINDS` the question carries, with the values found."""
    found = {kind: [m.group(0).strip() for m in given.finditer(question)] for kind, (given, _) in VALUE_KINDS.items()}
    return {kind: values for kind, values in found.items() if values}


# Verbs that, leading a request, ask for something to be changed, which a tool declared read-only cannot do
# ("Remember that Bob likes tea" is not answered by reading the memory). Verbs that also ask for output
# ("create a chart", "write a poem", "add 3 and 4") are left out, and so are "set up" (as often a request for
# instructions) and "turn" but for "turn on" and "turn off" ("turn this into a poem" asks for output).
# Verbs that are nouns as often, heading a thing asked about (`_NOUN_HEADS`), and never make a question a change.
_NOUNS_TOO = ("back", "backup", "drop", "purge", "archive", "push", "commit", "stash", "tag", "close", "reopen",
              "install", "uninstall", "deploy", "restart", "kill")
_CHANGE_VERBS = frozenset({"remember", "save", "store", "forget", "delete", "remove", "erase", "send", "post",
                           "publish", "upload", "update", "rename", "move", "insert", "book", "schedule", "cancel",
                           "set", "reset", "clear", "enable", "disable", "turn", "change", "checkout", "revert", "undo",
                           "restore", "stage", "unstage", "overwrite", "make", *_NOUNS_TOO})
# "Change 100 USD to EUR" asks for a conversion, not a change; "Change log of ...", "Change in GDP" name a thing.
# "Make" asks for a change only when it makes something so, the state ending the request ("Make a.txt read-only",
# "Make the repo private, please"); "make a chart", "make a list of the public holidays" ask for output.
# "Back" only as "back up"; "close to" and "close by" say where. "Stage" only of files and changes ("Stage a.txt",
# "Stage all changes"): "Stage 2 results", "Stage names of actors" ask about a stage.
# "Checkout" a file, branch or the like: "Checkout conversion rate for March" asks about a checkout.
# The newer verbs are nouns as often, heading a thing asked about: "Commit history of ...", "Close price of Tesla",
# "Install instructions for numpy", "Drop rate of legendary items", "Close-up photos".
_NOUN_HEADS = (rf"(?:back\s*up|{'|'.join(_NOUNS_TOO)})"
               r"(?:-|\s+(?:history|log|logs|price|prices|status|count|counts|rate|rates|instructions?|"
               r"guide|cloud|notifications?|messages?|hash|id|time|times|date|size|list|policy|page|button|of|for)\b)")
_NOT_A_CHANGE = re.compile(_NOUN_HEADS + r"|set\s+up\b|turn\b(?!\s+(?:on|off)\b)|back\b(?!\s+up\b)|close\s+(?:to|by)\b|"
                           r"change\s+(?:[\d$€£¥]|(?:log|history|list|set|"
                           r"requests?|management|notes?|sets?|in|of|over|between|since|from)\b)|"
                           r"make\b(?![\s\S]{0,80}?\b(?:read[- ]?only|executable|writ[e]?able|public|private|hidden|"
                           r"visible|(?:the\s+)?default|(?:in)?active)\s*(?:[.!?,;]|$|(?:please|now|again)\b))|"
                           r"stage\b(?!\s+(?:(?:the|all|my|these|those|this|every)\s+)?(?:changes?|files?|everything|"
                           r"edits|[\w./~-]*\.\w+)(?!\w))|"
                           r"checkout\b(?!\s+(?:(?:the|a|this|that|my)\s+)?(?:files?|branch(?:es)?|commits?|tags?|"
                           r"revisions?|versions?|repo(?:sitory)?|[\w./-]+\.\w+)\b)")
_REQUEST_LEAD = re.compile(r"(?:\s*(?:please|kindly|(?:can|could|would|will)\s+you)\b[\s,]*)*", re.I)


def _leading_word(question: str) -> tuple[str, str]:
    """The question's first word after "please", "can you" and the like (lower-cased), and what follows it."""
    lead = _REQUEST_LEAD.match(question)
    rest = question[lead.end() if lead else 0:].lower()
    found = re.match(r"[a-z]+", rest)
    word = found.group(0) if found else ""
    return word, rest[len(word):]


def asks_for_change(question: str) -> str | None:
    """The verb of a request to change something ("Please delete ...", "Can you remember ..."), else None."""
    verb, rest = _leading_word(question)
    if verb not in _CHANGE_VERBS or _NOT_A_CHANGE.match(verb + rest):
        return None
    if verb == "change" and "currency" in value_kinds(question):  # "Change dollars to euros"
        return None
    return "back up" if verb == "back" else verb


# Words that, leading a question, ask only to be told something ("List all entities in memory" is not a request
# to delete any), unless a verb that can only mean a change follows ("Find the duplicates and delete them"; "set",
# "post", "book" and the like are nouns as often).
_READ_LEADS = frozenset({"list", "show", "display", "view", "read", "find", "search", "look", "fetch", "print",
                         "count", "tell", "what", "which", "who", "whose", "where", "when", "is", "are", "does",
                         "did", "was", "were", "has"})
# "How long has session 7 been running?" asks how much of something; "How do I stop it?" may be meant either way.
_HOW_MUCH = re.compile(r"\s+(long|many|much|old|big|large|far|often)\b")
# "How to uninstall Steam" still asks.
_ONLY_CHANGE = sorted(_CHANGE_VERBS - {"post", "book", "schedule", "set", "reset", "clear", "enable", "disable",
                                       "turn", "move", "change", "checkout", "revert", "undo", "restore", "stage",
                                       "unstage", "overwrite", "make", *_NOUNS_TOO})
_ONLY_CHANGES = re.compile(rf"\b(?:{'|'.join(_ONLY_CHANGE)})\b", re.I)
_TELL_ME = re.compile(r"\s+(?:me|us)\b")  # after the lower-cased leading word


def asks_to_read(question: str) -> str | None:
    """The word a question that only asks to be told something starts with ("What ...", "Please list ..."),
    else None."""
    word, rest = _leading_word(question)
    if word == "how" and (much := _HOW_MUCH.match(rest)):
        word = f"how {much[1]}"
    elif word not in _READ_LEADS:
        return None
    if _ONLY_CHANGES.search(question):
        return None
    if word == "tell" and not _TELL_ME.match(rest):
        return None  # "tell me ..." asks; "tell Bob ..." sends
    return word


# A request for one way of a switch ("Turn off the simulated logs", "Please disable alerts"), and a tool that
# switches whichever way things are ("Toggles simulated logging on or off") without being told which (no
# boolean or enumerated parameter): called for such a request, it acts on a guess about the state now, which
# the router cannot see, and does the opposite of what was asked when the guess is wrong.
_ONE_WAY = re.compile(r"\b(turn|switch|shut|toggle|flip|set)\b(?:\s+[\w'-]+){0,5}?\s+(on|off)\b|"
                      r"\b(enable|disable|activate|deactivate|start|stop|pause|resume|mute|unmute)\b", re.I)
_TOGGLE_NAME = re.compile(r"(?:^|[^a-z])toggle", re.I)
_TOGGLES = re.compile(r"\btoggles?\b", re.I)


def asks_one_way(question: str) -> str | None:
    """The words of a request to switch something one way ("turn off", "enable"), anywhere in it ("Turn the
    logs off", "Now disable logging"), else None. It only ever rules out a tool that `toggles`."""
    found = _ONE_WAY.search(question)
    if found is None:
        return None
    return f"{found[1]} {found[2]}".lower() if found[1] else found[3].lower()


def toggles(cap: Capability) -> bool:
    """Whether the tool switches something whichever way it is (its name or description says it toggles), not
    being told which way (no boolean or enumerated parameter)."""
    if not (_TOGGLE_NAME.search(cap.name) or _TOGGLES.search(cap.description)):
        return False
    return not any(choices_of(p) is not None or type_of(p) == "boolean"
                   for p in properties_of(cap.input_schema).values())


# Two letters in a row (of any script), a digit, or one CJK character: something a question can be routed by.
_READABLE = re.compile(rf"[^\W\d_]{{2}}|\d|{CJK.pattern}")


def readable(question: str) -> bool:
    """Whether the question has a word or a number at all ("÷Ø" has neither: whatever it is closest to, that
    is chance, and a tool called for it answers noise or an error)."""
    return _READABLE.search(question) is not None


def unserved(cap: Capability, kinds: dict[str, list[str]]) -> str | None:
    """The first kind of the question's values the capability's texts never name (None: it may serve them)."""
    named = _kinds_named(f"{cap.name} {cap.title or ''} {cap.description} {schema_words(cap.input_schema)}")
    return next((kind for kind in kinds if kind not in named), None)


@lru_cache(maxsize=16384)
def _kinds_named(text: str) -> frozenset[str]:
    """The kinds a capability's texts name, once per text: each pattern is an alternation without a literal
    prefix, some 40 µs a search, which every candidate of every question carrying a value paid."""
    return frozenset(kind for kind, (_, names) in VALUE_KINDS.items() if names.search(text))


MODEL_CHOICE = "the model's choice"  # `placed` of a candidate an LLM chose, having read the question
_CLOCK = re.compile(r"\d\d:\d\d")  # a time of day as the arguments carry it


READS_ONLY = "a change"  # what a read-only capability cannot serve: a request to change something
ACTS = "a question"  # what a capability that may change something does not answer: a question that only asks
UNTAKEN = "the question's words"  # what a call that takes nothing of the question cannot serve: its specifics
LEFT = "the question's other values"  # what a call taking some of the question's values of a kind leaves
EITHER_WAY = "one way"  # what a tool that toggles cannot serve: a request to switch something one way
DATED = "another day"  # what a time converted as of today cannot serve: a date whose clocks are set otherwise
NOT_NOW = "another time"  # what a tool that tells the time now cannot serve: a question about another time
TODAY = "another day"  # what a tool that answers as of now cannot serve: a question about another day


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
        self.paths = PATH.findall(request.question) if not self.named else []
        now = datetime.now(UTC)
        self.now, self.dates = now, dates_in(request.question, now.date()) if not self.named else []
        self.another_time = not self.named and (bool(self.dates) or asks_another_time(request.question))
        self.another_day = not self.named and (any(d != now.date() for d in self.dates) or
                                               asks_another_day(request.question))
        # What `DATED` found, by capability key (None: nothing), asked once per capability: settling, planning
        # and the dry run's reasons each ask again.
        self.clock_change: dict[str, tuple[date, str, str, float] | None] = {}
        self.min_untaken_confidence = min_untaken_confidence
        # Every tool of a backend, ranked for the question as if the caller had named it (core.py gives it).
        self.tools_of: Callable[[str], Sequence[Candidate]] = lambda backend: ()
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
                NOT_NOW: "it tells the time now, and the question asks about another time",
                TODAY: "it answers as of now, and the question asks about another day",
                DATED: "it converts a time as of today, and on the question's date "
                       f"{self.off_by(candidate.capability)}",
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
        if self.read is not None and not capability.read_only and self._declares_readers(capability.backend) \
                and not self.reads(capability):
            return ACTS
        if self.one_way is not None and not capability.read_only and toggles(capability):
            return EITHER_WAY
        if self.dates and self._clocks_differ(capability):
            return DATED
        if self.another_time and tells_the_time_now(capability):
            return NOT_NOW
        if self.another_day and answers_as_of_now(capability):
            return TODAY
        if self.kinds and (kind := unserved(capability, self.kinds)) is not None:
            return kind
        if self._leaves_values(capability):
            return LEFT
        if confidence < self.min_untaken_confidence and self._takes_nothing(capability):
            return UNTAKEN if self.words_unmatched(capability) else None
        return None

    def words_unmatched(self, capability: Capability) -> list[str]:
        """`unmatched_words` of the question for the capability (and its backend's description), found once."""
        key = capability.key
        if key not in self.unmatched:
            catalog = self.catalogs.get(capability.backend)
            self.unmatched[key] = unmatched_words(capability, self.request.question,
                                                  catalog.description if catalog is not None else "")
        return self.unmatched[key]

    def _clocks_differ(self, capability: Capability) -> bool:
        """Whether a call converting a time of day between zones, which takes no date and so converts as of today,
        would be off on a date the question gives ("9am in London on March 30"): on that date the zones' offsets
        differ by another amount than today. The caller's own arguments are its to give."""
        if capability.key not in self.clock_change:
            self.clock_change[capability.key] = self._clock_change(capability)
        return self.clock_change[capability.key] is not None

    def _clock_change(self, capability: Capability) -> tuple[date, str, str, float] | None:
        derived = self.of(capability)
        if not isinstance(derived, tuple) or not derived[1].startswith("extracted") or any(
                takes_date(n, spec) for n, spec in properties_of(capability.input_schema).items()):
            return None
        clock = next((v for v in derived[0].values() if isinstance(v, str) and _CLOCK.fullmatch(v)), None)
        zones = [z for v in derived[0].values() if isinstance(v, str) and "/" in v
                 and (z := zone_named(v.lower(), False)) is not None]
        if clock is None or len(zones) < 2:
            return None
        for day in self.dates:
            found = gap_changes(zones, clock, day, self.now)
            if found is not None:
                return (day, *found)
        return None

    def off_by(self, capability: Capability) -> str:
        """What `_clocks_differ` found for the capability, in words."""
        found = self.clock_change.get(capability.key)
        if found is None:
            return ""
        day, a, b, hours = found
        return (f"({day:%B} {day.day}) the clocks of {a} and {b} are set otherwise than today, so it would be "
                f"{hours:g} h off")

    def reads(self, capability: Capability) -> bool:
        """Whether the call derived for a capability that may change something only reads, by the action it sets."""
        derived = self.of(capability)
        return self.change is None and isinstance(derived, tuple) and reads_by_its_action(capability, derived[0])

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

    def _with_fixed_paths(self, capability: Capability, derived: Derived, left: list[Any]) -> list[Any]:
        """The values the call leaves unused, for a call whose path the operator fixed (`fixed_arguments`): every
        path the question writes that the call does not take ("the git status of /srv/other" answered on the
        operator's repository would be about another one), but the fixed path itself, written out."""
        fixed = {digest for name, digest in capability.fixed if names_a_path(name, "")}
        if not fixed or not isinstance(derived, tuple) or derived[1] == "caller":
            return left

        def other(value: Any) -> bool:
            return not isinstance(value, str) or not fixed & {fixed_digest(value), fixed_digest(value.rstrip("/"))}

        taken = {p for v in derived[0].values() for p in (v if isinstance(v, list) else [v]) if isinstance(p, str)}
        return [v for v in left if other(v)] + [p for p in self.paths if p not in taken and p not in left and other(p)]

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
            self._derived[key], left = derive_with_leftovers(capability, self.request.question, self.request.arguments)
            self.left[key] = self._with_fixed_paths(capability, self._derived[key], left)
        return self._derived[key]
