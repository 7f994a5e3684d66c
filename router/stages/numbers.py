"""A number the question gives, as a tool takes it: "1,000" and "1,5" read as their writers mean them, a whole number
sent whole, and a number that belongs to another value (a date, a time, an address, "4 million", "15%") taken for
none.

    number_in("Add 1,000 and 2", "a", {}, "number", lambda span: True)    # ((4, 9), 1000)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from router.stages.argument_order import last_word, words_for
from router.stages.currencies import in_minor_units, takes_minor_units
from router.stages.written import words_of

# "1,000" and "12,345.6" group thousands; otherwise a comma is a decimal mark ("1,5").
_THOUSANDS = r"-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?"
# Not the digits after "1.000," (the "5" of "1.000,5"), but "-74" after "40.7," is a number of its own; and each side
# of a size written "800x600" (or with the multiplication sign) is one.
NUMBER = re.compile(rf"(?:(?<![\w.])|(?<=\d[x\u00d7]))(?:(?=-)|(?<!\d,))(?<!\d,-)(?:{_THOUSANDS}|-?\d+(?:[.,]\d+)?)"
                    rf"(?!(?![x\u00d7]\d+(?:\.\d+)?(?![\dA-WYZa-wyz_]|[.,]\d))\w|[.,]\d)")


# Small numbers as words count too: "the last three commits", "the first two lines" ("one" is a pronoun as often).
_WORDS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
          if n >= 2} | {"fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100}
NUMBER_WORD = re.compile(rf"\b(?:{'|'.join(_WORDS)})\b(?!-)", re.I)


def numbers_in(question: str) -> list[re.Match[str]]:
    """Every number the question writes, in digits or as a word, in order."""
    return sorted([*NUMBER.finditer(question), *NUMBER_WORD.finditer(question)], key=lambda m: m.start())


def number_in(question: str, name: str, spec: dict[str, Any], kind: str,
              free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], Any] | None:
    """The span and value of the number the question gives the parameter `name` (JSON type `kind`: number or
    integer), where `free`: the one it names the parameter beside ("longitude -74 and latitude 40.7") first, then
    the first free one that is a value of its own."""
    words = [w for w in words_for(name) if len(w) >= 3]
    found = numbers_in(question)
    named = [m for m in found if words and re.search(
        rf"\b(?:{'|'.join(map(re.escape, words))})s?\s*(?:[:=]|of|is)?\s*$", question[max(0, m.start() - 30):m.start()],
        re.I)]
    # "a tip of 18%" is its value; a description that names another parameter (`percent_off`) makes none a share.
    share = bool(_SHARE_NAME.search(f"{' '.join(words_of(name))} {spec.get('description', '')}"))
    identifier = last_word(name) in _IDENTIFIERS
    cents = takes_minor_units(name, str(spec.get("description", "")))
    for m in [*named, *found]:
        if not free(m.span()) or _part_of_other_value(question, m.start(), m.end(), share):
            continue
        if identifier and m not in named and counts_things(question, m.end()):
            continue  # "the last 20 lines" counts lines: no process is numbered 20
        raw = str(_WORDS.get(m.group(0).lower(), m.group(0)))
        raw = raw.replace(",", "") if re.fullmatch(_THOUSANDS, raw) else raw.replace(",", ".")
        if len(raw) > _MAX_DIGITS:  # no tool takes such a number, and Python reads no more than 4,300 digits
            continue
        if cents:  # an amount in cents only where the question says which currency it counts
            if (minor := in_minor_units(question, m.span(), float(raw))) is None:
                continue
            return m.span(), minor
        if kind == "integer":
            if "." in raw.rstrip("0").rstrip("."):  # 2.5 is no integer; 2.0 is 2
                continue
            value: Any = int(raw.split(".")[0])  # exactly: an id of twenty digits is not rounded through a float
        else:
            value = int(raw) if raw.lstrip("+-").isdigit() else float(raw)  # 7, not 7.0: some servers index with it
            if not math.isfinite(value):  # four hundred digits are no number a tool can take
                continue
        return m.span(), value
    return None


def counts_things(question: str, end: int) -> bool:
    """Whether the number ending at `end` counts things: a plural follows it ("20 lines", "the last 5 commits")."""
    return _COUNTED.match(question, end) is not None


_MAX_DIGITS = 64
# A parameter that names one thing by its number, and a number that counts things ("20 lines", "3 commits").
_IDENTIFIERS = frozenset({"id", "pid", "uid", "gid", "port"})
_COUNTED = re.compile(r"\s+(?!(?:times|does|goes|always|perhaps)\b)[a-z]{3,}(?<![siu])s\b")  # not "status", "plus"
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
# A date's month before it, a time's or a range's first part ("11:00", "2-68"), or a name it ends ("worker-1",
# "us-east-1", "COVID-19"): taken for a number, "Drain node worker-1" drained with a grace period of 1 second.
_OTHER_VALUE_BEFORE = re.compile(rf"(?:\b{_MONTH}\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?|\d[:-]|[A-Za-z]-)$", re.I)
_OTHER_VALUE_AFTER = re.compile(rf"(?:\s*(?::\d|[ap]\.?m\b)|\s+{_MONTH}(?!\w)|-\d)", re.I)
# What makes a number mean another than itself: a scale ("4 million"), a hemisphere ("40.7° N", "74 W"; a
# temperature's "100°F" is its own), a share ("15%", unless the parameter takes one). Taken as a plain
# operand, "15% of 80" multiplied 15 by 80.
_QUALIFIED_AFTER = re.compile(r"\s*(?:(?:thousand|million|billion|trillion|bn|mn)\b|°(?!\s*[CFK]\b))|"
                              r"\s+[NSEW](?=\s*(?:[,;.?!)]|$|and\b))", re.I)
_SHARE_AFTER = re.compile(r"\s*(?:%|per ?cent\b)", re.I)
_SHARE_NAME = re.compile(r"(?<![^\W_])(?:percent|pct|rate|tip|discount|level|share|ratio|brightness|volume|opacity)"
                         r"(?!\w*_)", re.I)
_NAME_AFTER = re.compile(r"\s+[A-Z][a-z]")


def _part_of_other_value(question: str, start: int, end: int, share: bool = False) -> bool:
    """A number that belongs to a date ("August 8, 2008", "8 Aug"), a time ("11:00", "9 am"), a range or code
    ("2-68") or a name or address ("88 Century Avenue") is not an operand: taken for one, it made a latitude
    of a street number and a gender of a day of the month."""
    # What comes before is read within a window that holds a date's longest lead ("September 30th, "): read to
    # the start for every number, a long question of numbers took minutes.
    before = _OTHER_VALUE_BEFORE.search(question, max(0, start - 32), start)
    return bool(before or _OTHER_VALUE_AFTER.match(question, end) or _QUALIFIED_AFTER.match(question, end)
                or (not share and _SHARE_AFTER.match(question, end)) or _NAME_AFTER.match(question, end))
