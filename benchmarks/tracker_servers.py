"""An eighth catalog nobody tuned for: an issue tracker and a wiki (mcp-atlassian, from PyPI: Jira and Confluence)
beside the official filesystem, memory, git and time servers, asked plain requests of a team's tracker. Its server
annotates every tool, and 98 tools is a large server: most read issues, projects, boards and pages; the rest create,
transition, assign, link and delete issues, log work, and create, move, label and delete pages. Its requests name
issues by their keys ("PROJ-123"), projects and spaces by theirs, pages by their IDs. Each request names the tools that
would do it (none: nothing here does it rightly) and the values the call must carry: a call of the right tool for
another issue, or for none, is wrong. The router's dry run says what it would call; nothing is called, and the server
is given a site that does not exist (it lists its tools without reaching it).

    python -m venv .state/tracker-servers
    .state/tracker-servers/bin/pip install mcp-atlassian==0.23.1
    python benchmarks/tracker_servers.py [--servers .state/tracker-servers] [--json OUT] [--show]

A request answered by one of its tools, with its values, is right, otherwise wrong; a refusal (404, 409, 422) is
neither.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.official_servers import READ, installed
from benchmarks.payment_servers import Request, run

ISSUE, PROJECT, PAGE = {"issue_key": "PROJ-123"}, {"project_key": "PROJ"}, {"page_id": "123456"}
REQUESTS: list[Request] = [
    ("Show me issue PROJ-123", ("jira_get_issue",), ISSUE),
    ("What is the status of PROJ-123?", ("jira_get_issue",), ISSUE),
    ("Who is assigned to PROJ-42?", ("jira_get_issue",), {"issue_key": "PROJ-42"}),
    ("List my open Jira issues", ("jira_search",), {}), ("Find bugs in project PROJ", ("jira_search",), {}),
    ("What transitions are available for PROJ-123?", ("jira_get_transitions",), ISSUE),
    ("How much time was logged on PROJ-123?", ("jira_get_worklog",), ISSUE),
    ("List all Jira projects", ("jira_get_all_projects",), {}),
    ("What issue types does project PROJ have?", ("jira_get_project_issue_types",), PROJECT),
    ("List the versions of project PROJ", ("jira_get_project_versions",), PROJECT),
    ("Show the components of project PROJ", ("jira_get_project_components",), PROJECT),
    ("List the agile boards", ("jira_get_agile_boards",), {}),
    ("Show the sprints of board 1000", ("jira_get_sprints_from_board",), {"board_id": "1000"}),
    ("Show the profile of user jane@example.com", ("jira_get_user_profile",), {"user_identifier": "jane@example.com"}),
    ("Which pull requests are linked to PROJ-123?", ("jira_get_issue_development_info",), ISSUE),
    ("Search Confluence for onboarding", ("confluence_search",), {}),
    ("Show Confluence page 123456", ("confluence_get_page",), PAGE),
    ("List the child pages of page 123456", ("confluence_get_page_children",), {"parent_id": "123456"}),
    ("Show the comments on page 123456", ("confluence_get_comments",), PAGE),
    ("What labels does page 123456 have?", ("confluence_get_labels",), PAGE),
    ("Show the attachments of page 123456", ("confluence_get_attachments",), {"content_id": "123456"}),
    ("Show the page tree of space DEV", ("confluence_get_space_page_tree",), {"space_key": "DEV"}),
    ("Who can edit page 123456?", ("confluence_get_page_restrictions",), PAGE),
    ("Create a bug in project PROJ titled Login fails", ("jira_create_issue",),
     {"project_key": "PROJ", "summary": "Login fails", "issue_type": "Bug"}),
    ("Comment 'Fixed in 2.1' on PROJ-123", ("jira_add_comment",), {**ISSUE, "body": "Fixed in 2.1"}),
    ("Delete issue PROJ-123", ("jira_delete_issue",), ISSUE),
    ("Log 2h on PROJ-123", ("jira_add_worklog",), {**ISSUE, "time_spent": "2h"}),
    ("Link PROJ-123 to epic PROJ-100", ("jira_link_to_epic",), {**ISSUE, "epic_key": "PROJ-100"}),
    ("Move PROJ-123 to Done", ("jira_transition_issue",), ISSUE),
    ("Assign PROJ-123 to jane@example.com", ("jira_update_issue", "jira_assign_issue"), ISSUE),
    ("Create a sprint called Sprint 5 on board 1000", ("jira_create_sprint",),
     {"board_id": "1000", "name": "Sprint 5"}),
    ("Delete Confluence page 123456", ("confluence_delete_page",), PAGE),
    ("Add the label urgent to page 123456", ("confluence_add_label",), {**PAGE, "name": "urgent"}),
    ("Create a Confluence page titled Release Notes in space DEV", ("confluence_create_page",),
     {"space_key": "DEV", "title": "Release Notes"}),
    ("Delete all issues", (), {}), ("Close everything", (), {}), ("Delete it", (), {}), ("Email the team", (), {}),
    # The other servers' own requests, which a tracker beside them should not take.
    ("Read {root}/notes.txt", READ, {}), ("Show me the git status", ("git_status",), {}),
    ("What time is it in Tokyo?", ("get_current_time",), {"timezone": "Asia/Tokyo"}),
]
SITE = "https://tracker.invalid"  # no such site: the server lists its tools without reaching one


def tracker_backend(servers: Path) -> dict[str, Any]:
    command = installed(servers / "bin" / "mcp-atlassian")
    env = {"JIRA_URL": SITE, "JIRA_USERNAME": "me@example.com", "JIRA_API_TOKEN": "none",
           "CONFLUENCE_URL": f"{SITE}/wiki", "CONFLUENCE_USERNAME": "me@example.com", "CONFLUENCE_API_TOKEN": "none"}
    return {"name": "atlassian", "kind": "mcp_stdio", "command": str(command), "args": [], "env": env}


def main() -> None:
    run(__doc__, ".state/tracker-servers", "mcp-router-eighth-catalog",
        lambda servers, _: tracker_backend(servers), REQUESTS)


if __name__ == "__main__":
    main()
