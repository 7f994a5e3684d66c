"""Which parameter a value the question gives goes to: an optional number only where the wording gives it that one
(`named_before`), and of two places, units or numbers, the one the wording says where it says otherwise than the
order of mention.

    put_in_order(out, spans, question, numbers=["a", "b"], choices={"from_unit", "to_unit"})
    named_before("list the first 10 things", "limit", (15, 17), [], [])    # True
    names_next_to("read the first 3 lines", "head", (15, 16))               # True
"""

from __future__ import annotations

import re
from typing import Any

from router.retrieval.text import split_identifier


def put_in_order(out: dict[str, Any], spans: dict[str, tuple[int, int]], question: str, *, numbers: list[str],
                 choices: set[str]) -> None:
    """Swap, in place, the values of derived arguments `out` (each taken from `spans` of the question) that the
    wording puts the other way round; `numbers` and `choices`: the parameters given a number, an enum value."""
    _source_where_the_time_is(out, spans)
    _source_where_the_amount_is(out, spans, question, choices)
    _minuend_first(out, spans, numbers, question)


_SOURCE, _TARGET = ("source", "from", "src", "base"), ("target", "to", "dest", "dst")


def _source_where_the_time_is(out: dict[str, Any], spans: dict[str, tuple[int, int]]) -> None:
    """"What time is it in New York when it is 9am in London?": the place named next to a time of day is
    the one that time is given in, the source, whichever place the question names first."""
    clock = next((n for n, v in out.items() if isinstance(v, str) and re.fullmatch(r"\d\d:\d\d", v)), None)
    source = next((n for n in out if n.lower().startswith(_SOURCE) and "zone" in n.lower()), None)
    target = next((n for n in out if n.lower().startswith(_TARGET) and "zone" in n.lower()), None)
    if clock is None or source is None or target is None:
        return

    def distance(name: str) -> int:
        (a, b), (c, d) = spans[name], spans[clock]
        return max(a - d, c - b, 0)

    if distance(target) < distance(source):
        out[source], out[target] = out[target], out[source]


def _source_where_the_amount_is(out: dict[str, Any], spans: dict[str, tuple[int, int]], question: str,
                                choices: set[str]) -> None:
    """"How many km is 5 miles?", "How many EUR is 100 USD?": of a from and a to unit or currency, the one written
    right after an amount is the one it is given in, the source, whichever the question names first."""
    source = next((n for n in out if n.lower().startswith(_SOURCE) and n in choices), None)
    target = next((n for n in out if n.lower().startswith(_TARGET) and n in choices), None)
    if source is None or target is None:
        return
    if _AMOUNT_BEFORE.search(question[:spans[target][0]]) and not _AMOUNT_BEFORE.search(question[:spans[source][0]]):
        out[source], out[target] = out[target], out[source]


_AMOUNT_BEFORE = re.compile(r"\d\s?$")
_FROM = re.compile(r"\b(?:subtract|deduct|take(?:\s+away)?|remove)\s+\S+\s+(?:away\s+)?from\s+\S+", re.I)


def _minuend_first(out: dict[str, Any], spans: dict[str, tuple[int, int]], numbers: list[str],
                   question: str) -> None:
    """"Subtract 5 from 20": the number after "from" is the one subtracted from, the first operand."""
    if len(numbers) != 2:
        return
    first, second = sorted(numbers, key=lambda n: spans[n][0])
    m = _FROM.search(question)
    if m and m.start() <= spans[first][0] and spans[second][1] <= m.end() and list(out).index(first) < list(
            out).index(second):
        out[first], out[second] = out[second], out[first]


def named_before(question: str, name: str, span: tuple[int, int], others: list[str], rivals: list[str]) -> bool:
    """Whether a number may fill the optional parameter `name`: yes where the question names the parameter
    next to it ("limit 10", "a limit of 10", "in 3 days", "top 10", "the first 3 lines" for `head`); otherwise not
    where it names another of the tool's parameters ("with start_index 5000" gives no `max_length`), nor after a
    word that gives it another role ("the invoices from 2024", "over 500 dollars", "in 2023"), nor where another
    optional number of the tool (`rivals`) could take it as well: of `tail` and `head`, the first took "the first
    3 lines" and read the last three."""
    if names_next_to(question, name, span) or starts_at(question, name, span):
        return True
    return not _OTHER_ROLE.search(question[max(0, span[0] - 30):span[0]].lower()) and not any(
        names_next_to(question, other, span, 2) for other in others) and not rivals


