"""The extractors: each reads one kind of value from the question for a parameter that takes that kind, as
`derive_arguments` (arguments.py) asks them in order, and marks the span it took so no other parameter takes it.

    Extractor = (question, parameter name, its JSON schema, spans already taken) -> value or None
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from router.retrieval.text import URL
from router.schemas import (
    choices_of,
    type_of,
)
from router.stages.addresses import address_part, route_end
from router.stages.cells import cells_in, sheet_in
from router.stages.choices import choice_in, listed_choices
from router.stages.currencies import currencies_in, currency_code, takes_currencies, takes_currency
from router.stages.names import (
    called_in,
    code_labelled,
    counts_another_thing,
    identifier_in,
    ip_in,
    kind_identified_by,
    name_in,
    new_name_in,
    quoted_beside,
    revision_in,
    switch_in,
    text_given,
)
from router.stages.numbers import number_in
from router.stages.timezones import country_in, takes_country_code, time_of_day_in, zone_in
from router.stages.written import (
    EXPRESSION,
    GLOB,
    PATH,
    a_path,
    email_in,
    example_pattern,
    expression,
    first_free,
    key_in,
    matched,
    paths_in,
    patterned_in,
    repository_part,
    sql_statement,
    takes_email,
    takes_expression,
    takes_glob,
    takes_key,
    takes_path,
    takes_paths,
    takes_sql,
    takes_url,
    web_address,
    words_of,
)

Extractor = Callable[[str, str, dict[str, Any], list[tuple[int, int]]], Any]


def _free(span: tuple[int, int], used: list[tuple[int, int]]) -> bool:
    return all(span[1] <= a or span[0] >= b for a, b in used)


def enum(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    values = choices_of(spec)
    return _taken(choice_in(question, values, lambda span: _free(span, used)), used) if isinstance(values, list) \
        else None


def listed(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """One of the values the description lists as examples ("e.g., pods, deployments"), named in the question."""
    values = listed_choices(str(spec.get("description", ""))) if _text(spec) else []
    return _taken(choice_in(question, values, lambda span: _free(span, used)), used) if values else None


def _taken(found: tuple[tuple[int, int], Any] | None, used: list[tuple[int, int]]) -> Any:
    """The value found, its span now used (None: nothing found)."""
    if found is None:
        return None
    used.append(found[0])
    return found[1]


def _timezone(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    hint = f"{name} {spec.get('description', '')}".lower()
    if "timezone" not in hint and "time zone" not in hint and name.lower() not in ("tz", "zone"):
        return None
    return _taken(zone_in(question, lambda span: _free(span, used)), used)


def _time_of_day(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    hint = f"{name} {spec.get('description', '')}".lower()
    if name.lower() != "time" and "hh:mm" not in hint:
        return None
    return _taken(time_of_day_in(question, lambda span: _free(span, used)), used)


def number(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    kind = type_of(spec)
    if kind not in ("number", "integer"):
        return None
    of = kind_identified_by(name)

    def free(span: tuple[int, int]) -> bool:
        return _free(span, used) and (of is None or not counts_another_thing(question, span[0], of))
    return _taken(number_in(question, name, spec, kind, free), used)


def _path(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """A path, or for an array of them every path the question gives (`paths_in`: "Compare /a.txt and /b.txt")."""
    if type_of(spec) == "array" and takes_paths(name, spec):
        found = paths_in(question, lambda span: _free(span, used))
        used.extend(span for span, _ in found)
        return [path for _, path in found] or None
    return _taken(first_free(PATH, question, lambda span: _free(span, used), a_path), used) \
        if takes_path(name, spec) else None


def _text(spec: dict[str, Any]) -> bool:
    """Whether a parameter takes a string of the question's own (not one of an enum's)."""
    return type_of(spec) in (None, "string") and "enum" not in spec


def _written(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """A SQL statement, a web address, an arithmetic expression, a file-name pattern, a key or an e-mail address, for
    a string parameter that takes one."""
    if not _text(spec):
        return None
    described = str(spec.get("description", ""))
    if takes_sql(name, described) and (statement := sql_statement(question)) is not None and _free(statement[0], used):
        return _taken(statement, used)
    if takes_url(name, described):
        return _taken(first_free(URL, question, lambda span: _free(span, used), web_address), used)
    if takes_expression(name, described):
        return _taken(first_free(EXPRESSION, question, lambda span: _free(span, used), expression), used)
    if takes_glob(name, described):
        return _taken(first_free(GLOB, question, lambda span: _free(span, used), matched), used)
    if takes_key(name, described):
        return _taken(key_in(question, lambda span: _free(span, used)), used)
    if takes_email(name, spec):
        return _taken(email_in(question, lambda span: _free(span, used)), used)
    return None


def patterned(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """A word in the shape the schema's `pattern` gives ("PROJ-123" for a Jira issue key), or its description's
    examples do."""
    pattern = pattern_of(spec)
    return _taken(patterned_in(question, name, pattern, lambda span: _free(span, used)), used) if pattern else None


def pattern_of(spec: dict[str, Any]) -> str | None:
    pattern = spec.get("pattern") or example_pattern(str(spec.get("description", "")))
    return pattern if _text(spec) and isinstance(pattern, str) else None


def currency(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """A currency the question names, other than one already taken ("from EUR to USD"); for a list of them, every
    one left ("the rates of USD against EUR and GBP": `symbols` "EUR,GBP"), as an array or joined by commas."""
    described, kind = str(spec.get("description", "")), type_of(spec)
    several = kind in (None, "string", "array") and takes_currencies(name, described)
    if choices_of(spec) is not None or not (several or (kind in (None, "string") and takes_currency(name, described))):
        return None
    taken = {code for a, b in used if (code := currency_code(question[a:b]))}
    found = currencies_in(question, lambda span: _free(span, used), taken)
    if not several:
        return _taken(found[0], used) if found else None
    used.extend(span for span, _ in found)
    return ([c for _, c in found] if kind == "array" else ",".join(c for _, c in found)) if found else None


def repository(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    return _taken(repository_part(question, name, lambda span: _free(span, used)), used) if _text(spec) else None


def _spreadsheet(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """A sheet's name, or cells in A1 notation, for a parameter that takes one."""
    def free(span: tuple[int, int]) -> bool:
        return _free(span, used)
    return _taken(sheet_in(question, name, free) or cells_in(question, name, spec, free), used) if _text(spec) else None


