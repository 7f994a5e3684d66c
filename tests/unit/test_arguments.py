from __future__ import annotations

import pytest

from router.errors import ArgumentsInvalid, ArgumentsRequired
from router.stages.arguments import derive_arguments, derive_with_leftovers
from router.stages.free_text import free_text_parameter, is_free_text
from router.values import Capability
from tests.unit.helpers import MESSAGE_SCHEMA, NUMBERS_SCHEMA, TIMEZONE_SCHEMA


def tool(name: str, schema: dict, backend: str = "b", kind: str = "tool") -> Capability:
    return Capability(backend=backend, name=name, kind=kind, input_schema=schema)  # type: ignore[arg-type]


TIME = tool("get_current_time", TIMEZONE_SCHEMA, backend="time")
ADD = tool("add", NUMBERS_SCHEMA, backend="calc")
ECHO = Capability(backend="echo", name="echo", input_schema=MESSAGE_SCHEMA, read_only=True)  # it only repeats


def test_caller_arguments_win_over_anything_derived() -> None:
    args, source = derive_arguments(TIME, "What time is it in Tokyo?", {"timezone": "Europe/Paris"})
    assert args == {"timezone": "Europe/Paris"}
    assert source == "caller"


def test_caller_arguments_without_a_required_parameter_are_refused_naming_it() -> None:
    missing = derive_arguments(ADD, "add 2 and 3", {"a": 2, "c": 3})
    assert isinstance(missing, ArgumentsRequired) and missing.status_code == 422
    assert missing.details["missing"] == "b" and "`arguments`" in missing.message


def test_caller_arguments_are_copied_not_shared() -> None:
    given = {"timezone": "UTC"}
    args, _ = derive_arguments(TIME, "q", given)
    args["timezone"] = "changed"
    assert given == {"timezone": "UTC"}


def test_single_free_text_required_parameter_gets_the_question() -> None:
    args, source = derive_arguments(ECHO, "hello there, robot")
    assert args == {"message": "hello there, robot"}
    assert source == "question as 'message'"


def test_a_tool_that_may_act_does_not_get_the_question_as_what_it_writes_or_sends() -> None:
    post = tool("post", MESSAGE_SCHEMA)  # not marked read-only: it may act
    # It would have posted "Post that the build is green" itself.
    derived = derive_arguments(post, "Post that the build is green")
    assert isinstance(derived, ArgumentsRequired) and derived.details["missing"] == "message"
    assert derive_arguments(post, "Post it", {"message": "The build is green"})[0] == {"message": "The build is green"}
    # A parameter that says it takes a question, and a query, still get it.
    ask = tool("ask", {"type": "object", "required": ["text"],
                       "properties": {"text": {"type": "string", "description": "The question to answer"}}})
    assert derive_arguments(ask, "Why is the sky blue?")[0] == {"text": "Why is the sky blue?"}
    search = tool("search", {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}})
    assert derive_arguments(search, "cheap flights to Oslo")[0] == {"query": "cheap flights to Oslo"}
    # A message that only mentions a question is still what is sent; a task is what is added.
    reply = tool("reply", {"type": "object", "required": ["message"], "properties": {"message": {
        "type": "string", "description": "The message to send in reply to the user's question"}}})
    add = tool("add_task", {"type": "object", "required": ["task"], "properties": {"task": {"type": "string"}}})
    # A free-text name that takes a path is no place for the question.
    delete = tool("delete_file", {"type": "object", "required": ["input"], "properties": {
        "input": {"type": "string", "description": "Path of the file to delete"}}})
    assert isinstance(derive_arguments(delete, "Delete the old logs"), ArgumentsRequired)
    assert isinstance(derive_arguments(reply, "Tell Bob the build is green"), ArgumentsRequired)
    assert isinstance(derive_arguments(add, "Add a task to buy milk"), ArgumentsRequired)


def test_a_parameter_described_as_a_query_counts_as_free_text() -> None:
    schema = {
        "type": "object",
        "properties": {"needle": {"type": "string", "description": "The search query"}},
        "required": ["needle"],
    }
    args, _ = derive_arguments(tool("find", schema), "ray serve autoscaling")
    assert args == {"needle": "ray serve autoscaling"}


