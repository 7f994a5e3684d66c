"""Which of a parameter's choices (its enum) the question names.

    choice_in("Show the biggest files", ["name", "size"], free)    # ((9, 16), "size")

A choice is named by its own word ("sorted by size", "as JSON"), or, for an order, by what that order puts first
("the biggest file" in a listing sorted by size; "the latest posts" by date). The first one the question names, where
`free`, is the one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_LARGEST = "biggest|largest|smallest|heaviest|lightest|bigger|larger|smaller"
_NEWEST = "newest|oldest|latest|earliest|most\\s+recent(?:ly)?|least\\s+recent(?:ly)?"
_BY = {"size": _LARGEST, "bytes": _LARGEST, "date": _NEWEST, "time": _NEWEST, "modified": _NEWEST,
       "mtime": _NEWEST, "updated": _NEWEST, "created": _NEWEST, "newest": _NEWEST, "recent": _NEWEST,
       "price": "cheapest|priciest|most\\s+expensive|least\\s+expensive|cheaper|dearer"}

_WORDS = frozenset("a an and are as at be by do go he hi if in is it me my no of ok on or so to up us we all any "
                   "can for get has her him his how its may new not now one our out per see she the too two was who "
                   "why yes you".split())


def choice_in(question: str, values: list[Any], free: Callable[[tuple[int, int]], bool]
              ) -> tuple[tuple[int, int], Any] | None:
    """The span and value of the first of `values` the question names where `free` (None: it names none)."""
    found = []
    for value in values:
        if not isinstance(value, str) or not value:
            continue
        pattern = re.escape(value).replace("_", "[ _]").replace(r"\-", "[ -]")
        # A code that is also a common word ("IN", "US", "IT") counts in capitals only: "in Germany" does not name
        # India; "usd" and "csv" are codes however written.
        code = value.isupper() and value.lower() in _WORDS
        for m in re.finditer(rf"(?<!\w){pattern}{'' if code else '(?:e?s)?'}(?!\w)", question, 0 if code else re.I):
            if free(m.span()):
                found.append((m.start(), m.span(), value))
                break
    if not found:
        found = [(by.start(), by.span(), value) for value in values if isinstance(value, str)
                 and (words := _BY.get(value.lower())) is not None
                 and (by := re.search(rf"\b(?:{words})\b", question, re.I)) is not None and free(by.span())]
    if not found:
        return None
    _, span, value = min(found)  # the first named; of two named there, the shorter
    return span, value


# Choices a description lists as examples, bare ("Type of resource (e.g., pods, deployments, services, ...)").
_LISTED = re.compile(r"\b(?:e\.g\.?|for example|such as)\s*,?\s*((?:[A-Za-z][\w-]*\s*,\s*)+(?:(?:or|and)\s+)?"
                     r"[A-Za-z][\w-]*)", re.I)


def listed_choices(description: str) -> list[str]:
    """The words a description lists as examples of a parameter's values, each plural with its singular after it
    ("pods", "pod"): an open set of choices, which a required parameter may take when no value of its own kind is
    there."""
    found = _LISTED.search(description)
    words = [w for w in re.split(r"\s*,\s*|\s+(?:or|and)\s+", found.group(1)) if w.lower() != "etc"] if found else []
    return [form for w in words for form in ((w, w[:-1]) if w.endswith("s") and len(w) > 3 else (w,))]
