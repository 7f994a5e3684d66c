"""Deriving a tool's arguments from the question, without an LLM, and never silently.

    args, source = derive_arguments(capability, question, given=None)
    # ({"query": "..."}, "question")  or  ({"timezone": "Asia/Tokyo"}, "extracted: timezone")

The rules, in order: the caller's arguments win; a tool whose one required parameter is free text (query,
question, text, prompt, ...) gets the question; otherwise each parameter is extracted from the question by
its JSON-schema shape (an enum value named in the question, a word in the schema's pattern, an IANA time zone from a
city or a one-clock country, a time of day, a path, a web address, a currency, a sheet or cells, a thing's name or
identifier, numbers in order: extractors.py), the required ones first, an optional one only where the question gives
it a value. If any required parameter is left, the result is an `ArgumentsRequired` (422)
naming the tool and its schema. Whatever the router derived is then validated against the tool's
input schema (JSON Schema, the draft the schema names), so a value that does not fit is an
`ArgumentsInvalid` (422) naming the field, never a malformed call; the caller's own arguments go to the
backend as given. The source of every argument set is reported in the routing metadata.
"""

from __future__ import annotations

import re
from typing import Any

from router.errors import ArgumentsRequired, BackendNotCallable
from router.retrieval.catalog import is_server_level
from router.schemas import (
    properties_of,
    required_of,
    schema_violation,
    stated_default,
    type_of,
    with_defaults,
)
from router.stages.argument_order import (
    counted_in,
    last_word,
    named_before,
    names_next_to,
    position,
    put_in_order,
    starts_at,
    unit_after,
)
from router.stages.extractors import (
    ACTING_EXTRACTORS,
    EXTRACTORS,
    Extractor,
    currency,
    enum,
    identifier,
    listed,
    number,
    pattern_of,
    patterned,
    repository,
    thing_name,
)
from router.stages.free_text import free_text_parameter, takes_names_only
from router.stages.names import (
    loosely_named,
    what_an_update_changes,
)
from router.stages.numbers import counts_things, numbers_in
from router.stages.search_terms import own_words, says_more, search_terms, takes_search_terms
from router.stages.written import (
    named_beside,
)
from router.values import Capability

Derived = tuple[dict[str, Any], str] | ArgumentsRequired
NONE_NEEDED = "none needed"  # the source of a call that takes nothing from the question
AS_NAMED = "(as named)"  # after a parameter in the source: a name, identifier or repository the question gives
OPTIONAL_ONLY = "extracted, optional: "  # of one that needs nothing, but takes values the question gives


def needs_nothing(derived: Derived) -> bool:
    """Whether a derived call needs nothing of the question (it may still take optional values it gives)."""
    return isinstance(derived, tuple) and (derived[1] == NONE_NEEDED or derived[1].startswith(OPTIONAL_ONLY))


def derive_arguments(cap: Capability, question: str, given: dict[str, Any] | None = None) -> Derived:
    """Arguments for `cap` and where they came from, or the `ArgumentsRequired` (422) naming what is
    missing: a candidate that cannot take the question is an expected outcome, not an exception."""
    return derive_with_leftovers(cap, question, given)[0]


