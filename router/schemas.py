"""JSON Schema checks with the `jsonschema` library: a tool's input schema against derived arguments
(`router.stages.arguments`), an LLM's structured answer against the schema it was given (`router.llm`).

    schema_errors({"a": "ten"}, {"type": "object", "properties": {"a": {"type": "number"}}})
    # ["$.a: 'ten' is not of type 'number'"]
"""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator, SchemaError, ValidationError
from jsonschema.exceptions import UnknownType
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable


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
    except (Unresolvable, UnknownType, re.error):  # a reference to nowhere, a bad pattern: the schema's fault
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
        validator: Validator | None = cls(schema)
    except SchemaError:
        validator = None
    if len(_VALIDATORS) >= _MAX_VALIDATORS:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


def _error_order(error: ValidationError) -> tuple[int, str]:
    return len(error.absolute_path), str(list(error.absolute_path))
