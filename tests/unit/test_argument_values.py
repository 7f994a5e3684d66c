"""Values a question gives that are not what they first look like: places that only begin like a zone's city or
are followed by another region, numbers the question qualifies, codes that are also words, the wording
that says which of two values goes where, a number several optional parameters could take, and an update given
nothing to change. Each was a wrong value sent to a tool, or a right one refused."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments, derive_with_leftovers
from router.stages.free_text import free_text_parameter
from router.values import Capability
from tests.unit.helpers import derives
from tests.unit.test_arguments import ADD, CONVERT, TIME, tool


@pytest.mark.parametrize("question", [
    "What time is it in North Carolina?",  # "North": Australia/North, an old name kept for compatibility
    "What time is it on the east coast?", "What time is it in Eastern Europe?", "What time is it in central Europe?",
    "What time is it in Saint Petersburg?", "What time is it in St. Petersburg, Russia?",  # not Indiana's
    "What is the local time in Jersey City?", "What time is it in Panama City, Florida?",
    "What time is it in Paris, Texas?", "What time is it in London, Ontario?", "What time is it in Paris Texas?",
    "What time is it in Georgia?", "What time is it in EST?",  # the state or the country; a fixed offset
    "What time is it in Dublin, Ohio?", "What time is it in Sydney, Nova Scotia?",
    "What time is it in Santiago de Compostela?",  # in Spain, not Chile
])
def test_a_place_that_is_not_the_zone_of_its_first_words_names_no_zone(question: str) -> None:
    assert isinstance(derive_arguments(TIME, question), ArgumentsRequired)


@pytest.mark.parametrize(("question", "zone"), [
    ("What time is it in New York City?", "America/New_York"), ("In Tokyo, what time is it?", "Asia/Tokyo"),
    ("Tokyo Time now?", "Asia/Tokyo"), ("What time is it in Berlin, Germany?", "Europe/Berlin"),
    ("What time is it in London, UK?", "Europe/London"), ("What time is it in Mexico City?", "America/Mexico_City"),
    ("What time is it in Sydney, Australia?", "Australia/Sydney"), ("Time in Chicago, IL?", "America/Chicago"),
    ("What time is it in Toronto, Ontario?", "America/Toronto"), ("What time is it in Kiev, Ukraine?", "Europe/Kiev"),
    ("What time is it in Lisbon, Portugal?", "Europe/Lisbon"), ("What time is it in London, John?", "Europe/London"),
    ("Time in Tokyo, London and Paris", "Asia/Tokyo"), ("What time is it in Hawaii?", "US/Hawaii"),
    ("What time is it in Kuwait City?", "Asia/Kuwait"), ("Tell Bob Tokyo time", "Asia/Tokyo"),
    ("What time is it in Santiago de Chile?", "America/Santiago"), ("Time in London on Monday", "Europe/London"),
])
def test_a_zones_city_its_country_or_its_clock_words_around_it_still_name_it(question: str, zone: str) -> None:
    assert derive_arguments(TIME, question) == ({"timezone": zone}, "extracted: timezone")


def test_a_time_written_p_m_is_in_the_afternoon() -> None:
    derived = derive_arguments(CONVERT, "Convert 11:00 p.m. Tokyo time to London")
    assert isinstance(derived, tuple) and derived[0]["time"] == "23:00"


@pytest.mark.parametrize(("schema", "question"), [
    ({"country": {"type": "string", "enum": ["US", "DE", "IN"]}}, "What is the VAT rate in Germany?"),  # not India
    ({"a": {"type": "number"}, "b": {"type": "number"}}, "add 3 and 4 million"),
    ({"a": {"type": "number"}, "b": {"type": "number"}}, "What is 15% of 80?"),
    ({"a": {"type": "number"}, "b": {"type": "number"}}, "add 1.000,5 and 2"),  # was 5 and 2
    ({"latitude": {"type": "number"}, "longitude": {"type": "number"}}, "Forecast at 40.7128° N, 74.0060° W"),
    ({"latitude": {"type": "number"}, "longitude": {"type": "number"}}, "forecast for 33.87 S, 151.21 E"),
    ({"query": {"type": "string", "description": "SQL query to execute"}}, "How many users signed up last week?"),
])
def test_a_value_the_question_qualifies_otherwise_is_not_taken_for_an_argument(schema: dict, question: str) -> None:
    cap = tool("t", {"type": "object", "required": list(schema), "properties": schema})
    assert isinstance(derive_arguments(cap, question), ArgumentsRequired)


def test_a_number_given_again_is_another_operand_and_an_optional_count_is_no_year() -> None:
    # "3 + 3 + 3" was 3 + 3, called: a repeated number was taken for the same mention
    assert derive_with_leftovers(ADD, "What is 3 + 3 + 3?")[1] == [3.0]
    assert derive_with_leftovers(ADD, "add 5 and 5")[1] == []
    listing = tool("list_invoices", {"type": "object", "properties": {"limit": {"type": "integer"}}})
    assert derive_arguments(listing, "List the invoices from 2024") == ({}, "none needed")  # was limit 2024
    assert derive_arguments(listing, "List invoices over 500 dollars") == ({}, "none needed")
    assert derive_arguments(listing, "list the last 10 invoices") == ({"limit": 10}, "extracted, optional: limit")


@pytest.mark.parametrize(("question", "source", "target"), [
    ("How many km is 5 miles?", "miles", "km"), ("convert 5 km to miles", "km", "miles"),
    ("how many celsius is 100 fahrenheit", "fahrenheit", "celsius"),
])
def test_the_unit_written_after_the_amount_is_the_one_converted_from(question: str, source: str, target: str) -> None:
    units = {"type": "string", "enum": ["km", "miles", "celsius", "fahrenheit"]}
    cap = tool("convert_units", {"type": "object", "required": ["value", "from_unit", "to_unit"], "properties": {
        "value": {"type": "number"}, "from_unit": units, "to_unit": units}})
    derived = derive_arguments(cap, question)
    assert isinstance(derived, tuple) and (derived[0]["from_unit"], derived[0]["to_unit"]) == (source, target)


def test_a_number_named_by_its_parameter_goes_there_and_what_is_subtracted_from_comes_first() -> None:
    num = {"type": "number"}
    forecast = tool("get_forecast", {"type": "object", "required": ["latitude", "longitude"],
                                     "properties": {"latitude": num, "longitude": num}})
    assert derive_arguments(forecast, "Forecast for longitude -74 and latitude 40.7")[0] == {
        "latitude": 40.7, "longitude": -74.0}  # was latitude -74: numbers in order
    subtract = tool("subtract", {"type": "object", "required": ["a", "b"], "properties": {"a": num, "b": num}})
    for question in ("Subtract 5 from 20", "take 5 away from 20", "what is 20 minus 5"):
        assert derive_arguments(subtract, question)[0] == {"a": 20.0, "b": 5.0}, question


def test_a_time_followed_by_am_or_pm_still_names_the_place_after_it() -> None:
    derived = derive_arguments(CONVERT, "Convert 3 PM Tokyo time to London")
    assert isinstance(derived, tuple) and derived[0] == {
        "source_timezone": "Asia/Tokyo", "time": "15:00", "target_timezone": "Europe/London"}


@pytest.mark.parametrize(("schema", "question", "expected"), [
    ({"latitude": {"type": "number"}, "longitude": {"type": "number"}}, "weather at 40.7128,-74.0060",
     {"latitude": 40.7128, "longitude": -74.006}),  # the minus after a comma is the number's
    ({"value": {"type": "number"}}, "Convert 100°F to celsius", {"value": 100.0}),  # a temperature's degree
    ({"level": {"type": "number"}}, "Set brightness to 80%", {"level": 80.0}),  # a parameter that takes a share
    ({"currency": {"type": "string", "enum": ["USD", "EUR"]}}, "convert it to eur", {"currency": "EUR"}),
    ({"prompt": {"type": "string", "description": "Natural language description of the code to generate"}},
     "write a function that reverses a string", {"prompt": "write a function that reverses a string"}),
])
def test_values_the_question_gives_plainly_are_still_taken(schema: dict, question: str, expected: dict) -> None:
    cap = tool("t", {"type": "object", "required": list(schema), "properties": schema})
    derived = derive_arguments(cap, question)
    assert isinstance(derived, tuple) and derived[0] == expected


def test_an_optional_number_next_to_its_parameters_name_is_taken_after_any_word() -> None:
    weather = tool("forecast", {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "enum": ["Paris"]}, "days": {"type": "integer"}}})
    assert derive_arguments(weather, "Weather in Paris in 3 days")[0] == {"city": "Paris", "days": 3}
    items = tool("list_items", {"type": "object", "properties": {"limit": {"type": "integer"}}})
    assert derive_arguments(items, "list items with a limit of 10")[0] == {"limit": 10}


def test_a_date_the_question_gives_and_whether_two_zones_clocks_are_set_otherwise_then() -> None:
    from datetime import UTC, date, datetime

    from router.stages.timezones import dates_in, gap_changes

    today = date(2026, 11, 28)
    assert dates_in("9am in London on March 30", today) == [date(2026, 3, 30)]
    assert dates_in("on 30 March 2027, or the 4th of July", today) == [date(2027, 3, 30), date(2026, 7, 4)]
    assert dates_in("at 9 on 2027-03-30", today) == [date(2027, 3, 30)]
    # Not dates: a month's name in lower case ("may"), a day the month does not have, a version or a score.
    assert dates_in("You may 3 times; February 30; v2.1; 3-1", today) == []
    now = datetime(2026, 11, 28, 12, tzinfo=UTC)  # winter on both sides of the Atlantic
    london_new_york = ["Europe/London", "America/New_York"]
    assert gap_changes(london_new_york, "09:00", date(2027, 3, 30), now) is None  # both on summer time by then
    assert gap_changes(london_new_york, "09:00", date(2027, 3, 20), now) == ("Europe/London", "America/New_York", 1.0)
    assert gap_changes(["Europe/London", "Europe/Paris"], "09:00", date(2027, 7, 1), now) is None  # together
    assert gap_changes(["Europe/London", "Australia/Sydney"], "09:00", date(2027, 7, 1), now) == \
        ("Europe/London", "Australia/Sydney", 2.0)  # one forward, the other back
    assert gap_changes(london_new_york, "24:00", date(2027, 3, 20), now) is None  # no such time: nothing to say


def test_of_several_optional_numbers_an_unnamed_number_goes_to_none_and_head_and_tail_are_first_and_last() -> None:
    # The official filesystem server's `read_text_file`: `tail` comes first, and took "the first 3 lines".
    read = tool("read_text_file", {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string"}, "tail": {"type": "number"}, "head": {"type": "number"}}})
    assert derive_arguments(read, "Show the first 3 lines of /srv/a.txt")[0] == {"path": "/srv/a.txt", "head": 3}
    assert derive_arguments(read, "Show the top 2 lines of /srv/a.txt")[0] == {"path": "/srv/a.txt", "head": 2}
    assert derive_arguments(read, "Show the last 3 lines of /srv/a.txt")[0] == {"path": "/srv/a.txt", "tail": 3}
    assert derive_arguments(read, "Show 3 lines of /srv/a.txt")[0] == {"path": "/srv/a.txt"}
    # Only a parameter named beside a number stops being another candidate for an unnamed one: "tail -n 5" is
    # neither's for sure, so the number is left over (the plan then declines), not read as `head`; nor does a file
    # name ("lastlog") name one.
    for question in ("tail -n 5 /srv/a.txt", "Show 5 lines of /var/log/lastlog.txt",
                     "Show lines from the bottom of /srv/a.txt, 5 of them"):
        derived, left = derive_with_leftovers(read, question)
        assert "head" not in derived[0] and "tail" not in derived[0] and left == [5], question
    assert derive_arguments(read, "Show the first 3 lines and the last 2 lines of /srv/a.txt")[0] == {
        "path": "/srv/a.txt", "head": 3, "tail": 2}
    assert derive_arguments(read, "Read the final 20 lines of /srv/a.txt")[0] == {"path": "/srv/a.txt", "tail": 20}
    # A length of time in seconds names a duration: the demo's long-running operation ran 10 s for "5 seconds".
    operation = tool("longRunningOperation", {"type": "object", "properties": {
        "duration": {"type": "number"}, "steps": {"type": "number"}}})
    assert derive_arguments(operation, "Run a long operation for 5 seconds")[0] == {"duration": 5}
    assert derive_with_leftovers(operation, "Run a long operation 5")[1] == [5]
    poll = tool("poll", {"type": "object", "properties": {  # kept in milliseconds, so no "seconds"
        "interval_ms": {"type": "integer"}, "max_polls": {"type": "integer"}}})
    assert derive_with_leftovers(poll, "Poll every 5 seconds") == (({}, "none needed"), [5])
    # A number beside a word of the other parameter leaves the first to the number nothing names.
    news = tool("top_stories", {"type": "object", "properties": {"limit": {"type": "integer"},
                                                                 "days": {"type": "integer"}}})
    assert derive_arguments(news, "the top 5 stories from the last 3 days")[0] == {"limit": 5, "days": 3}


def test_a_call_to_a_tool_that_updates_is_not_derived_when_it_would_change_nothing() -> None:
    # "Close issue 42" sent as update_issue(issue_number=42) changes nothing and looks done; ToolAlpaca's "update it
    # with the new string ..." was sent to updateDataSource with no arguments at all.
    update = tool("update_issue", {"type": "object", "required": ["issue_number"], "properties": {
        "issue_number": {"type": "integer"}, "title": {"type": "string"},
        "state": {"type": "string", "enum": ["open", "closed"]}}})
    closing = derive_arguments(update, "Close issue 42")
    assert isinstance(closing, ArgumentsRequired) and "none of what it would change ('title', 'state')" in str(closing)
    assert derive_arguments(update, "Mark issue 42 as closed")[0] == {"issue_number": 42, "state": "closed"}
    settings = tool("updateSettings", {"type": "object", "properties": {"theme": {"type": "string"}}})
    assert isinstance(derive_arguments(settings, "Update my settings"), ArgumentsRequired)
    refresh = tool("update_index", {"type": "object", "properties": {"force": {"type": "boolean"}}})
    assert derive_arguments(refresh, "Update the search index") == ({}, "none needed")
    # But a switch is what such an update changes: "Make octocat/hello-world private" would set nothing (a tool that
    # acts takes no switch from the wording: "it was locked by mistake" would have locked the issue).
    repository = tool("update_repository", {"type": "object", "required": ["owner", "repo"], "properties": {
        "owner": {"type": "string"}, "repo": {"type": "string"}, "private": {"type": "boolean"}}})
    assert isinstance(derive_arguments(repository, "Make octocat/hello-world private"), ArgumentsRequired)
    # Which thing, given, is not what to change (ToolAlpaca's data source, its id optional).
    source = tool("updateDataSource", {"type": "object", "properties": {
        "sourceId": {"type": "string"}, "connectionString": {"type": "string"}}})
    assert isinstance(derive_arguments(source, "Update the data source ID 85 with a new string"), ArgumentsRequired)
    # What a required parameter says is the change itself; a tool that only reads changes nothing anyway.
    status = tool("set_status", {"type": "object", "required": ["status"], "properties": {
        "status": {"type": "string", "enum": ["away", "active"]}, "notify": {"type": "boolean"}}})
    assert derive_arguments(status, "Set my status to away")[0] == {"status": "away"}
    reader = Capability(backend="b", name="update_log", read_only=True, input_schema={
        "type": "object", "properties": {"limit": {"type": "integer"}}})
    assert derive_arguments(reader, "Show the update log")[0] == {}


def test_a_number_written_in_the_unit_a_parameter_counts_fills_it_and_a_whole_number_is_sent_whole() -> None:
    # The fetch server: "the first 500 characters" left max_length (characters, strictly an integer) to its default
    # of 5,000, and a number parameter was sent 7.0, which a strict server refuses as no integer.
    fetch = tool("fetch", {"type": "object", "required": ["url"], "properties": {
        "url": {"type": "string", "format": "uri"},
        "max_length": {"type": "integer", "description": "Maximum number of characters to return."},
        "start_index": {"type": "integer", "description": "Start content from this character index."}}})
    args, _ = derive_arguments(fetch, "Get the first 500 characters of https://example.com")
    assert args == {"url": "https://example.com", "max_length": 500}
    for question in ("Skip the first 5000 characters of https://example.com",  # where to start, not how much
                     "Does https://example.com have more than 280 characters?"):
        assert "max_length" not in derive_with_leftovers(fetch, question)[0][0]
    # Where to start, in the words that say so: the number was left unused, and the fetch declined.
    for question in ("Read https://example.com/a.html from character 1000",
                     "Fetch https://example.com/a.html starting at character 1000",
                     "Skip the first 1000 characters of https://example.com/a.html"):
        assert derive_with_leftovers(fetch, question) == (
            ({"url": "https://example.com/a.html", "start_index": 1000}, "extracted: start_index, url"), [])
    invoices = tool("list_invoices", {"type": "object", "properties": {"offset": {"type": "integer"}}})
    assert derive_arguments(invoices, "Show the invoices from 2024")[0] == {}  # a year, not where to start
    assert derive_arguments(invoices, "Show the invoices after the first 20")[0] == {"offset": 20}
    # Two parameters counted in the same unit: the unit says neither, but a count not said to be skipped is no place
    # to start from.
    both = tool("page", {"type": "object", "properties": {
        "limit": {"type": "integer", "description": "Most number of characters"},
        "skip": {"type": "integer", "description": "Number of characters to skip"}}})
    assert derive_arguments(both, "Show 500 characters")[0] == {"limit": 500}
    assert derive_arguments(both, "Skip 500 characters")[0] == {"skip": 500}
    pull = tool("get_pull_request", {"type": "object", "required": ["pull_number"], "properties": {
        "pull_number": {"type": "number"}}})
    number = derive_arguments(pull, "Show pull request 7")[0]["pull_number"]
    assert number == 7 and isinstance(number, int)
    assert derive_arguments(ADD, "Add 2.5 and 1")[0] == {"a": 2.5, "b": 1}


@pytest.mark.parametrize(("question", "args"), [
    ("Fetch the raw HTML of https://example.com", {"url": "https://example.com", "raw": True}),
    ("Fetch https://example.com", {"url": "https://example.com"}),
    ("Fetch https://example.com, not raw", {"url": "https://example.com"}),  # named, but turned off
    ("Fetch https://example.com without the raw markup", {"url": "https://example.com"}),
    ("List https://example.com recursively, hidden pages too",  # `include_hidden` needs both its words
     {"url": "https://example.com", "recursive": True}),
    ("Include the hidden pages of https://example.com", {"url": "https://example.com", "include_hidden": True}),
])
def test_a_switch_is_on_where_the_question_names_it(question: str, args: dict) -> None:
    # "Fetch the raw HTML" was fetched as simplified markdown, `raw` left off.
    fetch = Capability(backend="b", name="fetch", read_only=True, input_schema={
        "type": "object", "required": ["url"], "properties": {"url": {"type": "string"}, "raw": {"type": "boolean"},
                                                              "recursive": {"type": "boolean"},
                                                              "include_hidden": {"type": "boolean"}}})
    assert derive_arguments(fetch, question)[0] == args
    # One that may act is not told how on a guess.
    acting = Capability(backend="b", name="fetch", input_schema=fetch.input_schema)
    assert derive_arguments(acting, question)[0] == {"url": "https://example.com"}


@pytest.mark.parametrize(("question", "switch", "on"), [
    ("Do not, under any circumstances, notify them", "notify", False),  # a few words after "not"
    ("Run the migration for real, no dry run", "dry_run", False),  # "Run" first, but "dry" follows "no"
    ("Do a dry run of the migration", "dry_run", True),
    ("Show the draft", "draft", False), ("Show the draft of the post", "draft", False),  # a noun: the thing
    ("Show the draft posts", "draft", True), ("Show all branches", "all", True),
    ("Fetch it as markdown, raw HTML is unreadable", "raw", False),
    ("Show what was locked by mistake", "locked", False),
    ("Show the final report", "final", True), ("Finally, show the report", "final", False),
])
def test_a_switch_turned_off_by_its_wording_or_used_as_a_noun_is_not_on(question: str, switch: str, on: bool) -> None:
    # "Show the draft" would have shown only drafts; "raw HTML is unreadable" fetched the raw HTML.
    cap = Capability(backend="b", name="t", read_only=True, input_schema={
        "type": "object", "properties": {switch: {"type": "boolean"}}})
    assert derive_arguments(cap, question)[0] == ({switch: True} if on else {})


# Schemas as @playwright/mcp 0.0.83 lists them: zod 4 marks every parameter with a default as required.
SCREENSHOT = Capability(backend="playwright", name="browser_take_screenshot", read_only=True, input_schema={
    "type": "object", "required": ["scale"], "additionalProperties": False, "properties": {
        "type": {"type": "string", "enum": ["png", "jpeg", "webp"]}, "filename": {"type": "string"},
        "scale": {"type": "string", "enum": ["css", "device"], "default": "css",
                  "description": "Image resolution scale. Default is css."}}})
WAIT_FOR = Capability(backend="playwright", name="browser_wait_for", read_only=True, input_schema={
    "type": "object", "additionalProperties": False, "properties": {
        "time": {"type": "number", "description": "The time to wait in seconds, at most 30"},
        "text": {"type": "string", "description": "The text to wait for"},
        "textGone": {"type": "string", "description": "The text to wait for to disappear"}}})


def test_a_required_parameter_with_a_default_is_not_asked_of_the_question_and_is_sent_its_default() -> None:
    args, source = derive_arguments(SCREENSHOT, "Take a screenshot of the page")
    assert args == {"scale": "css"} and source == "none needed"
    # A value the question gives wins over the default; the caller's arguments get the default beside their own.
    assert derive_arguments(SCREENSHOT, "Take a device scale screenshot")[0] == {"scale": "device"}
    assert derive_arguments(SCREENSHOT, "q", {"type": "jpeg"}) == ({"type": "jpeg", "scale": "css"}, "caller")


def test_a_required_parameter_without_a_default_is_still_asked_for() -> None:
    schema = {**SCREENSHOT.input_schema, "required": ["scale", "filename"]}
    refused = derive_arguments(Capability(backend="p", name="shot", read_only=True, input_schema=schema), "Take one")
    assert isinstance(refused, ArgumentsRequired) and refused.details["missing"] == "filename"


def test_an_optional_text_among_other_values_is_not_sent_the_whole_request() -> None:
    # "Wait 3 seconds" once waited for the text "Wait 3 seconds" to appear.
    assert free_text_parameter(WAIT_FOR) is None
    assert derive_arguments(WAIT_FOR, "Wait 3 seconds")[0] == {"time": 3}
    # Alone, an optional text is still where a tool that only reads takes the request.
    alone = Capability(backend="loud", name="yell", read_only=True, input_schema={
        "type": "object", "properties": {"text": {"type": "string"}}})
    assert free_text_parameter(alone) == "text"


def test_a_default_sent_is_the_calls_own_copy() -> None:
    listed = Capability(backend="b", name="tag", read_only=True, input_schema={
        "type": "object", "required": ["labels"], "properties": {"labels": {"type": "array", "default": ["a"]}}})
    args, _ = derive_arguments(listed, "Tag it")
    args["labels"].append("b")
    assert listed.input_schema["properties"]["labels"]["default"] == ["a"]


PRESS_KEY = Capability(backend="playwright", name="browser_press_key", description="Press a key on the keyboard",
                       input_schema={"type": "object", "required": ["key"], "properties": {"key": {
                           "type": "string",
                           "description": "Name of the key to press or a character to generate, such as `ArrowLeft` "
                                          "or `a`"}}})


@pytest.mark.parametrize(("question", "key"), [
    ("Press Enter", "Enter"), ("Press the Escape key", "Escape"), ("hit the down arrow", "ArrowDown"),
    ("Press page down", "PageDown"), ("Press F5", "F5"), ("Tap the space key", "Space"), ("Press return", "Enter"),
    # A key's word that presses nothing is no key.
    ("Delete the row", None), ("Enter your name", None), ("Go to the end of the page", None),
])
def test_a_key_is_the_one_the_question_presses(question: str, key: str | None) -> None:
    # "Press Enter" was a 422 asking for `key`.
    derives(PRESS_KEY, question, key and {"key": key})


def test_a_key_that_is_no_keyboards_takes_no_key_pressed() -> None:
    lookup = Capability(backend="kv", name="get", read_only=True, input_schema={
        "type": "object", "required": ["key"], "properties": {"key": {"type": "string", "description": "The key"}}})
    assert isinstance(derive_arguments(lookup, "Press Enter"), ArgumentsRequired)


RESIZE = Capability(backend="playwright", name="browser_resize", description="Resize the browser window", input_schema={
    "type": "object", "required": ["width", "height"], "properties": {
        "width": {"type": "number", "description": "Width of the browser window"},
        "height": {"type": "number", "description": "Height of the browser window"}}})


@pytest.mark.parametrize(("question", "size"), [
    ("Resize the window to 800x600", (800, 600)), ("Make it 1920\u00d71080.", (1920, 1080)),
    ("Resize the window to 1024 by 768", (1024, 768)),
    # A hexadecimal number, a factor and a name with digits are no size.
    ("Resize it to 0x1F0", None), ("Resize it 3x", None), ("Resize for the 4x4s", None),
])
def test_each_side_of_a_size_written_with_an_x_is_a_number(question: str, size: tuple[int, int] | None) -> None:
    # "Resize the window to 800x600" was a 422 asking for `width`.
    derives(RESIZE, question, size and {"width": size[0], "height": size[1]})


@pytest.mark.timeout(10)  # a look past every later side of a size would take minutes
def test_a_long_run_of_sizes_is_read_to_its_end() -> None:
    from router.stages.numbers import NUMBER

    assert len(list(NUMBER.finditer("1x" * 50_000 + "1"))) == 50_001


# As @modelcontextprotocol/server-filesystem lists it.
READ_FILES = Capability(backend="filesystem", name="read_multiple_files", read_only=True, input_schema={
    "type": "object", "required": ["paths"], "properties": {"paths": {
        "type": "array", "items": {"type": "string"}, "minItems": 1,
        "description": "Array of file paths to read. Each path must be a string pointing to a valid file within "
                       "allowed directories."}}})


@pytest.mark.parametrize(("question", "paths"), [
    ("Compare /srv/a.txt and /srv/b.txt", ["/srv/a.txt", "/srv/b.txt"]),
    ("Read notes.txt, b.txt and '/srv/My Docs/c.md'", ["notes.txt", "b.txt", "/srv/My Docs/c.md"]),
    # One path is the tool's that takes one, and a path where something goes is no file to read.
    ("Read /srv/a.txt", None), ("Compare the two files", None), ("Copy /srv/a.txt to /srv/b.txt", None),
    ("Save /srv/a.txt as '/srv/c d.txt'", None),
])
def test_an_array_of_paths_takes_every_path_the_question_gives(question: str, paths: list[str] | None) -> None:
    derives(READ_FILES, question, paths and {"paths": paths})


def test_an_array_of_what_is_no_path_takes_none() -> None:
    tags = Capability(backend="b", name="tag", read_only=True, input_schema={"type": "object", "required": ["tags"],
                      "properties": {"tags": {"type": "array", "items": {"type": "string"}}}})
    assert isinstance(derive_arguments(tags, "Tag /srv/a.txt"), ArgumentsRequired)
