"""JSON Schema checks with the `jsonschema` library: a tool's input schema against derived arguments
(`router.stages.arguments`; `schema_violation`, the 422 naming the field), an LLM's structured answer against the
schema it was given (`router.llm`). Of the formats, `uuid`, `email`, `date`, `ipv4` and `ipv6` are checked.

    schema_errors({"a": "ten"}, {"type": "object", "properties": {"a": {"type": "number"}}})
    # ["$.a: 'ten' is not of type 'number'"]

A schema's patterns (`pattern`, `patternProperties`, and the property names `additionalProperties` and
`unevaluatedProperties` judge by them) come from a backend, and the values matched against them from a caller or
a model. Python's `re` cannot be stopped, and a pattern that backtracks catastrophically would hold the event
loop for minutes, so within `validation_errors` the `re` jsonschema calls (`_BoundedRe`) searches with the
`regex` library on a budget: `PATTERN_BUDGET_S` of matching for one validation. A value that could not be
matched in it is refused as a whole, never let through (`not`, `anyOf` or `patternProperties` would take no
match for an answer). `regex` reads a few patterns otherwise than `re`: POSIX classes (`[[:alpha:]]`), and
"word" characters (`\\w`) by Unicode's definition.

Its readers (`properties_of`, `type_of`, `required_of`) give a schema's parameters as deriving arguments reads them.
"""

from __future__ import annotations

import copy
import re
import time
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import regex
from jsonschema import (
    Draft202012Validator,
    FormatChecker,
    SchemaError,
    ValidationError,
    _keywords,
    _legacy_keywords,
    _utils,
)
from jsonschema.exceptions import UnknownType
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from router.errors import ArgumentsInvalid
from router.values import Capability

PATTERN_BUDGET_S = 0.1
# Formats a derived value is held to, those the library checks without further packages: a Slack user id given to
# Notion's `user_id` (`format: uuid`) is no call to make. Other formats stay annotations, as the drafts have them.
_FORMATS = FormatChecker(formats=("uuid", "email", "date", "ipv4", "ipv6"))


def schema_errors(value: Any, schema: Any) -> list[str]:
    """What in `value` breaks `schema`, as "$.path: message", shallowest first; [] when it fits (or when the
    schema itself is invalid: the backend judges those)."""
    return [f"${''.join(f'[{p}]' if isinstance(p, int) else f'.{p}' for p in e.absolute_path)}: {e.message}"
            for e in validation_errors(value, schema)]


def validation_errors(value: Any, schema: Any) -> list[ValidationError]:
    validator = _validator(schema) if isinstance(schema, dict) and schema else None
    if validator is None:
        return []
    token = _SPENT.set([0.0])
    try:
        return sorted(validator.iter_errors(value), key=_error_order)
    except (Unresolvable, UnknownType, re.error, OverflowError):  # a reference to nowhere, a bad pattern: the schema's
        return []
    except RecursionError:  # a reference to itself ({"$ref": "#"}): the schema's, and never walked again
        _VALIDATORS[id(schema)] = (schema, None)
        return []
    except _Undecided:  # neither passed nor refused by a pattern: refused, never let through unchecked
        return [ValidationError(f"the value could not be checked against the schema's patterns within "
                                f"{PATTERN_BUDGET_S * 1000:g} ms of matching")]
    finally:
        _SPENT.reset(token)


# Validators by schema object (a catalog's schemas live as long as the catalog); the schema is kept with
# its validator so that a recycled id is never mistaken for it.
_VALIDATORS: dict[int, tuple[dict[str, Any], Validator | None]] = {}
_MAX_VALIDATORS = 4096


def _validator(schema: dict[str, Any]) -> Validator | None:
    """A validator for the draft the schema names (2020-12 when it names none); None for a schema that
    does not itself validate against its draft's metaschema (the backend judges those)."""
    hit = _VALIDATORS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
        validator: Validator | None = cls(schema, format_checker=_FORMATS)
    except (SchemaError, OverflowError, re.error, RecursionError):  # x{4294967296} overflows `re`
        validator = None
    if len(_VALIDATORS) >= _MAX_VALIDATORS:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


def _error_order(error: ValidationError) -> tuple[int, str]:
    return len(error.absolute_path), str(list(error.absolute_path))


class _Undecided(Exception):
    """A pattern that could not be matched within the validation's budget: no answer either way."""


class _BoundedRe:
    """The `re` jsonschema's keywords call: within a validation (`validation_errors`), `search` with the `regex`
    library on the time its matching has left; outside one, as `re`. The rest is `re`'s."""

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)

    @staticmethod
    def search(pattern: str, string: str, flags: int = 0) -> Any:
        spent = _SPENT.get()
        if spent is None:  # another user of jsonschema in this process: unchanged
            return re.search(pattern, string, flags)
        left = PATTERN_BUDGET_S - spent[0]
        if left <= 0:
            raise _Undecided
        started = time.perf_counter()
        try:
            return regex.search(pattern, string, flags=flags, timeout=left)
        except TimeoutError:
            raise _Undecided from None
        except regex.error as exc:  # a pattern the schema got wrong: as `re` would have said
            raise re.error(str(exc)) from None
        finally:
            spent[0] += time.perf_counter() - started


_SPENT: ContextVar[list[float] | None] = ContextVar("mcp_router_pattern_time", default=None)
for _module in (_keywords, _legacy_keywords, _utils):
    _module.re = _BoundedRe()


