"""A thing's name or identifier as a question writes it beside the kind of thing (`router/stages/names.py`), for a
parameter named after that kind; and why such a name settles no choice between tools."""

from __future__ import annotations

from typing import Any

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments
from router.stages.names import kind_identified_by, kind_named_by
from router.stages.settle import values_taken
from router.values import Capability


def tool(name: str, parameter: str, required: bool = True, **spec: Any) -> Capability:
    return Capability(backend="b", name=name, input_schema={
        "type": "object", "properties": {parameter: {"type": "string", **spec}},
        "required": [parameter] if required else []})


@pytest.mark.parametrize(("question", "name"), [
    ("Create a branch called feature-x", "feature-x"), ("Switch to the main branch", "main"),
    ("Delete the branch 'old-feature'", "old-feature"), ('Check out the "release/2.0" branch', "release/2.0"),
    ("Make a new branch named fix_login.", "fix_login"), ("Check out the  develop\tbranch", "develop"),
    # Words that describe a branch rather than name it, and a branch not named at all, give none.
    ("Switch to the current branch", None), ("Show the existing branch", None), ("Create a new branch", None),
    ("Check out the remote branch", None), ("Which branch am I on?", None), ("Branch out from here", None),
    ("The branch office in Leeds", None), ("Show the available branches", None),
    # The first mention decides, and one that names nothing gives no name rather than the next one's.
    ("Drop the branch called default, not the main branch", None), ("Delete a branch named after the ticket", None),
    ("Copy the branch 'current' into the backup branch", None), ("Delete the stale branch", None),
    # Several of the kind are no name for a parameter that takes one; an apostrophe is no quote.
    ("Delete the branches called dev and main", None), ("Delete the three branches", None),
    ("Delete the 3 branches", None), ("Don't delete the users' branch, it's the wrong one", None),
    ("What's in the customers' branch", None), ("Drop the it branch", None),
])
def test_a_name_is_taken_only_beside_the_word_for_its_kind(question: str, name: str | None) -> None:
    derived = derive_arguments(tool("git_checkout", "branch_name"), question)
    assert (derived[0] if isinstance(derived, tuple) else None) == ({"branch_name": name} if name else None)


@pytest.mark.parametrize(("parameter", "kind"), [
    ("table_name", "table"), ("tableName", "table"), ("branch_name", "branch"), ("roleName", "role"),
    # A person's name, and a name of nothing in particular, are not a thing's name the question writes so.
    ("name", None), ("first_name", None), ("user_name", None), ("display_name", None), ("id", None),
    ("table", None), ("nm", None),
])
def test_a_parameter_takes_a_things_name_when_named_after_the_kind(parameter: str, kind: str | None) -> None:
    assert kind_named_by(parameter) == kind


def test_an_optional_parameter_takes_a_name_only_when_the_question_calls_it_so_or_quotes_it() -> None:
    charts = tool("charts_changes_get", "chart_name", required=False)
    assert derive_arguments(charts, "Any updates to the 'Arrivals' chart?")[0] == {"chart_name": "Arrivals"}
    assert derive_arguments(charts, "Is there a chart called Departures?")[0] == {"chart_name": "Departures"}
    # "the X chart" may well name one, but a tool that can do without it is not given a guess.
    assert derive_arguments(charts, "Any changes to the Arrivals chart?")[0] == {}
    assert derive_arguments(charts, "Get the aeronautical charts for KLAX")[0] == {}
    assert derive_arguments(charts, "Any changes to the\u00a0 Arrivals chart?")[0] == {}  # however spaced


