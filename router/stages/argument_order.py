"""The order of values a question gives in its own order: which of two places, units or numbers goes to which
parameter, where the wording says otherwise than the order of mention.

    put_in_order(out, spans, question, numbers=["a", "b"], choices={"from_unit", "to_unit"})
"""

from __future__ import annotations

import re
from typing import Any


def put_in_order(out: dict[str, Any], spans: dict[str, tuple[int, int]], question: str, *, numbers: list[str],
                 choices: set[str]) -> None:
    """Swap, in place, the values of derived arguments `out` (each taken from `spans` of the question) that the
    wording puts the other way round; `numbers` and `choices`: the parameters given a number, an enum value."""
    _source_where_the_time_is(out, spans)
    _source_where_the_amount_is(out, spans, numbers, choices)
    _minuend_first(out, spans, numbers, question)


_SOURCE, _TARGET = ("source", "from", "src"), ("target", "to", "dest", "dst")


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


def _source_where_the_amount_is(out: dict[str, Any], spans: dict[str, tuple[int, int]], numbers: list[str],
                                choices: set[str]) -> None:
    """"How many km is 5 miles?": of a from and a to unit, the one written right after the amount is the one it
    is given in, the source, whichever the question names first."""
    amount = numbers[0] if numbers else None
    source = next((n for n in out if n.lower().startswith(_SOURCE) and n in choices), None)
    target = next((n for n in out if n.lower().startswith(_TARGET) and n in choices), None)
    if amount is None or source is None or target is None:
        return
    after = spans[amount][1]
    if 0 <= spans[target][0] - after <= 1 and not 0 <= spans[source][0] - after <= 1:
        out[source], out[target] = out[target], out[source]


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