def test_an_enum_or_numeric_parameter_is_never_free_text() -> None:
    assert not is_free_text("query", {"type": "string", "enum": ["a", "b"]})
    assert not is_free_text("query", {"type": "integer"})
    assert is_free_text("query", {"type": ["string", "null"]})


def test_an_optional_single_free_text_parameter_is_used_when_nothing_is_required() -> None:
    schema = {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}
    assert free_text_parameter(tool("search", schema)) == "query"
    assert derive_arguments(tool("search", schema), "ray docs") == (
        {"query": "ray docs"},
        "question as 'query'",
    )


def test_a_tool_without_required_parameters_gets_no_arguments() -> None:
    schema = {"type": "object", "properties": {"limit": {"type": "integer"}}}
    assert derive_arguments(tool("list_things", schema), "list things") == ({}, "none needed")
    assert derive_arguments(tool("ping", {}), "ping") == ({}, "none needed")


def test_an_optional_parameter_takes_a_value_only_where_the_question_gives_one() -> None:
    schema = {"type": "object", "properties": {"kind": {"type": "string", "enum": ["Text", "Blob"]},
                                               "limit": {"type": "integer"}}}
    assert derive_arguments(tool("list_things", schema), "list the first 10 things") == (
        {"limit": 10}, "extracted, optional: limit")
    assert derive_arguments(tool("list_things", schema), "list 3 blob things") == (
        {"kind": "Blob", "limit": 3}, "extracted, optional: kind, limit")
    # After the required ones: the number the required parameter needs is taken first.
    both = {"type": "object", "required": ["n"], "properties": {"round": {"type": "integer"}, "n": {"type": "number"}}}
    assert derive_arguments(tool("sqrt", both), "square root of 2 to 3 places") == (
        {"n": 2, "round": 3}, "extracted: n, round")
    assert derive_with_leftovers(tool("list_things", schema), "list things 4 and 5")[1] == [5]