# A parameter that says where output starts (`start_index`, `offset`, `skip`), and the words that give a number that
# role: "from character 1000", "starting at line 20", "skip the first 50 results", "after the first 10", "excluding the
# first 10".
_START_WORDS = frozenset({"start", "offset", "skip", "begin", "from"})
# "From" only before a unit it counts: "the invoices from 2024" start nowhere.
_STARTS = re.compile(r"\b(?:(?:starting|beginning)\s+(?:at|from|with)|skip(?:ping)?|excluding|omitting|ignoring)\s+"
                     r"(?:the\s+)?(?:first\s+)?(?:[a-z]+\s+)?$|\b(?:from|past|after)\s+(?:the\s+first\s+|(?:the\s+)?"
                     r"(?:character|char|line|byte|row|item|result|record|entry|position)s?\s+)$", re.I)


def position(parameter: str) -> bool:
    """Whether the parameter says where output starts (`offset`, `start_index`, a `page`), not how much of it
    (`perPage`)."""
    words = _words(parameter)
    return bool(words) and words[-1] in _START_WORDS | {"page", "index", "cursor"} and "per" not in words


def last_word(parameter: str) -> str:
    """The last word of a parameter's name, lower-cased (`start_index`: index; `perPage`: page)."""
    words = _words(parameter)
    return words[-1] if words else ""


def _words(parameter: str) -> list[str]:
    return split_identifier(parameter).lower().split()


def starts_at(question: str, parameter: str, span: tuple[int, int]) -> bool:
    """Whether the number at `span` says where output starts, for a parameter that takes that."""
    return bool(_START_WORDS & set(name_words(parameter, 3))) and \
        _STARTS.search(question[max(0, span[0] - 40):span[0]]) is not None


def names_next_to(question: str, parameter: str, span: tuple[int, int], between: int = 0) -> bool:
    """Whether the question names the parameter right before the value at `span` (up to `between` words between)
    or right after it ("a limit of 10", "the first 3 lines" for `head`, "5 seconds" for `duration`)."""
    before, after = question[max(0, span[0] - 30):span[0]].lower(), question[span[1]:span[1] + 30]
    words = "|".join(map(re.escape, words_for(parameter)))
    gap = rf"(?:\s+\w+){{0,{between}}}"
    return bool(re.search(rf"\b(?:{words})(?:e?s|ing|ed)?{gap}\s*(?:of|is|[:=])?\s*$", before)
                or re.match(rf"\s*(?:{words})(?:e?s)?\b", after, re.I))


def name_words(name: str, shortest: int) -> list[str]:
    """The words of a parameter's name ("max_results", "maxResults" -> max, results), as a question would write
    them."""
    return [w for w in re.split(r"[_\W]+", split_identifier(name).lower()) if len(w) >= shortest]


# How questions name parameters whose names are commands' words (`head` and `tail` take a file's first and last
# lines), and a length of time given in seconds.
_SAID_AS = {"head": ("first", "top"), "tail": ("last", "bottom", "final")}
_TIMED = frozenset({"duration", "timeout", "delay", "interval", "wait", "sleep", "seconds", "secs"})
_OTHER_UNITS = frozenset({"ms", "millis", "milliseconds", "minutes", "mins", "hours", "hrs", "days"})


def words_for(parameter: str) -> list[str]:
    """The words a question names the parameter by."""
    words = name_words(parameter, 2)
    timed = ("seconds", "second", "secs", "sec") if _TIMED & set(words) and not _OTHER_UNITS & set(words) else ()
    return [parameter.lower(), *words, *_SAID_AS.get(parameter.lower(), ()), *timed]


# "Maximum number of characters to return", "Timeout in milliseconds": the unit a parameter's value counts.
_COUNTED = re.compile(r"\b(?:number|count|amount)\s+of\s+([a-z]{3,}s)\b|\bin\s+([a-z]{3,}s)\b", re.I)


def counted_in(spec: dict[str, Any]) -> str | None:
    """The unit, plural, in which the parameter's description says its number counts ("characters"), else None."""
    found = _COUNTED.search(str(spec.get("description", "")))
    return next(g for g in found.groups() if g).lower() if found else None


_PASSED = re.compile(r"\b(?:skip|skipping|after|past|beyond|starting|more|less|fewer)\b(?:\W+\w+){0,2}\W*$", re.I)


def unit_after(question: str, span: tuple[int, int], unit: str) -> bool:
    """Whether the question writes `unit` (or its singular) right after the number at `span` ("the first 500
    characters"), and gives the number no other role before it ("Skip the first 5000 characters" starts there,
    "more than 280 characters" compares)."""
    before = question[max(0, span[0] - 30):span[0]]
    return re.match(rf"\s*{re.escape(unit[:-1])}s?\b", question[span[1]:], re.I) is not None and not (
        _OTHER_ROLE.search(before.lower()) or _PASSED.search(before))


_OTHER_ROLE = re.compile(r"\b(?:from|in|since|until|till|before|after|over|under|above|below|than|between|of|at|"
                         r"on|by|during|around|about|per)\W*$")
