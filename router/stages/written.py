"""Values a question writes out as a tool takes them: a web address ("Fetch https://example.com/a"), an arithmetic
expression ("Calculate (3 + 4) * 12"); and the parameters that take one, by their name or description.

    first_free(URL, "Fetch https://example.com.", free)    # ((6, 25), "https://example.com")
    takes_url("image_url", "")                            # True; "curl", "url_count": False
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A web address with its scheme (or "www."), without a sentence's closing punctuation or brackets around it.
URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"'`]+(?<![.,;:!?)\]}])", re.I)
_URL_WORDS = frozenset({"url", "uri", "link", "href", "website", "webpage", "homepage", "endpoint"})
_URL_DESCRIBED = re.compile(r"\b(?:url|web ?page|website|web address|link to)\b", re.I)
# Numbers joined by operators, brackets allowed: "(3 + 4) * 12", "2^10", "17 \u00d7 23"; not a lone number, nor a
# date or a number range written with hyphens ("2024-01-05", "10-12"), which no one writes as a subtraction.
_NUMBER = r"\(*\s*-?\d+(?:\.\d+)?\s*\)*"
EXPRESSION = re.compile(rf"{_NUMBER}(?:\s*(?:\*\*|[-+*/\u00d7\u00f7^%])\s*{_NUMBER})+")
_DATE_OR_RANGE = re.compile(r"^\d+(?:-\d+)+$")
_EXPRESSION_WORDS = frozenset({"expression", "expr", "formula", "equation", "calculation", "arithmetic"})
_EXPRESSION_DESCRIBED = re.compile(r"\b(?:math(?:ematical)?|arithmetic(?:al)?|numeric(?:al)?) expression\b", re.I)


def _words(name: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)]


def takes_url(name: str, description: str) -> bool:
    """Whether a parameter is for a web address: its name ends with a word for one (`url`, `image_url`, `pageLink`)
    or its description calls it a URL, a web page or a website."""
    words = _words(name)
    return (bool(words) and words[-1] in _URL_WORDS) or bool(_URL_DESCRIBED.search(description))


def takes_expression(name: str, description: str) -> bool:
    """Whether a parameter is for an arithmetic expression (`expression`, `formula`; "A mathematical expression")."""
    words = _words(name)
    return (bool(words) and words[-1] in _EXPRESSION_WORDS) or bool(_EXPRESSION_DESCRIBED.search(description))


def expression(text: str) -> str | None:
    """The expression as a calculator reads it (the multiplication and division signs as "*" and "/"), or None for
    a date or a range."""
    text = text.strip()
    if _DATE_OR_RANGE.match(text) or text.count("(") != text.count(")"):
        return None
    return text.replace("\u00d7", "*").replace("\u00f7", "/")


def first_free(pattern: re.Pattern[str], question: str, free: Callable[[tuple[int, int]], bool],
               read: Callable[[str], str | None] = lambda s: s) -> tuple[tuple[int, int], str] | None:
    """The span and value of the first match of `pattern` where `free` that `read` accepts."""
    for m in pattern.finditer(question):
        value = read(m.group(0))
        if value is not None and free(m.span()):
            return m.span(), value
    return None