def test_an_integer_is_taken_exactly_and_a_number_too_large_for_a_float_is_not_taken() -> None:
    schema = {"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "integer"}}}
    assert derive_arguments(tool("show_order", schema), "Show order 12345678901234567891")[0] == {
        "order_id": 12345678901234567891}
    assert derive_arguments(tool("show_order", schema), "Show order 42")[0] == {"order_id": 42}
    assert isinstance(derive_arguments(tool("show_order", schema), "Show order 4.5"), ArgumentsRequired)
    count = {"type": "object", "required": ["count"], "properties": {"count": {"type": "integer"}}}
    assert derive_arguments(tool("roll", count), "Roll 42.0 dice")[0] == {"count": 42}
    assert isinstance(derive_arguments(tool("add", NUMBERS_SCHEMA), "Add " + "9" * 400 + " and 1"),
                      ArgumentsRequired)  # not a call with infinity
    assert isinstance(derive_arguments(tool("show_order", schema), "Show order " + "7" * 5000),
                      ArgumentsRequired)  # more digits than Python reads: not taken, and no crash


@pytest.mark.timeout(10)  # minutes before: what came before each number was read back to the start
def test_a_long_question_of_times_and_ranges_is_read_in_one_pass() -> None:
    add = tool("add", NUMBERS_SCHEMA)
    assert derive_arguments(add, "Add 2 and 3. " + "1:00 " * 20_000)[0] == {"a": 2, "b": 3}
    assert derive_arguments(add, "Add 2 and 3 " + "1-" * 50_000)[0] == {"a": 2, "b": 3}
    assert derive_arguments(add, "On September 30th, 2008 add 4 and 5")[0] == {"a": 4, "b": 5}  # a date's parts


def test_resources_and_flows_need_no_arguments() -> None:
    assert derive_arguments(tool("readme", TIMEZONE_SCHEMA, kind="resource"), "read it")[0] == {}
    assert derive_arguments(tool("chatflow", MESSAGE_SCHEMA, kind="flow"), "hi")[0] == {}


@pytest.mark.parametrize(
    ("question", "zone"),
    [
        ("What time is it in Tokyo?", "Asia/Tokyo"),
        ("what time is it in tokyo", "Asia/Tokyo"),
        ("Time in New York please", "America/New_York"),
        ("What time is it in New York?", "America/New_York"),
        ("current time in Europe/Berlin", "Europe/Berlin"),
        ("What is the time in UTC", "UTC"),
    ],
)
def test_timezone_is_extracted_from_a_city_name(question: str, zone: str) -> None:
    args, source = derive_arguments(TIME, question)
    assert args == {"timezone": zone}
    assert source == "extracted: timezone"


def test_two_timezone_parameters_take_the_cities_in_order_of_mention() -> None:
    schema = {
        "type": "object",
        "properties": {"source_timezone": {"type": "string"}, "target_timezone": {"type": "string"}},
        "required": ["source_timezone", "target_timezone"],
    }
    args, _ = derive_arguments(tool("convert_time", schema), "Convert from London to Tokyo")
    assert args == {"source_timezone": "Europe/London", "target_timezone": "Asia/Tokyo"}


def test_enum_value_named_in_the_question_is_chosen() -> None:
    schema = {
        "type": "object",
        "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["unit"],
    }
    assert derive_arguments(tool("temp", schema), "Show the temperature in Fahrenheit")[0] == {
        "unit": "fahrenheit"
    }


def test_enum_value_with_underscore_matches_the_words_with_a_space() -> None:
    schema = {
        "type": "object",
        "properties": {"theme": {"type": "string", "enum": ["dark_mode", "light_mode"]}},
        "required": ["theme"],
    }
    assert derive_arguments(tool("set_theme", schema), "switch to light mode")[0] == {"theme": "light_mode"}


def test_enum_value_with_hyphen_matches_the_words_with_a_space() -> None:
    schema = {
        "type": "object",
        "properties": {"size": {"type": "string", "enum": ["extra-large", "small"]}},
        "required": ["size"],
    }
    assert derive_arguments(tool("order", schema), "an extra large coffee")[0] == {"size": "extra-large"}


def test_enum_takes_the_first_value_mentioned() -> None:
    schema = {
        "type": "object",
        "properties": {"op": {"type": "string", "enum": ["add", "subtract"]}},
        "required": ["op"],
    }
    assert derive_arguments(tool("calc", schema), "subtract, then add")[0] == {"op": "subtract"}


def test_an_order_is_chosen_by_what_it_puts_first() -> None:
    # The official filesystem server's listing: "the biggest file" is a listing sorted by size.
    listing = tool("list_directory_with_sizes", {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string"}, "sortBy": {"type": "string", "enum": ["name", "size"]}}})
    assert derive_arguments(listing, "What is the biggest file in /srv?")[0] == {"path": "/srv", "sortBy": "size"}
    assert derive_arguments(listing, "Which are the smallest files in /srv?")[0]["sortBy"] == "size"
    posts = tool("top_posts", {"type": "object", "properties": {
        "sort": {"type": "string", "enum": ["votes", "date"]}, "limit": {"type": "integer"}}})
    assert derive_arguments(posts, "Show the 5 latest posts")[0]["sort"] == "date"
    assert derive_arguments(posts, "Show the posts with the most votes")[0]["sort"] == "votes"
    assert derive_arguments(listing, "List /srv")[0] == {"path": "/srv"}  # no order named: the server's default


def test_numbers_are_assigned_in_order_to_two_numeric_parameters() -> None:
    args, source = derive_arguments(ADD, "What is 12 plus 7.5?")
    assert args == {"a": 12.0, "b": 7.5}
    assert source == "extracted: a, b"


@pytest.mark.parametrize(("question", "expected"), [
    ("What is 1,000 plus 2?", {"a": 1000.0, "b": 2.0}),
    ("Add 12,345.5 and 1,5", {"a": 12345.5, "b": 1.5}),
    ("Add 3, 4", {"a": 3.0, "b": 4.0}),
    ("Add 0,001 and 2", {"a": 0.001, "b": 2.0}),
    ("Add x,5 and -1,000", {"a": 5.0, "b": -1000.0}),
])
def test_commas_group_thousands_or_mark_decimals(question: str, expected: dict[str, float]) -> None:
    assert derive_arguments(ADD, question)[0] == expected


def test_a_number_at_the_end_of_a_sentence_is_extracted() -> None:
    assert derive_arguments(ADD, "Add 6 and 7.")[0] == {"a": 6.0, "b": 7.0}


def test_negative_numbers_and_integers_are_typed_by_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "x": {"type": "number"}},
        "required": ["n", "x"],
    }
    args, _ = derive_arguments(tool("power", schema), "raise -2.5 to the 3 power")
    # the integer parameter skips -2.5 and takes 3; the number takes the first free number
    assert args == {"n": 3, "x": -2.5}
    assert isinstance(args["n"], int)


def test_time_of_day_is_normalised_to_hh_mm() -> None:
    schema = {
        "type": "object",
        "properties": {"time": {"type": "string", "description": "HH:MM"}},
        "required": ["time"],
    }
    cap = tool("alarm", schema)
    assert derive_arguments(cap, "wake me at 7pm")[0] == {"time": "19:00"}
    assert derive_arguments(cap, "wake me at 12am")[0] == {"time": "00:00"}
    assert derive_arguments(cap, "meeting at 9:30")[0] == {"time": "09:30"}
    assert isinstance(derive_arguments(cap, "wake me in 7 minutes"), ArgumentsRequired)  # a bare number is not a time


def test_underivable_arguments_raise_arguments_required_naming_tool_and_schema() -> None:
    err = derive_arguments(ADD, "add some numbers")
    assert isinstance(err, ArgumentsRequired)
    assert err.status_code == 422
    assert err.details["tool"] == "add"
    assert err.details["backend"] == "calc"
    assert err.details["missing"] == "a"
    assert err.details["input_schema"] == NUMBERS_SCHEMA
    assert "'add'" in err.message


def test_a_partially_derivable_call_still_raises_for_the_missing_parameter() -> None:
    err = derive_arguments(ADD, "add 3 to something")
    assert isinstance(err, ArgumentsRequired) and err.details["missing"] == "b"


def test_timezone_extraction_needs_a_timezone_parameter() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert isinstance(derive_arguments(tool("weather", schema), "weather in Tokyo"), ArgumentsRequired)


# --- derived arguments are validated against the tool's schema ----------------------------------


def test_a_derived_value_that_breaks_the_schema_is_a_422_naming_the_field_not_a_call() -> None:
    short = tool("lookup", {"type": "object", "required": ["query"],
                            "properties": {"query": {"type": "string", "maxLength": 10}}})
    refused = derive_arguments(short, "a question much longer than ten characters")
    assert isinstance(refused, ArgumentsInvalid) and isinstance(refused, ArgumentsRequired)
    assert refused.status_code == 422 and refused.code == "arguments_invalid"
    assert refused.details["field"] == "query" and "'query'" in refused.message


def test_an_extracted_number_outside_the_schemas_range_is_refused() -> None:
    pct = tool("set_volume", {"type": "object", "required": ["level"],
                              "properties": {"level": {"type": "integer", "minimum": 0, "maximum": 100}}})
    assert derive_arguments(pct, "set the volume to 40") == ({"level": 40}, "extracted: level")
    refused = derive_arguments(pct, "set the volume to 400")
    assert isinstance(refused, ArgumentsInvalid) and refused.details["field"] == "level"


def test_a_schema_that_forbids_what_it_does_not_list_is_enforced_on_no_arguments() -> None:
    needs_one_of = tool("pick", {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1})
    refused = derive_arguments(needs_one_of, "pick something")
    assert isinstance(refused, ArgumentsInvalid) and refused.details["field"] == "arguments"


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"x": {"type": 12}}},
    {"type": "object", "properties": {"query": {"type": "string", "pattern": "("}}},
    {"type": "object", "properties": {"query": {"type": "strin"}}},
    {"type": "object", "properties": {"query": {"$ref": "#/$defs/missing"}}},
    {"type": "object", "properties": {"query": {"$ref": "https://example.invalid/schema.json"}}},
])
def test_a_schema_that_cannot_judge_does_not_block_the_call(schema: dict) -> None:
    derived = derive_arguments(tool("odd", schema), "anything")
    assert isinstance(derived, tuple)


