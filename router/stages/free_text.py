"""Which parameter of a tool takes the question as it is: a query, a question or a prompt, as its name or description
says; not one in a formal language, an arithmetic expression, a path, or what a tool that may act writes or sends.

    free_text_parameter(search)     # "query"
"""

from __future__ import annotations

import re
from typing import Any

from router.schemas import choices_of, properties_of, required_of, type_of
from router.stages.written import EXPRESSION_DESCRIBED, takes_path
from router.values import Capability

FREE_TEXT_NAMES = frozenset({
    "query", "question", "q", "text", "prompt", "input", "message", "content", "search", "search_query",
    "topic", "request", "instruction", "task", "input_value", "msg", "keywords", "term", "sentence", "ask",
})
_FREE_TEXT_HINT = re.compile(r"\b(query|question|prompt|natural language|free[- ]text|search terms?)\b", re.I)
# A parameter in a formal language takes no English: "Delete all customers ..." is no SQL query. (A search
# "using code search syntax" or returning JSON still takes the question.)
_FORMAL = re.compile(r"\b(sql|jql|promql|graphql|cypher|xpath|jsonpath|shell command|regex pattern|"
                     r"regular expression to)\b", re.I)
_NATURAL = re.compile(r"natural[- ]language", re.I)


def is_free_text(name: str, spec: dict[str, Any]) -> bool:
    if type_of(spec) not in (None, "string") or choices_of(spec) is not None:
        return False
    described = str(spec.get("description", ""))
    if _FORMAL.search(f"{name.replace('_', ' ')} {described}") and not _NATURAL.search(described):
        return False
    if EXPRESSION_DESCRIBED.search(described) and not _FREE_TEXT_HINT.search(described):
        return False  # "A mathematical expression", not "A question, or a mathematical expression to compute"
    return name.lower() in FREE_TEXT_NAMES or bool(_FREE_TEXT_HINT.search(str(spec.get("description", ""))))


# What a tool writes or sends. Given the question, an action would write the request itself ("Post that the
# build is green" posting those words, "Add a task to buy milk" a task of that name): a tool that may act does not
# get it there, unless the parameter's description says first that it is a question, query or prompt.
CONTENT_NAMES = frozenset({"text", "message", "content", "msg", "sentence", "task"})
_ASKED_FOR = re.compile(r"\s*(?:the\s+|a\s+|your\s+|user'?s\s+)?(?:natural[- ]language\s+)?(?:question|query|prompt|"
                        r"search)\b", re.I)


def free_text_parameter(cap: Capability) -> str | None:
    """The parameter that takes the question as it is, if the tool has exactly one such slot."""
    props = properties_of(cap.input_schema)
    required = required_of(cap.input_schema)
    name = None
    if len(required) == 1:
        spec = props.get(required[0], {})
        if type_of(spec) in (None, "string") and is_free_text(required[0], spec):
            name = required[0]
    elif not required:
        texts = [n for n, s in props.items() if is_free_text(n, s)]
        name = texts[0] if len(texts) == 1 else None
    # Nor does a tool whose content slot is optional among other parameters: its text is one value among others
    # ("The text to wait for" beside the seconds to wait), which the whole request is not.
    among_others = not required and len(props) > 1
    if name is not None and (not cap.read_only or among_others) and name.lower() in CONTENT_NAMES \
            and not _ASKED_FOR.match(str(props.get(name, {}).get("description", ""))):
        return None
    return None if name is not None and takes_path(name, props.get(name, {})) else name  # a path is no question


# A search for a thing by its name or key ("Name or key prefix to search for"): the question whole is no such name.
_NAMES_ONLY = re.compile(r"^\s*(?:the\s+|a\s+)?(?:(?:full|partial|exact)\s+)?(?:name|key|title|slug|prefix)s?\b", re.I)


def takes_names_only(spec: dict[str, Any]) -> bool:
    """Whether a free-text parameter takes a thing's name, key or prefix rather than a question."""
    return _NAMES_ONLY.match(str(spec.get("description", ""))) is not None

