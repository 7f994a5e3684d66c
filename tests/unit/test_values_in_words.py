"""Values a question says in words ("noon", "three", "in China"), and the value a parameter's description says to use
when the question gives none."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.schemas import stated_default
from router.stages.arguments import derive_arguments
from tests.unit.helpers import NUMBERS_SCHEMA
from tests.unit.test_arguments import tool

LOCAL_CLOCK = tool("get_current_time", {"type": "object", "required": ["timezone"], "properties": {"timezone": {
    "type": "string", "description": "IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use "
                                     "'Europe/Paris' as local timezone if no timezone provided by the user."}}},
                   backend="time")


@pytest.mark.parametrize("question", ["What time is it?", "What's the current time?", "Time now, please"])
def test_a_value_the_description_says_to_use_when_none_is_given_is_used(question: str) -> None:
    # Before, a 422: the time server's description tells whoever fills the call which zone to use then.
    assert derive_arguments(LOCAL_CLOCK, question) == ({"timezone": "Europe/Paris"}, "none needed")


@pytest.mark.parametrize("question", [
    "What time is it in Springfield?",  # a place no zone names: the local clock would be a wrong answer
    "What time is it at the office?",
])
def test_a_stated_default_never_stands_in_for_what_the_question_says(question: str) -> None:
    derived = derive_arguments(LOCAL_CLOCK, question)
    assert isinstance(derived, ArgumentsRequired) and derived.details["missing"] == "timezone"
    assert derive_arguments(LOCAL_CLOCK, "What time is it in Tokyo?")[0] == {"timezone": "Asia/Tokyo"}


def test_a_default_is_stated_only_for_when_none_is_given() -> None:
    said = "Branch to show. Defaults to 'main' if not given."
    assert stated_default({"type": "string", "description": said}) == "main"
    assert stated_default({"type": "string", "description": "Use 'main' for the main branch"}) is None
    assert stated_default({"type": "integer", "description": "Use '5' if none is given"}) is None
    # A value beside others the question gives is no stand-in: which zone the question's one place is, is unsure.
    convert = tool("convert_time", {"type": "object", "required": ["source", "time", "target"], "properties": {
        "source": {"type": "string", "description": "Source IANA timezone. Use 'UTC' if no source timezone provided"},
        "time": {"type": "string", "description": "Time in 24-hour format (HH:MM)"},
        "target": {"type": "string", "description": "Target IANA timezone"}}})
    derived = derive_arguments(convert, "Convert 15:00 to Tokyo time")
    assert isinstance(derived, ArgumentsRequired)


@pytest.mark.parametrize(("question", "clock"), [("Set an alarm at noon", "12:00"), ("at midnight", "00:00"),
                                                 ("wake me at midday", "12:00")])
def test_noon_and_midnight_are_times_of_day(question: str, clock: str) -> None:
    alarm = tool("alarm", {"type": "object", "required": ["time"], "properties": {"time": {"type": "string"}}})
    assert derive_arguments(alarm, question)[0] == {"time": clock}
    assert isinstance(derive_arguments(alarm, "the noonday sun"), ArgumentsRequired)


@pytest.mark.parametrize(("question", "code"), [
    ("Can you check if today is a public holiday in China?", "CN"), ("Any long weekends in the United States?", "US"),
    ("Holidays in the UK", "GB"), ("Holidays in South Korea", "KR"),
    ("How do I roast a turkey?", None), ("Holidays in New Jersey", None), ("Tell us the holidays", None),
])
def test_a_country_named_fills_a_parameter_for_its_code(question: str, code: str | None) -> None:
    # ToolAlpaca's Nager.Date: "Required. string. Two-character represented country code": a 422 before.
    from tests.unit.helpers import derives

    described = {"type": "string", "description": "Two-character represented country code, e.g. CN"}
    holidays = tool("holidays", {"type": "object", "required": ["countryCode"], "properties": {
        "countryCode": {"type": "string"}}})
    derives(holidays, question, code and {"countryCode": code})
    derives(tool("h", {"type": "object", "required": ["country"], "properties": {"country": described}}), question,
            code and {"country": code})
    # A country by its name is no code: the parameter that takes a name is not given one.
    named = tool("h", {"type": "object", "required": ["country"], "properties": {"country": {
        "type": "string", "description": "The country's name"}}})
    assert isinstance(derive_arguments(named, "Holidays in China"), ArgumentsRequired)


def test_small_numbers_written_as_words_are_numbers() -> None:
    # The official git server: "Show the last three commits" was a 409 (nothing settled git_log), "Show the last 3
    # commits" its call with `max_count` 3; LiveMCPBench's "over the past three days" left the index's `days` out.
    log = tool("git_log", {"type": "object", "properties": {"max_count": {
        "type": "integer", "description": "Maximum number of commits to show"}}})
    assert derive_arguments(log, "Show the last three commits")[0] == {"max_count": 3}
    assert derive_arguments(tool("add", NUMBERS_SCHEMA), "Add twelve and five")[0] == {"a": 12, "b": 5}
    # "One" is a pronoun as often; a word that holds a number's letters is none; "twenty-one" is not read as twenty.
    assert derive_arguments(log, "Show me one of the commits")[0] == {}
    assert derive_arguments(log, "Show the commits I often make")[0] == {}
    assert isinstance(derive_arguments(tool("add", NUMBERS_SCHEMA), "Add twenty-one and five"), ArgumentsRequired)