def derive_with_leftovers(cap: Capability, question: str, given: dict[str, Any] | None = None
                          ) -> tuple[Derived, list[Any]]:
    """`derive_arguments`, and the values the question gives of a kind the derived arguments take that none
    of them took: "the time difference between Tokyo and Paris" names two places, and the current time of
    one leaves the other. Both come from one reading of the question."""
    # Held and uncallable whoever gives the arguments: the review holds the tool, not one way of asking.
    if cap.held:
        return BackendNotCallable(
            f"tool {cap.name!r} of backend {cap.backend!r} is held out of routing ({cap.held}) until an operator "
            f"approves it (`mcp-router approve {cap.backend}/{cap.name} --config PATH`); name another backend "
            "meanwhile",
            backend=cap.backend, tool=cap.name), []
    if is_server_level(cap) and cap.target is None:
        return BackendNotCallable(
            f"backend {cap.backend!r} was chosen by its description, but it lists no tools, so there is nothing to "
            "call on it yet; it becomes callable once it lists its tools (or name another backend)",
            backend=cap.backend), []
    if given is not None:
        lacking = [] if cap.kind in ("resource", "flow") else [n for n in required_of(cap.input_schema)
                                                                 if n not in given]
        if lacking:
            # A call the tool would refuse is never made: the caller hears which argument is missing.
            return ArgumentsRequired(
                f"tool {cap.name!r} of backend {cap.backend!r} needs the argument {lacking[0]!r}, which "
                f"`arguments` does not give", backend=cap.backend, tool=cap.name, missing=lacking[0],
                input_schema=cap.input_schema), []
        return (with_defaults(cap.input_schema, given), "caller"), []
    if cap.kind in ("resource", "flow"):
        return ({}, NONE_NEEDED), []
    derived, left = _derive(cap, question)
    if isinstance(derived, ArgumentsRequired):
        return derived, []
    derived = (with_defaults(cap.input_schema, derived[0]), derived[1])
    invalid = schema_violation(cap, derived[0])
    return (invalid, []) if invalid is not None else (derived, left)


def _derive(cap: Capability, question: str) -> tuple[Derived, list[Any]]:
    free = free_text_parameter(cap)
    if free is not None:
        named = takes_names_only(properties_of(cap.input_schema).get(free, {}))
        terms = search_terms(question, own_words(cap.name, cap.description, cap.backend), own_words(cap.backend)) \
            if takes_search_terms(free) or named else None
        if named and not terms:  # "List all Jira projects" is no project's name to look for
            return _not_derived(cap, free), []
        derived = ({free: terms}, f"search terms as {free!r}") if terms else ({free: question}, f"question as {free!r}")
        return derived, []
    props = properties_of(cap.input_schema)
    required = required_of(cap.input_schema)
    used: list[tuple[int, int]] = []
    out: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    by: dict[str, Extractor] = {}
    dropped: dict[tuple[int, int], Any] = {}  # numbers another optional number could take as well
    beside: list[set[str]] = []  # the parameters the question names beside a number, found once when first asked
    described: list[str] = []  # required, left unfilled, with a value their description says to use then
    # Schema order: for two parameters of one kind (source and target zone) the first mention goes first. The
    # optional ones come after, and take a value only where the question gives one: "the resource with id 5"
    # answered with the default resource 1 when they were left to their defaults.
    order = [n for n in props if n in required] + [n for n in required if n not in props] + \
        [n for n in props if n not in required]
    # A key written beside its parameter's word ("epic PROJ-100") is that parameter's before others take keys in order.
    order.sort(key=lambda n: not named_beside(question, n, pattern_of(props.get(n, {}))))
    for name in order:
        spec = props.get(name, {})
        for extract in EXTRACTORS if cap.read_only else ACTING_EXTRACTORS:
            if (value := extract(question, name, spec, used)) is not None:
                if name not in required and ((extract is number and not _optional_number(
                        question, name, used[-1], value, props, required, dropped, beside))
                                             or (extract is thing_name and loosely_named(question, used[-1]))):
                    used.pop()  # "the invoices from 2024" gives no page size, "the aeronautical charts" no chart
                    value = None
                break
        if value is None and name in required:  # an open set of choices, as a last resort: "(e.g., pods, ...)"
            value, extract = listed(question, name, spec, used), listed
        if value is None:
            if name not in required:
                continue
            if stated_default(spec) is not None:
                described.append(name)
                continue
            return _not_derived(cap, name), []
        out[name], spans[name], by[name] = value, used[-1], extract
    chosen = {v.lower() for v in out.values() if isinstance(v, str)}
    if (needed := next((n for n in props if n not in out and chosen & required_for(props[n])), None)) is not None:
        return _not_derived(cap, needed), []  # "Name of the node (required for cordon, drain, uncordon)"
    if described:  # "What time is it?" is asked of the local clock; "What time is it in Springfield?" is not
        if out or says_more(question, cap.name, cap.description, cap.backend):
            return _not_derived(cap, described[0]), []
        return ({n: stated_default(props[n]) for n in described}, NONE_NEEDED), []
    if (unset := what_an_update_changes(cap, props, required, out)) is not None:
        return ArgumentsRequired(
            f"tool {cap.name!r} of backend {cap.backend!r} updates what the question names, and the question gives "
            f"none of what it would change ({', '.join(map(repr, unset))}): called so it would change nothing; pass "
            "`arguments` (or configure an LLM to fill them)",
            backend=cap.backend, tool=cap.name, missing=" or ".join(unset[:3]), input_schema=cap.input_schema), []
    left: list[Any] = [v for span, v in dropped.items() if span not in used]  # the call would answer otherwise
    if not out:
        return ({}, NONE_NEEDED), left
    for name, extract in by.items():  # each extractor once more, past every span already taken
        value = extract(question, name, props.get(name, {}), used)
        # A place or a choice named again is the same one; a number given again is another operand ("3 + 3 + 3").
        again = value in out.values() and extract is not number
        if value is not None and extract is number and used[-1] in dropped:
            continue  # already left, where another optional number could have taken it
        if value is not None and not again and (value not in left or extract is number):
            left.append(value)
    put_in_order(out, spans, question, numbers=[n for n, e in by.items() if e is number],
                 choices={n for n, e in by.items() if e in (enum, currency, listed)})
    # A thing's name or identifier says which thing, not which tool: marked so, it settles no choice between tools.
    taken = sorted(f"{n} {AS_NAMED}" if by[n] in (thing_name, identifier, repository) or (
        by[n] is patterned and last_word(n) in ("key", "id", "identifier")) else n for n in out)
    return (out, ("extracted: " if required else OPTIONAL_ONLY) + ", ".join(taken)), left


