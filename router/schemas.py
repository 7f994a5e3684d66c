"""JSON Schema checks with the `jsonschema` library: a tool's input schema against derived arguments
(`router.stages.arguments`), an LLM's structured answer against the schema it was given (`router.llm`).

    schema_errors({"a": "ten"}, {"type": "object", "properties": {"a": {"type": "number"}}})
    # ["$.a: 'ten' is not of type 'number'"]

A schema's `pattern` and `patternProperties` come from a backend, and the value checked against them from a
caller or a model: they are matched with the `regex` library within a time bound, since a pattern that
backtracks catastrophically would hold the event loop for seconds (Python's `re` cannot be stopped). A value
that cannot be checked in time is refused as not matching.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import regex
from jsonschema import Draft202012Validator, SchemaError, ValidationError
from jsonschema.exceptions import UnknownType
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from referencing.exceptions import Unresolvable

PATTERN_TIMEOUT_S = 0.05


def schema_errors(value: Any, schema: Any) -> list[str]:
    """What in `value` breaks `schema`, as "$.path: message", shallowest first; [] when it fits (or when the
    schema itself is invalid: the backend judges those)."""
    return [f"${''.join(f'[{p}]' if isinstance(p, int) else f'.{p}' for p in e.absolute_path)}: {e.message}"
            for e in validation_errors(value, schema)]


def validation_errors(value: Any, schema: Any) -> list[ValidationError]:
    validator = _validator(schema) if isinstance(schema, dict) and schema else None
    if validator is None:
        return []
    try:
        return sorted(validator.iter_errors(value), key=_error_order)
    except (Unresolvable, UnknownType, re.error, regex.error):  # a reference to nowhere, a bad pattern: the schema's
        return []


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
        validator: Validator | None = _bounded(cls)(schema)
    except SchemaError:
        validator = None
    if len(_VALIDATORS) >= _MAX_VALIDATORS:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


def _error_order(error: ValidationError) -> tuple[int, str]:
    return len(error.absolute_path), str(list(error.absolute_path))


def _matches(pattern: str, text: str) -> bool | None:
    """Whether `pattern` finds a match in `text`; None when it could not tell within `PATTERN_TIMEOUT_S`."""
    try:
        return regex.search(pattern, text, timeout=PATTERN_TIMEOUT_S) is not None
    except TimeoutError:
        return None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not (found := _matches(pattern, instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}" if found is False else
                              f"{instance!r} could not be checked against the pattern {pattern!r} in time")


def _pattern_properties(validator: Any, properties: dict[str, Any], instance: Any,
                        schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in properties.items():
        for key, value in instance.items():
            found = _matches(pattern, key)
            if found is None:
                yield ValidationError(f"{key!r} could not be checked against the pattern {pattern!r} in time")
            elif found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


_BOUNDED: dict[type, type] = {}


def _bounded(cls: type) -> type:
    """The draft's validator with patterns matched within the time bound."""
    if cls not in _BOUNDED:
        _BOUNDED[cls] = extend(cls, {"pattern": _pattern, "patternProperties": _pattern_properties})
    return _BOUNDED[cls]