def _named_kind(question: str, name: str, free: Callable[[tuple[int, int]], bool]
                ) -> tuple[tuple[int, int], str] | None:
    """For a parameter named by a kind alone (`namespace`, `node`), a name the question writes after that word that
    holds a digit or joins words ("namespace kube-system", "node worker-1"), is quoted, or is called so."""
    words = words_of(name)
    return name_in(question, name, free, kind=words[0], loose=False) if len(words) == 1 and len(words[0]) > 3 \
        else None


def thing_name(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    if not _text(spec) or takes_path(name, spec):
        return None  # "the config file" gives no `file_name` that takes a path
    def free(span: tuple[int, int]) -> bool:
        return _free(span, used)
    found = name_in(question, name, free) or text_given(question, name, free) or new_name_in(question, name, free) \
        or called_in(question, name, free) or _named_kind(question, name, free)
    return _taken(found, used)


def identifier(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """A thing's identifier written after its kind ("user U12345"), a commit for a revision ("the last commit"), or a
    code labelled with the standard the parameter names ("ICAO: KLAX")."""
    if not _text(spec):
        return None

    def free(span: tuple[int, int]) -> bool:
        return _free(span, used)
    described = str(spec.get("description", ""))
    return _taken(identifier_in(question, name, free, described) or revision_in(question, name, free)
                  or code_labelled(question, name, described, free), used)


def _address(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """A street address or the part of it a parameter is named for, or an end of a route ("from Boston to New
    York"; for a list of places, as the one place of a list)."""
    def free(span: tuple[int, int]) -> bool:
        return _free(span, used)
    if type_of(spec) == "array":
        end = route_end(question, name, free)
        return [_taken(end, used)] if end else None
    return _taken(address_part(question, name, str(spec.get("description", "")), free)
                  or route_end(question, name, free), used) if _text(spec) else None


def _country(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    """A country's ISO 3166 code from its name ("in China": CN), for a parameter for the code of one."""
    return _taken(country_in(question, lambda span: _free(span, used)), used) \
        if _text(spec) and takes_country_code(name, str(spec.get("description", ""))) else None


def _ip(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    return _taken(ip_in(question, name, str(spec.get("description", "")), lambda span: _free(span, used)), used) \
        if _text(spec) else None


def _quoted(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    return _taken(quoted_beside(question, name, lambda span: _free(span, used)), used) \
        if _text(spec) and not takes_path(name, spec) else None


def _switch(question: str, name: str, spec: dict[str, Any], used: list[tuple[int, int]]) -> Any:
    return _taken(switch_in(question, name, lambda span: _free(span, used)), used) if type_of(spec) == "boolean" \
        else None


EXTRACTORS: tuple[Extractor, ...] = (enum, patterned, _timezone, _time_of_day, _path, _written, currency, _address,
                                     _country, _ip, repository, _spreadsheet, thing_name, identifier, _quoted, number,
                                     _switch)
ACTING_EXTRACTORS = tuple(e for e in EXTRACTORS if e is not _switch)  # one that may act is told no switch on a guess