_REQUIRED_FOR = re.compile(r"\brequired\s+for\s+((?:the\s+)?[\w-]+(?:\s*(?:,|\bor\b|\band\b)\s*[\w-]+)*)", re.I)


def required_for(spec: dict[str, Any]) -> set[str]:
    """The choices an optional parameter's description says it is required for ("required for cordon, drain,
    uncordon"): given one of them, the call needs it too. What it is required when or if is not read."""
    found = _REQUIRED_FOR.search(str(spec.get("description", "")))
    return {w.lower() for w in re.findall(r"[\w-]+", found.group(1)) if w.lower() not in ("or", "and", "the")} \
        if found else set()


def _not_derived(cap: Capability, name: str) -> ArgumentsRequired:
    return ArgumentsRequired(
        f"tool {cap.name!r} of backend {cap.backend!r} needs the argument {name!r}, which could not be "
        f"derived from the question; pass `arguments` (or configure an LLM to fill them)",
        backend=cap.backend, tool=cap.name, missing=name, input_schema=cap.input_schema)


def _optional_number(question: str, name: str, span: tuple[int, int], value: Any, props: dict[str, dict[str, Any]],
                     required: list[str], dropped: dict[tuple[int, int], Any], beside: list[set[str]]) -> bool:
    """Whether the number at `span` fills the optional parameter `name` (`named_before`). One that another optional
    number of the tool, which the question does not name beside a number, could take as well goes to `dropped`."""
    others = [n for n in props if n != name]
    numbers = [n for n in others if n not in required and type_of(props[n]) in ("number", "integer")]
    unit = counted_in(props[name])  # "the first 500 characters" for a maximum number of characters
    if unit and unit_after(question, span, unit) and all(counted_in(props[n]) != unit for n in numbers):
        return True
    if numbers and not beside:
        spans = [m.span() for m in numbers_in(question)]
        beside.append({n for n in props if any(names_next_to(question, n, s) for s in spans)})
    # "The last 5 commits" counts commits: a page number or an offset is no rival for it, nor takes it unnamed.
    def counted_past(parameter: str) -> bool:  # "skip the first 50 results" does start there
        return counts_things(question, span[1]) and position(parameter) and not starts_at(question, parameter, span)

    if counted_past(name) and not names_next_to(question, name, span):
        dropped[span] = value  # unused unless another parameter takes it
        return False
    rivals = [n for n in numbers if n not in beside[0] and not counted_past(n)]
    if named_before(question, name, span, others, rivals):
        return True
    if rivals and named_before(question, name, span, others, []):
        dropped[span] = value
    return False
