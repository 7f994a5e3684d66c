"""Values in the shape a schema gives them: a word matching a parameter's `pattern` (a Jira issue key), or the shape of
the examples its description gives; a search for a name that the question whole is not. Schemas as mcp-atlassian
(PyPI) lists them; each case was a refusal or a wrong call on that server beside the official ones."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments
from router.stages.settle import values_taken
from router.stages.written import example_pattern, patterned_in
from router.values import Capability

ISSUE_KEY = {"type": "string", "description": "Jira issue key (e.g., 'PROJ-123', 'ACV2-642')",
             "pattern": r"^[A-Z][A-Z0-9_]+-\d+(?:-\d+)*$"}
PROJECT_KEY = {"type": "string", "description": "The JIRA project key (e.g. 'PROJ', 'DEV', 'ACV2')",
               "pattern": r"^[A-Z][A-Z0-9_]+$"}


def _tool(tool: str, required: list[str], read_only: bool = True, **properties: dict) -> Capability:
    return Capability(backend="atlassian", name=tool, read_only=read_only,
                      input_schema={"type": "object", "required": required, "properties": properties})


@pytest.mark.parametrize(("question", "issue"), [
    ("What is the status of PROJ-123?", "PROJ-123"),  # a 422 before: no "issue" written beside it
    ("Show me issue ACV2-642.", "ACV2-642"),
    ("Show me issue proj-123", None),  # not in the pattern
    ("Show me the issue", None),
])
def test_a_word_in_a_parameter_s_pattern_fills_it(question: str, issue: str | None) -> None:
    derived = derive_arguments(_tool("jira_get_issue", ["issue_key"], issue_key=ISSUE_KEY), question)
    assert (derived[0]["issue_key"] if isinstance(derived, tuple) else None) == issue


def test_two_words_in_one_pattern_go_to_the_parameter_named_beside_each_then_in_order() -> None:
    link = _tool("jira_link_to_epic", ["issue_key", "epic_key"], read_only=False, issue_key=ISSUE_KEY,
                 epic_key={**ISSUE_KEY, "description": "The key of the epic to link to (e.g., 'PROJ-456')"})
    assert derive_arguments(link, "Link PROJ-123 to epic PROJ-100")[0] == {"issue_key": "PROJ-123",
                                                                          "epic_key": "PROJ-100"}
    assert derive_arguments(link, "Put epic PROJ-100 over PROJ-123")[0] == {"issue_key": "PROJ-123",
                                                                           "epic_key": "PROJ-100"}


@pytest.mark.parametrize(("question", "project"), [
    ("List the versions of project PROJ", "PROJ"),
    ("List the versions of PROJ", None),  # capitals alone, away from the word: "USD" and "PDF" fit as well
    ("List the USD versions of project PROJ", "PROJ"),
])
def test_a_word_of_capitals_alone_fills_a_key_only_beside_its_kind(question: str, project: str | None) -> None:
    derived = derive_arguments(_tool("jira_get_project_versions", ["project_key"], project_key=PROJECT_KEY), question)
    assert (derived[0]["project_key"] if isinstance(derived, tuple) else None) == project


@pytest.mark.parametrize(("pattern", "found"), [
    (r"^[A-Za-z0-9_-]+$", None), (r"^\d+$", None), (r".*", None), ("[unclosed", None),  # any word fits, or unread
    (r"^\d{4}-\d{2}-\d{2}$", "2026-11-29"),
])
def test_a_pattern_any_word_fits_says_nothing_of_a_value(pattern: str, found: str | None) -> None:
    hit = patterned_in("Show the 2026-11-29 report of 123", "value", pattern, lambda span: True)
    assert (hit[1] if hit else None) == found


@pytest.mark.parametrize(("description", "pattern"), [
    ("Jira issue key (e.g., 'PROJ-123', 'ACV2-642')", r"^(?:[A-Z][A-Z0-9_]*\-\d+)$"),
    ("Identifier (e.g. 'johndoe')", None), ("The id of board (e.g., '1000')", None),  # any word, or digits alone
    ("Sprint state (e.g., 'active', 'future')", None), ("The page to read", None),
])
def test_examples_in_a_description_give_their_shape(description: str, pattern: str | None) -> None:
    assert example_pattern(description) == pattern


def test_an_issue_key_says_which_issue_not_which_tool() -> None:
    # "What is the status of PROJ-123?" went to the transitions' reader: of the close tools it alone took the key.
    transitions = _tool("jira_get_transitions", ["issue_key"], issue_key=ISSUE_KEY)
    derived = derive_arguments(transitions, "What is the status of PROJ-123?")
    assert derived[0] == {"issue_key": "PROJ-123"} and values_taken(transitions, derived) == 0


def test_a_search_for_a_name_is_not_given_the_question_whole() -> None:
    # "List all Jira projects" searched the projects for a project named "List all Jira projects".
    search = _tool("jira_search_projects", ["query"], query={"type": "string",
                                                             "description": "Name or key prefix to search for"})
    refused = derive_arguments(search, "List all Jira projects")
    assert isinstance(refused, ArgumentsRequired) and refused.details["missing"] == "query"
    assert derive_arguments(search, "Search projects for Apollo")[0] == {"query": "Apollo"}