def test_a_things_name_fits_creating_it_as_well_as_deleting_it_so_it_settles_no_choice_of_tool() -> None:
    create = tool("createRole", "roleName")
    timezone = Capability(backend="b", name="now", input_schema={
        "type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]})
    question = 'Delete the "Guest" role, and tell me the time in Europe/Paris'
    derived = derive_arguments(create, question)
    assert derived[0] == {"roleName": "Guest"} and values_taken(create, derived) == 0
    assert values_taken(timezone, derive_arguments(timezone, question)) == 1
    # A parameter named like a thing's name but filled by another kind of value counts as that value.
    zone_name = Capability(backend="b", name="now", input_schema={"type": "object", "required": ["zone_name"],
                           "properties": {"zone_name": {"type": "string", "description": "IANA time zone"}}})
    taken = derive_arguments(zone_name, question)
    assert taken[0] == {"zone_name": "Europe/Paris"} and values_taken(zone_name, taken) == 1
    assert derived[1] == "extracted: roleName (as named)"  # which the routing metadata shows


def test_two_names_of_one_kind_leave_the_second_unused_and_none_is_no_name() -> None:
    describe = tool("describe_table", "table_name")
    assert derive_arguments(describe, "Show the schema of the users table")[0] == {"table_name": "users"}
    assert isinstance(derive_arguments(describe, "Describe the table"), ArgumentsRequired)
    from router.stages.arguments import derive_with_leftovers
    derived, left = derive_with_leftovers(describe, "Compare the users table with the orders table")
    assert derived[0] == {"table_name": "users"} and left == ["orders"]  # type: ignore[index]


def test_an_identifier_beside_its_kind_fills_the_parameter_for_that_kind_s_id() -> None:
    # The Slack server's `slack_get_user_profile(user_id)` was a 422 for "the profile of user U12345".
    profile = Capability(backend="slack", name="slack_get_user_profile", input_schema={
        "type": "object", "required": ["user_id"], "properties": {"user_id": {"type": "string"}}})
    assert derive_arguments(profile, "Show the profile of user U12345")[0] == {"user_id": "U12345"}
    assert derive_arguments(profile, "Show the user with id 42.")[0] == {"user_id": "42"}
    block = Capability(backend="notion", name="API-delete-a-block", input_schema={
        "type": "object", "required": ["blockId"], "properties": {"blockId": {"type": "string"}}})
    uuid = "59833787-2cf9-4fdf-8782-e53db20768a5"
    assert derive_arguments(block, f"Delete the block {uuid}.")[0] == {"blockId": uuid}
    # No identifier: a plain small number ("page 2"), a word, a channel's name, several of the kind.
    for question in ("Show the profile of user john", "Show the profile of users U1 and U2",
                     "Show the profile of the user 2"):
        assert isinstance(derive_arguments(profile, question), ArgumentsRequired), question
    page = Capability(backend="notion", name="get_page", input_schema={
        "type": "object", "required": ["page_id"], "properties": {"page_id": {"type": "string"}}})
    assert isinstance(derive_arguments(page, "Show the page 2026-11-28 notes"), ArgumentsRequired)  # a date
    assert derive_arguments(page, "Show page 2024-0042")[0] == {"page_id": "2024-0042"}  # no date
    assert kind_identified_by("request_id") is None and kind_identified_by("id") is None
    assert kind_identified_by("dataSourceId") == "data source"
    replies = Capability(backend="slack", name="slack_get_thread_replies", input_schema={
        "type": "object", "required": ["channel_id", "thread_ts"],
        "properties": {"channel_id": {"type": "string"}, "thread_ts": {"type": "string"}}})
    assert derive_arguments(replies, "Get the replies to thread 1712345678.000100 in channel C123")[0] == {
        "channel_id": "C123", "thread_ts": "1712345678.000100"}


@pytest.mark.parametrize(("parameter", "question", "text"), [
    ("message", "Commit my changes with message fix typo", "fix typo"),
    ("message", 'Commit with the message "fix typo" now', "fix typo"),
    ("commit_message", "Commit it with the commit message Update README.", "Update README"),
    ("title", "Open an issue titled 'Login fails'", "Login fails"),
    ("title", "Open an issue with title Login fails", "Login fails"),
    # Unquoted, nothing else may follow; a word for the text is no text; and `text` itself is no kind of it.
    ("message", "Commit with message fix typo and push", None), ("message", "Commit with the message below", None),
    ("message", "Send a message to Bob", None), ("text", "Reply with text hello", None),
])
def test_what_a_tool_writes_is_taken_after_the_word_for_it(parameter: str, question: str, text: str | None) -> None:
    from tests.unit.test_argument_values import derives

    derives(tool("write", parameter), question, text and {parameter: text})


@pytest.mark.parametrize(("question", "revision"), [
    ("Show me the last commit", "HEAD"),
    ("What did my most recent commit change?", "HEAD"),
    ("Show the previous commit", "HEAD~1"),
    ("Show HEAD~2", "HEAD~2"),
    ("Show commit 1a2b3c4", "1a2b3c4"),
    ("Show commit 1234567", None),  # digits alone are a number, not a hash
    ("Is deadbeef a word?", None),
    ("Show the last commits", None),  # several: how many is a log's to say
    ("What changed since the last commit?", None),  # a bound: the changes after it, not the commit itself
    ("Which files changed in the last commit?", "HEAD"),
])
def test_a_commit_is_named_as_git_names_it(question: str, revision: str | None) -> None:
    from router.stages.names import revision_in

    found = revision_in(question, "revision", lambda span: True)
    assert (found[1] if found else None) == revision
    assert revision_in(question, "branch_name", lambda span: True) is None  # only a parameter that takes a commit


@pytest.mark.parametrize(("parameter", "question", "value"), [
    # ToolAlpaca's APIs: each was a 422 asking for the value the question quotes beside the parameter's word.
    ("family", 'I am curious about fruits of the "Rosaceae" family.', "Rosaceae"),
    ("genus", "fruits that belong to the 'Citrus' genus", "Citrus"),
    ("tag", "a cat picture with the tag 'cute'. Could you", "cute"),
    ("userId", 'my access token is "abcd1234" and my user ID is "g-user123".', "g-user123"),
    ("accessToken", 'My access token is "abcd1234." Can you list the roles?', "abcd1234"),  # the full stop ends it
    # Several quoted for one parameter, a value not quoted, a quote away from the word: none.
    ("chart", 'Then add "Segmentation", "Churn Rate", and "Lifetime Value" charts.', None),
    ("tag", "a cat picture with the tag cute", None), ("family", 'Is "Rosaceae" a big plant family?', None),
])
def test_a_value_quoted_beside_the_parameter_s_own_words_fills_it(parameter: str, question: str,
                                                                   value: str | None) -> None:
    from tests.unit.helpers import derives

    derives(tool("find", parameter), question, value and {parameter: value})


@pytest.mark.parametrize(("question", "value"), [
    ("Report this address, 192.168.1.100, for spam", "192.168.1.100"), ("Is '123.45.67.89' abusive?", "123.45.67.89"),
    ("Check fe80::1 please", "fe80::1"), ("Check 999.1.1.1", None), ("Version 1.2.3.4.5 is out", None),
    ("The log at 12:30:45 shows it", None),
])
def test_an_ip_address_fills_a_parameter_for_one(question: str, value: str | None) -> None:
    from tests.unit.helpers import derives

    derives(tool("check_ip", "ip"), question, value and {"ip": value})
    described = tool("check", "target", description="The IP address to check")
    derives(described, question, value and {"target": value})


def test_an_integer_identifier_is_named_beside_its_kind_not_counted() -> None:
    # ToolAlpaca's AniAPI: "I am on episode 100" was sent as the anime's id.
    sync = Capability(backend="anime", name="synchronizeTracking", input_schema={
        "type": "object", "required": ["animeId"], "properties": {"animeId": {"type": "integer"}}})
    assert isinstance(derive_arguments(sync, 'Synchronize my progress on "Naruto": I am on episode 100.'),
                      ArgumentsRequired)
    assert isinstance(derive_arguments(sync, "Synchronize Attack on Titan: I watched up to episode 25"),
                      ArgumentsRequired)
    assert derive_arguments(sync, "Synchronize the anime with ID 5012")[0] == {"animeId": 5012}
    assert derive_arguments(sync, "Synchronize anime 5012")[0] == {"animeId": 5012}