def test_an_invalid_schema_does_not_block_the_call_and_the_callers_arguments_are_not_judged() -> None:
    broken = tool("odd", {"type": "object", "properties": {"x": {"type": 12}}})
    assert derive_arguments(broken, "anything") == ({}, "none needed")
    strict = tool("strict", {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}})
    assert derive_arguments(strict, "q", {"n": "not a number"}) == ({"n": "not a number"}, "caller")


ZONE = {"type": "string", "description": "IANA timezone"}
CONVERT = Capability(backend="time", name="convert_time", description="Convert a time between time zones",
                     input_schema={"type": "object", "required": ["source_timezone", "time", "target_timezone"],
                                   "properties": {"source_timezone": ZONE, "target_timezone": ZONE,
                                                  "time": {"type": "string", "description": "HH:MM"}}})


@pytest.mark.parametrize(("question", "source", "target"), [
    ("What time is it in New York when it is 9am in London?", "Europe/London", "America/New_York"),
    ("Convert 3pm Tokyo time to Paris", "Asia/Tokyo", "Europe/Paris"),
    ("In Sydney at 18:30, what time is it in Berlin?", "Australia/Sydney", "Europe/Berlin"),
])
def test_the_place_a_time_of_day_is_given_in_is_the_source(question: str, source: str, target: str) -> None:
    derived = derive_arguments(CONVERT, question)
    assert not isinstance(derived, ArgumentsRequired)
    assert (derived[0]["source_timezone"], derived[0]["target_timezone"]) == (source, target)