def schema_violation(cap: Capability, arguments: dict[str, Any]) -> ArgumentsInvalid | None:
    """The first way `arguments` break the tool's input schema, as a 422 naming the field; None when they
    fit. A schema that is itself invalid cannot judge anything: the backend will."""
    schema = cap.input_schema
    error = next(iter(validation_errors(arguments, schema)), None)
    if error is None:
        return None
    field = _field_of(error)
    return ArgumentsInvalid(
        f"tool {cap.name!r} of backend {cap.backend!r}: the argument {field!r} derived from the question does not "
        f"fit its schema ({error.message[:200]}); pass `arguments` explicitly",
        backend=cap.backend, tool=cap.name, field=field, input_schema=schema,
    )


def _field_of(error: ValidationError) -> str:
    if error.absolute_path:
        return ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [r for r in error.validator_value if r not in error.instance]
        if missing:
            return str(missing[0])
    return "arguments"


def with_defaults(schema: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` with the schema's `default` of each required parameter they leave out. Servers built on zod 4
    list every defaulted parameter as required ("Take a screenshot": `scale`, default "css"); the default is what
    the server would take, so neither the question, the caller nor a model need give it, and the call still has
    every required argument."""
    req = schema.get("required") if isinstance(schema, dict) else None
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(req, list) or not isinstance(props, dict):
        return dict(arguments)
    # A copy of each default: the schema is the catalog's, shared by every request, and a call's arguments are its own.
    return {**arguments, **{r: copy.deepcopy(props[r]["default"]) for r in req if isinstance(r, str)
                            and r not in arguments and isinstance(props.get(r), dict) and "default" in props[r]}}


def required_of(schema: dict[str, Any]) -> list[str]:
    """The parameters a call must be given: those the schema requires and gives no `default` for."""
    req = schema.get("required") if isinstance(schema, dict) else None
    props = properties_of(schema)
    return [r for r in req if isinstance(r, str) and "default" not in props.get(r, {})] if isinstance(req, list) else []


def properties_of(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return {k: v for k, v in props.items() if isinstance(v, dict)} if isinstance(props, dict) else {}


def type_of(spec: dict[str, Any]) -> str | None:
    """A parameter's JSON type (the first not null of a list of them), or None."""
    t = spec.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    return t if isinstance(t, str) else None


# Choices a string parameter's description names in quotes instead of an `enum` ("Whether to list local branches
# ('local'), remote branches ('remote') or all branches ('all')"); quoted examples ("e.g. 'main'") are none.
_QUOTED_CHOICE = re.compile(r"""['"`]([A-Za-z][\w-]{0,24})['"`]""")
_EXAMPLES = re.compile(r"\be\.g\.|\b(?:for example|for instance|such as|example|like)\b", re.I)


# Choices a description lists after saying it lists them ("One of: [google, facebook, twitter]", "Possible values:
# sms, email"), as documentation generated from an API's reference writes an enum.
_LISTED_CHOICES = re.compile(r"\b(?:one of|(?:possible|allowed|valid|accepted|supported) values)\s*:?\s*"
                             r"(?:\[([^\]\n]{1,200})\]|((?:[\w-]+\s*(?:,|\||\bor\b)\s*)+[\w-]+))", re.I)


def choices_of(spec: dict[str, Any]) -> list[Any] | None:
    """The values a parameter takes one of: its `enum`, or two or more its description lists or quotes as the
    choices."""
    if isinstance(spec.get("enum"), list):
        return spec["enum"]
    described = spec.get("description")
    if type_of(spec) != "string" or not isinstance(described, str):
        return None
    quoted = _quoted_choices(described)
    return list(quoted) if quoted else None


@lru_cache(maxsize=4096)
def _quoted_choices(described: str) -> tuple[str, ...]:
    """Read once per description: every candidate's derivation asks for each of its parameters."""
    if (listed := _LISTED_CHOICES.search(described)) is not None:
        words = (w.strip(" '\"`") for w in re.split(r"\s*(?:,|\||\bor\b)\s*", listed.group(1) or listed.group(2)))
        choices = tuple(dict.fromkeys(w for w in words if re.fullmatch(r"[A-Za-z][\w-]{0,24}", w)))
        if len(choices) >= 2:
            return choices
    if _EXAMPLES.search(described):
        return ()
    quoted = tuple(dict.fromkeys(_QUOTED_CHOICE.findall(described)))
    return quoted if len(quoted) >= 2 else ()


# A value a required parameter's description says to use when the user gives none, as servers written for an LLM
# say it: "Use 'Europe/Paris' as local timezone if no timezone provided by the user", "Defaults to 'main' if not
# given". A schema `default` is the server's; this one is the description's instruction to whoever fills the call.
_STATED_DEFAULT = re.compile(r"""\b(?:use|defaults?\s+to)\s+['"`]([^'"`\n]{1,60})['"`]\s+(?:as\s+(?:the\s+)?"""
                             r"""[\w ]{1,40}?\s+)?(?:if|when|where)\s+(?:no|not|none)\b""", re.I)


def stated_default(spec: dict[str, Any]) -> str | None:
    """The value a string parameter's description says to use when none is given, else None."""
    described = spec.get("description")
    if type_of(spec) != "string" or not isinstance(described, str):
        return None
    return _stated_default(described)


@lru_cache(maxsize=4096)
def _stated_default(described: str) -> str | None:
    found = _STATED_DEFAULT.search(described)
    return found.group(1) if found else None
