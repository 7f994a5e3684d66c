"""Postal addresses and routes, read from a question for the parameters that take them.

    address_part(question, "zipCode", "The 5-digit ZIP code", free)    # ((62, 67), "10001")
    route_end(question, "destination", free)                          # ((28, 36), "New York")

A street address is a house number, one to four words and a street type ("123 Main St", "1600 Amphitheatre
Parkway"), then what follows it after commas: a unit ("Apt 4B", "Suite 789"), a city, a state's two-letter code and
a ZIP code ("..., New York, NY, 10001"). A parameter for the whole address takes all of it; one for a part
(`addressLine1`, `city`, `zipCode`) takes that part, and only from such an address: "the weather in Boston" gives no
`city` here. A route is "from A to B" (or "between A and B"), each end a place written with capitals ("from the
Louvre to Notre Dame"), for parameters named for its ends (`origin`, `destinations`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from router.stages.written import words_of

Found = tuple[tuple[int, int], str]

_TYPE = (r"(?:Street|St|Avenue|Ave|Road|Rd|Drive|Dr|Boulevard|Blvd|Lane|Ln|Way|Court|Ct|Place|Pl|Parkway|Pkwy|"
         r"Terrace|Ter|Circle|Cir|Highway|Hwy|Square|Sq|Trail|Trl|Plaza|Alley)\.?(?:\s+[NS][EW])?")
_WORD = r"(?:[A-Z][\w'.-]*|\d+(?:st|nd|rd|th))"
_CAPITALISED = r"[A-Z][a-z][\w.'-]*"  # a city's word: not a state's code ("NY")
ADDRESS = re.compile(
    rf"(?<![\w-])(?P<line1>\d{{1,6}}[A-Z]?\s+(?:{_WORD}\s+){{1,4}}?{_TYPE})(?![\w-])"
    r"(?:,?\s+(?P<line2>(?:Apt|Apartment|Suite|Ste|Unit|Flr|Floor|Fl|Rm|Room|Bldg)\.?\s*#?\s*[\w-]+|#\s*[\w-]+))?"
    rf"(?:,\s*(?P<city>{_CAPITALISED}(?:\s+{_CAPITALISED}){{0,3}}))?"
    r"(?:,?\s+(?P<state>[A-Z]{2})(?![\w-]))?(?:,?\s+(?P<zip>\d{5}(?:-\d{4})?)(?![\w-]))?")

# The part of an address a parameter takes, by the words of its name, digits apart (`addressLine1`: address line 1).
_PARTS: dict[tuple[str, ...], str] = {
    ("address",): "whole", ("full", "address"): "whole", ("postal", "address"): "whole",
    ("mailing", "address"): "whole", ("address", "line", "1"): "line1", ("address", "1"): "line1",
    ("line", "1"): "line1", ("street",): "line1", ("street", "address"): "line1", ("address", "line", "2"): "line2",
    ("address", "2"): "line2", ("line", "2"): "line2", ("city",): "city", ("town",): "city", ("locality",): "city",
    ("state",): "state", ("zip",): "zip", ("zipcode",): "zip", ("zip", "code"): "zip", ("postal", "code"): "zip",
    ("postcode",): "zip", ("postalcode",): "zip"}
# An "address" that is none a letter is sent to.
_NOT_POSTAL = re.compile(r"\b(?:e-?mail|ip|mac|wallet|contract|web|url|memory|hex|ethereum|bitcoin)\b", re.I)


def address_part(question: str, parameter: str, description: str,
                 free: Callable[[tuple[int, int]], bool]) -> Found | None:
    """The span and value of the part of the question's first street address (where `free`) that the parameter takes
    by its name; None for a parameter that takes none, or where the question writes no street address."""
    part = _PARTS.get(tuple(w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", parameter)))
    if part is None or (part == "whole" and _NOT_POSTAL.search(description)):
        return None
    for m in ADDRESS.finditer(question):
        group = 0 if part == "whole" else part
        if m.group(group) is not None and free(m.span(group)):
            return m.span(group), m.group(group).strip()
    return None


_NOT_PLACES = (r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|January|February|March|April|May|June|July|August|"
               r"September|October|November|December")  # "from Monday to Friday" is no route
_PLACE = rf"(?:the\s+)?(?!(?:{_NOT_PLACES})\b)[A-Z][\w'.-]*(?:\s+(?:[A-Z][\w'.-]*|de|du|la|le|of|on|upon|am))*"
_END = r"(?=\s*(?:[.,;:!?)]|$|\b(?:by|via|on|in|at|for|with|and|using|tomorrow|today|tonight|now)\b))"
_ROUTE = re.compile(rf"\b(?:(?i:from)\s+(?P<a>{_PLACE})\s+(?i:to)\s+(?P<b>{_PLACE}){_END}|"
                    rf"(?i:between)\s+(?P<c>{_PLACE})\s+and\s+(?P<d>{_PLACE}){_END})")
_ENDS = {"origin": 0, "origins": 0, "destination": 1, "destinations": 1}


def route_end(question: str, parameter: str, free: Callable[[tuple[int, int]], bool]) -> Found | None:
    """The span and place of the end of the question's route ("from Boston to New York") that the parameter is
    named for, where `free`; None for another parameter, or where the question gives no route."""
    words = words_of(parameter)
    end = _ENDS.get(words[-1]) if words else None
    if end is None or len(words) > 2:
        return None
    for m in _ROUTE.finditer(question):
        group = ("a", "b")[end] if m.group("a") else ("c", "d")[end]
        if free(m.span(group)):
            return m.span(group), m.group(group)
    return None