def test_the_values_a_call_would_leave_unused() -> None:
    def values_left(cap: Capability, question: str) -> list:
        return derive_with_leftovers(cap, question)[1]

    now = Capability(backend="time", name="get_current_time", input_schema=TIMEZONE_SCHEMA)
    assert values_left(now, "What's the time difference between Tokyo and Paris?") == ["Europe/Paris"]
    assert values_left(now, "What time is it in Tokyo? Tokyo, please") == []  # the same place twice
    add = Capability(backend="calc", name="add", input_schema=NUMBERS_SCHEMA)
    assert values_left(add, "add 2 and 40") == [] and values_left(add, "add 2, 3 and 4") == [4]


@pytest.mark.parametrize(("question", "zone"), [
    ("What time is it in India?", "Asia/Kolkata"), ("What time is it in the UK?", "Europe/London"),
    ("Time in Germany now", "Europe/Berlin"), ("What time is it in Japan?", "Asia/Tokyo"),
    ("What time is it in South Korea?", "Asia/Seoul"),
])
def test_a_country_that_keeps_one_clock_names_its_zone(question: str, zone: str) -> None:
    now = Capability(backend="time", name="get_current_time", input_schema=TIMEZONE_SCHEMA)
    assert derive_arguments(now, question) == ({"timezone": zone}, "extracted: timezone")


@pytest.mark.parametrize("question", [
    "What time is it in the United States?", "What time is it in China?",  # several clocks: which is a guess
    "how long to roast a turkey",  # a common noun, not the country
])
def test_a_country_of_several_clocks_or_a_common_noun_names_no_zone(question: str) -> None:
    now = Capability(backend="time", name="get_current_time", input_schema=TIMEZONE_SCHEMA)
    assert isinstance(derive_arguments(now, question), ArgumentsRequired)


@pytest.mark.parametrize("question", [
    "Find parking near 88 Century Avenue, floor 2",  # a street number is not a latitude
    "What is the 八字 of a boy born on August 8, 2008 at 11:00 am?",  # a date and a time are not operands
    "Explore the area near Nanjing West Road 2-68",  # nor a range or a code
])
def test_a_number_that_belongs_to_a_date_a_time_an_address_or_a_code_is_not_taken_for_an_operand(
        question: str) -> None:
    where = tool("find_parking", {"type": "object", "required": ["latitude", "longitude"], "properties": {
        "latitude": {"type": "number"}, "longitude": {"type": "number"}}})
    assert isinstance(derive_arguments(where, question), ArgumentsRequired)

