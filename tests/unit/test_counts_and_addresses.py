"""Numbers that count things and e-mail addresses, as tools take them: a count ("the last 20 lines") is no
process id nor page number, where output starts is said in words ("excluding the first 10"), and an address goes to
the parameter that is one. Each was a wrong value sent to a tool, or a right one refused."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments, derive_with_leftovers
from router.values import Capability
from tests.unit.test_arguments import tool

# As Desktop Commander lists it: a process named by its number.
READ_OUTPUT = Capability(backend="desktop", name="read_process_output", read_only=True, input_schema={
    "type": "object", "required": ["pid"], "properties": {"pid": {"type": "number"}, "length": {"type": "number"}}})


@pytest.mark.parametrize(("question", "pid"), [
    ("Show the last 20 lines of /srv/notes.txt", None),  # it counts lines: no process is numbered 20
    ("Show the output of the 3 processes", None),
    ("Show the output of process 4242", 4242), ("Read 20 lines of output from process 4242", 4242),
    ("Show the output of 4242", 4242),
])
def test_a_number_that_counts_things_names_no_one_thing(question: str, pid: int | None) -> None:
    derived = derive_arguments(READ_OUTPUT, question)
    assert (derived[0]["pid"] if isinstance(derived, tuple) else None) == pid


# As @modelcontextprotocol/server-github lists it: a page number and a page size, both optional.
LIST_COMMITS = Capability(backend="github", name="list_commits", read_only=True, input_schema={
    "type": "object", "required": ["owner", "repo"], "properties": {
        "owner": {"type": "string"}, "repo": {"type": "string"}, "sha": {"type": "string"},
        "page": {"type": "number"}, "perPage": {"type": "number"}}})


@pytest.mark.parametrize(("question", "numbers", "left"), [
    ("Show the last 5 commits of octocat/hello-world", {"perPage": 5}, []),  # a count, not page 5
    ("Show page 2 of the commits of octocat/hello-world", {"page": 2}, []),
    ("Show 5 commits per page of octocat/hello-world", {"perPage": 5}, []),
])
def test_a_number_that_counts_things_is_no_page_number(question: str, numbers: dict[str, int], left: list) -> None:
    (args, _), unused = derive_with_leftovers(LIST_COMMITS, question)
    assert {k: v for k, v in args.items() if k in ("page", "perPage")} == numbers and unused == left


def test_a_count_no_parameter_takes_is_left_unused_not_taken_for_a_page() -> None:
    paged = Capability(backend="github", name="list_commits", read_only=True, input_schema={
        "type": "object", "required": ["owner", "repo"], "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"}, "page": {"type": "number"}}})
    (args, _), unused = derive_with_leftovers(paged, "Show the last 5 commits of octocat/hello-world")
    assert "page" not in args and unused == [5]


# As ToolAlpaca's Discord API lists it.
MEMBERS = Capability(backend="discord", name="listServerMembers", read_only=True, input_schema={
    "type": "object", "required": ["serverId"], "properties": {
        "serverId": {"type": "string", "description": "Required. string. Discord server ID."},
        "limit": {"type": "integer", "description": "integer. The maximum number of members to return."},
        "offset": {"type": "integer", "description": "integer. The number of members to skip before starting."}}})


def test_how_many_and_where_to_start_each_go_where_their_words_say() -> None:
    question = 'List the first 50 members of server "135792468", excluding the first 10'
    assert derive_with_leftovers(MEMBERS, question)[0][0] == {"serverId": "135792468", "limit": 50, "offset": 10}
    # A number neither is said to take is left unused, once.
    question = 'List the first 50 members of server "135792468", not the first 10'
    (args, _), unused = derive_with_leftovers(MEMBERS, question)
    assert args == {"serverId": "135792468", "limit": 50} and unused == [10]


# As ToolAlpaca's Auth0 API lists it.
VERIFY = Capability(backend="auth0", name="verifyPasswordlessAuthentication", input_schema={
    "type": "object", "required": ["provider", "identifier", "verificationCode"], "properties": {
        "provider": {"type": "string", "description": "Required. string. The provider used. One of: [sms, email]."},
        "identifier": {"type": "string", "description": "Required. string. The user's phone number or email address, "
                                                        "depending on the chosen provider."},
        "verificationCode": {"type": "string", "description": "Required. string. The verification code sent to the "
                                                              "user's phone number or email address."}}})


def test_an_email_address_goes_to_the_parameter_that_is_one() -> None:
    question = 'My email is john.doe@gmail.com and I received the verification code "456789"; verify me by email'
    assert derive_arguments(VERIFY, question)[0] == {
        "provider": "email", "identifier": "john.doe@gmail.com", "verificationCode": "456789"}
    # Of two addresses, which one is meant is the caller's to say; a code sent to an address is no address.
    two = 'Verify a@example.com or b@example.com by email with the verification code "1"'
    assert isinstance(derive_arguments(VERIFY, two), ArgumentsRequired)
    profile = tool("get_profile", {"type": "object", "required": ["userEmail"],
                                   "properties": {"userEmail": {"type": "string"}}})
    assert derive_arguments(profile, "Show the profile of jane@example.org")[0] == {"userEmail": "jane@example.org"}
