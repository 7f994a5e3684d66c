"""A thing's name as a question writes it beside the kind of thing: "a branch called feature-x", "the users table",
"the table 'orders'". It fills a parameter named after that kind (`branch_name`, `tableName`), and nothing else:
a bare word is a name only next to the word for what it names."""

from __future__ import annotations

import re
from collections.abc import Callable

_KIND = re.compile(r"^([a-z]{3,})(?:_name|Name)$")  # branch_name, tableName; not `name` alone, nor `first_name`
_NOT_KINDS = frozenset({"first", "last", "full", "middle", "display", "user", "given", "family", "nick", "real"})
_QUOTED = r"\"([^\"\n]{1,100})\"|'([^'\n]{1,100})'|`([^`\n]{1,100})`|“([^”\n]{1,100})”"
_WORD = r"([\w][\w.\-/]{0,99}(?<![.\-/]))"
# Words that stand between "the" and a kind of thing without naming one ("the current branch", "the whole table").
_NOT_NAMES = frozenset(
    "a an the this that these those my your our their its his her each every any some all no which what whose "
    "current new old same other whole entire first last next previous prior default remote local following above "
    "below given specified selected active existing latest recent top bottom second third final original right "
    "wrong correct empty temporary only biggest largest smallest one two database sql git repo "
    "repository".split())

# A word between "the" and a kind of thing that ends as most English adjectives do ("the available roles", "the
# aeronautical charts", "the existing branch") describes the thing rather than names it; a name so ending ("the
# staging branch") is missed, not mistaken.
_DESCRIBES = re.compile(r"(?:al|ble|ive|ous|ic|ful|less|ent|ant|ary|ing|ed|est)$", re.I)


def loosely_named(question: str, span: tuple[int, int]) -> bool:
    """Whether the name at `span` is a bare word between "the" and its kind ("the users table"), not called so or
    quoted: a guess that a parameter the tool can do without does not take."""
    return question[:span[0]].lower().endswith("the ")


def kind_named_by(parameter: str) -> str | None:
    """The kind of thing a parameter takes the name of ("branch" of `branch_name`), else None."""
    found = _KIND.match(parameter)
    kind = found.group(1).lower() if found else None
    return kind if kind not in _NOT_KINDS else None


def name_in(question: str, parameter: str,
            free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], str] | None:
    """The span and value of the first name the question gives a thing of the parameter's kind, where `free`."""
    kind = kind_named_by(parameter)
    if kind is None:
        return None
    k = rf"{re.escape(kind)}(?:e?s)?"
    patterns = (rf"\b{k}\s+(?:called|named|titled)\s+(?:{_QUOTED}|{_WORD})",  # a branch called feature-x
                rf"\b{k}\s+(?:{_QUOTED})",  # the table "orders"
                rf"(?:{_QUOTED})\s+{k}\b",  # the "orders" table
                rf"\bthe\s+{_WORD}\s+{k}\b")  # the users table
    found: list[tuple[int, tuple[int, int], str]] = []
    for pattern in patterns:
        for m in re.finditer(pattern, question, re.I):
            group = next(g for g in range(1, (m.lastindex or 0) + 1) if m.group(g) is not None)
            value, span = m.group(group), m.span(group)
            if value.lower() in _NOT_NAMES or value.lower() == kind or not free(span) or (
                    pattern is patterns[-1] and _DESCRIBES.search(value)):
                continue
            found.append((span[0], span, value))
            break
    if not found:
        return None
    _, span, value = min(found)
    return span, value
