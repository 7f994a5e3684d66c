"""The schema checks of `router/schemas.py` on patterns a backend sends: matched within a budget, refused
when they cannot be matched in it, never passed unchecked; and the choices a parameter takes."""

from __future__ import annotations

import time

import pytest

from router.schemas import schema_errors

EVIL = "^(a|aa)+$"  # backtracks catastrophically on "aaa...!": Python's re doubles its time with each "a"


@pytest.mark.parametrize(("schema", "value"), [
    ({"properties": {"email": {"type": "string", "pattern": EVIL}}}, {"email": "a" * 40 + "!"}),
    ({"patternProperties": {EVIL: {}}, "additionalProperties": False}, {"a" * 40 + "!": 1}),
    ({"patternProperties": {EVIL: {}}, "unevaluatedProperties": False}, {"a" * 40 + "!": 1}),
    ({"properties": {"x": {"$schema": "https://json-schema.org/draft/2020-12/schema", "pattern": EVIL}}},
     {"x": "a" * 40 + "!"}),  # a subschema naming its draft is validated by the draft's own class
    ({"properties": {"xs": {"type": "array", "items": {"type": "string", "pattern": EVIL}}}},
     {"xs": ["a" * 30 + "!"] * 200}),  # each within its own bound, 200 of them would still take seconds
])
def test_a_pattern_that_backtracks_catastrophically_is_matched_within_a_budget_and_refuses(
        schema: dict, value: dict) -> None:
    started = time.monotonic()
    errors = schema_errors(value, {"type": "object", **schema})
    assert time.monotonic() - started < 1.0 and errors


@pytest.mark.parametrize("schema", [
    {"properties": {"cmd": {"not": {"pattern": EVIL + "|rm -rf"}}}},  # no match would have meant "not": passed
    {"patternProperties": {EVIL + "|^a+b$": {"type": "integer"}}},  # no match would have skipped the subschema
])
def test_a_match_that_ran_out_of_time_refuses_the_value_and_never_lets_it_through(schema: dict) -> None:
    value = {"cmd": "a" * 40 + "!"} if "properties" in schema else {"a" * 40 + "b": "not an integer"}
    assert schema_errors(value, {"type": "object", **schema}) == [
        "$: the value could not be checked against the schema's patterns within 100 ms of matching"]


def test_the_budget_counts_matching_not_the_rest_of_the_validation() -> None:
    schema = {"type": "object", "properties": {
        "rows": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        "code": {"type": "string", "pattern": "^A"}}}
    rows = [{"n": i} for i in range(20_000)]  # far more than 100 ms of jsonschema's own work on a busy machine
    assert schema_errors({"rows": rows, "code": "ABC"}, schema) == []
    assert schema_errors({"rows": rows, "code": "XYZ"}, schema) == ["$.code: 'XYZ' does not match '^A'"]


def test_patterns_still_judge_as_before_and_one_re_cannot_compile_is_the_schemas_fault() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}
    assert schema_errors({"id": "ok"}, schema) == []
    assert schema_errors({"id": "Not ok"}, schema) == ["$.id: 'Not ok' does not match '^[a-z]+$'"]
    too_large = {"type": "object", "properties": {"x": {"type": "string", "pattern": "x{4294967296}"}}}
    assert schema_errors({"x": "1"}, too_large) == []  # was an OverflowError out of re: a 500


@pytest.mark.parametrize("schema", [
    {"type": "object", "$ref": "#"},
    {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}},
])
def test_a_schema_that_refers_to_itself_is_the_schemas_fault_not_a_crash(schema: dict) -> None:
    # a backend's tool listing such a schema made every question routed near it a 500 (RecursionError)
    assert schema_errors({"a": 1}, schema) == []
    assert schema_errors({"a": 1}, schema) == []  # remembered: not walked down to the recursion limit again


def test_a_derived_value_is_held_to_the_formats_the_library_checks() -> None:
    # Notion's `user_id` is `format: uuid`: "Who is user U023BECGF?" (a Slack id) went to Notion's get_user.
    from router.errors import ArgumentsInvalid
    from router.stages.arguments import derive_arguments
    from router.values import Capability

    get_user = Capability(backend="notion", name="get_user", input_schema={"type": "object", "required": ["user_id"],
                          "properties": {"user_id": {"type": "string", "format": "uuid"}}})
    refused = derive_arguments(get_user, "Who is user U023BECGF?")
    assert isinstance(refused, ArgumentsInvalid) and "'U023BECGF' is not a 'uuid'" in refused.message
    uuid = "59833787-2cf9-4fdf-8782-e53db20768a5"
    assert derive_arguments(get_user, f"Who is user {uuid}?")[0] == {"user_id": uuid}
    assert schema_errors({"a": "x"}, {"properties": {"a": {"format": "email"}}}) == ["$.a: 'x' is not a 'email'"]
    # A format the library cannot check without more packages stays an annotation.
    assert schema_errors({"a": "not a uri"}, {"properties": {"a": {"format": "uri"}}}) == []


@pytest.mark.parametrize(("spec", "choices"), [
    ({"type": "string", "enum": ["a", "b"]}, ["a", "b"]),
    ({"type": "string", "description": "Whether to list local branches ('local'), remote branches ('remote') or all "
                                       "branches('all')."}, ["local", "remote", "all"]),  # the official git server's
    ({"type": "string", "description": 'Sort order: "asc" or "desc"'}, ["asc", "desc"]),
    ({"type": "string", "description": "The branch, e.g. 'main' or 'dev'"}, None),  # examples, not the choices
    ({"type": "string", "description": "The 'name' of the thing"}, None),  # one quoted word chooses nothing
    ({"type": "integer", "description": "'1' or '2'"}, None),
    # Listed as an API reference lists an enum (ToolAlpaca's Auth0), quoted or not.
    ({"type": "string", "description": "The identity provider to use. One of: [google, facebook, twitter]."},
     ["google", "facebook", "twitter"]),
    ({"type": "string", "description": "Possible values: asc, desc"}, ["asc", "desc"]),
    ({"type": "string", "description": "Allowed values: json | xml"}, ["json", "xml"]),
    ({"type": "string", "description": "The user, one of the members of the team"}, None),
])
def test_the_choices_of_a_parameter_are_its_enum_or_those_its_description_quotes(spec: dict, choices: list | None
                                                                                  ) -> None:
    from router.schemas import choices_of

    assert choices_of(spec) == choices
