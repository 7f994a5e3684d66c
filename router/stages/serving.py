"""What of a question a capability can serve, whatever its arguments: the kinds of value it carries (amounts
in a currency), a request to change something (which a read-only tool cannot do), and the words a call that
takes nothing from the question would have to be about. The plan stage declines a call that cannot serve the
question rather than make it."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from router.retrieval.text import CJK, STOP_WORDS, stem, tokenize, words
from router.values import Capability

# Kinds of value a question can carry that only some tools take. A tool whose own texts (name, description,
# parameters) never name the kind cannot serve such a value, however close its other words are: "Convert 100
# USD to EUR" is not a unit conversion. (An ISO code counts in capitals only: "eur" is a word's part.)
VALUE_KINDS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "currency": (
        re.compile(r"(?<![A-Za-z])(?:USD|EUR|GBP|JPY|CNY|RMB|CHF|CAD|AUD|NZD|INR|KRW|BRL|MXN|SEK|NOK|DKK|PLN|HKD|"
                   r"SGD|ZAR|TRY|RUB|BTC|ETH)(?![A-Za-z])|[$€£¥₹]\s?\d|\d\s?[$€£¥₹]|"
                   r"(?i:\b(?:dollars?|euros?|yen|rupees?|pounds sterling|bitcoins?)\b)"),
        re.compile(r"(?i)currenc|exchange|forex|\bfx\b|money|price|payment|invoice|stock|crypto|bitcoin|"
                   r"\b(?:usd|eur|gbp|dollars?|euros?)\b"),
    ),
}


def value_kinds(question: str) -> dict[str, list[str]]:
    """The kinds of `VALUE_KINDS` the question carries, with the values found."""
    found = {kind: [m.group(0).strip() for m in given.finditer(question)] for kind, (given, _) in VALUE_KINDS.items()}
    return {kind: values for kind, values in found.items() if values}


# Verbs that, leading a request, ask for something to be changed, which a tool declared read-only cannot do
# ("Remember that Bob likes tea" is not answered by reading the memory). Verbs that also ask for output
# ("create a chart", "write a poem", "add 3 and 4") are left out, and so are "set up" (as often a request for
# instructions) and "turn" but for "turn on" and "turn off" ("turn this into a poem" asks for output).
_CHANGE_VERBS = frozenset({"remember", "save", "store", "forget", "delete", "remove", "erase", "send", "post",
                           "publish", "upload", "update", "rename", "move", "insert", "book", "schedule", "cancel",
                           "set", "reset", "clear", "enable", "disable", "turn"})
_NOT_A_CHANGE = re.compile(r"set\s+up\b|turn\b(?!\s+(?:on|off)\b)")
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
    return verb


# Words that, leading a question, ask only to be told something ("List all entities in memory" is not a request
# to delete any), unless a verb that can only mean a change follows ("Find the duplicates and delete them"; "set",
# "post", "book" and the like are nouns as often).
_READ_LEADS = frozenset({"list", "show", "display", "view", "read", "find", "search", "look", "fetch", "print",
                         "count", "tell", "what", "which", "who", "whose", "where", "when", "is", "are", "does"})
_ONLY_CHANGE = sorted(_CHANGE_VERBS - {"post", "book", "schedule", "set", "reset", "clear", "enable", "disable",
                                       "turn", "move"})
_ONLY_CHANGES = re.compile(rf"\b(?:{'|'.join(_ONLY_CHANGE)})\b", re.I)
_TELL_ME = re.compile(r"\s+(?:me|us)\b")  # after the lower-cased leading word


def asks_to_read(question: str) -> str | None:
    """The word a question that only asks to be told something starts with ("What ...", "Please list ..."),
    else None."""
    word, rest = _leading_word(question)
    if word not in _READ_LEADS or _ONLY_CHANGES.search(question):
        return None
    if word == "tell" and not _TELL_ME.match(rest):
        return None  # "tell me ..." asks; "tell Bob ..." sends
    return word


# A request for one way of a switch ("Turn off the simulated logs", "Please disable alerts"), and a tool that
# switches whichever way things are ("Toggles simulated logging on or off") without being told which (no
# boolean or enumerated parameter): called for such a request, it acts on a guess about the state now, which
# the router cannot see, and does the opposite of what was asked when the guess is wrong.
_ONE_WAY = re.compile(r"(?:turn|switch)\s+(?:on|off)\b|(?:enable|disable|activate|deactivate|start|stop|pause|"
                      r"resume|mute|unmute)\b")
_TOGGLE_NAME = re.compile(r"(?:^|[^a-z])toggle", re.I)
_TOGGLE_DESCRIPTION = re.compile(r"\s*toggles?\b", re.I)


def asks_one_way(question: str) -> str | None:
    """The words of a request to switch something one way ("turn off", "enable"), else None."""
    verb, rest = _leading_word(question)
    found = _ONE_WAY.match(verb + rest)
    return found.group(0) if found else None


def toggles(cap: Capability) -> bool:
    """Whether the tool switches something whichever way it is, not being told which way."""
    if not (_TOGGLE_NAME.search(cap.name) or _TOGGLE_DESCRIPTION.match(cap.description)):
        return False
    props = cap.input_schema.get("properties") if isinstance(cap.input_schema, dict) else None
    specs = props.values() if isinstance(props, dict) else ()
    return not any(isinstance(p, dict) and (p.get("type") == "boolean" or "enum" in p) for p in specs)


# Two letters in a row (of any script), a digit, or one CJK character: something a question can be routed by.
_READABLE = re.compile(rf"[^\W\d_]{{2}}|\d|{CJK.pattern}")


def readable(question: str) -> bool:
    """Whether the question has a word or a number at all ("÷Ø" has neither: whatever it is closest to, that
    is chance, and a tool called for it answers noise or an error)."""
    return _READABLE.search(question) is not None


def unserved(cap: Capability, kinds: dict[str, list[str]]) -> str | None:
    """The first kind of the question's values the capability's texts never name (None: it may serve them)."""
    named = _kinds_named(f"{cap.name} {cap.title or ''} {cap.description} {_schema_words(cap.input_schema)}")
    return next((kind for kind in kinds if kind not in named), None)


@lru_cache(maxsize=16384)
def _kinds_named(text: str) -> frozenset[str]:
    """The kinds a capability's texts name, once per text: each pattern is an alternation without a literal
    prefix, some 40 µs a search, which every candidate of every question carrying a value paid."""
    return frozenset(kind for kind, (_, names) in VALUE_KINDS.items() if names.search(text))


# Words that ask for an answer rather than say what it is about, or say only how much of it ("everything in
# memory" asks for the whole of what the reader returns): they need no echo in a capability's texts.
_ASKING = frozenset(map(stem, "show list get print display see find fetch return provide want need like know "
                              "everything anything whole entire every".split()))


def unmatched_words(cap: Capability, question: str, server_description: str = "") -> list[str]:
    """The question's content words (lower-cased) that nothing in the capability's texts, or its server's
    description, names."""
    own = set(tokenize(f"{cap.backend} {cap.name} {cap.title or ''} {cap.description} "
                       f"{_schema_words(cap.input_schema)} {server_description}"))
    out: dict[str, str] = {}
    for word in words(question):
        s = stem(word)
        if word not in STOP_WORDS and len(word) > 1 and s not in own and s not in _ASKING:
            out.setdefault(s, word)
    return list(out.values())


def _schema_words(schema: Any) -> str:
    if isinstance(schema, dict):
        return " ".join(f"{k} {_schema_words(v)}" for k, v in schema.items())
    if isinstance(schema, list):
        return " ".join(_schema_words(v) for v in schema)
    return schema if isinstance(schema, str) else ""
