"""A second catalog nobody tuned for: servers in front of web APIs, as a team would run them together (GitHub,
Slack, Google Maps, Brave Search from the MCP project's npm packages; Notion's own), 85 tools, most of them with no
annotations, so each may change something. Asked plain requests; each names the tools that would do it (none:
nothing here does it rightly). The router's dry run says what it would call; nothing is called, so the servers run
with placeholder keys and no network. The operator says which tools only read (`read_only_tools`, `read_only`), as a
deployment of servers that annotate nothing would; `--as-they-come` leaves every such tool one that may act.

    npm install --prefix .state/api-servers @modelcontextprotocol/server-github@2025.4.8 \\
        @modelcontextprotocol/server-slack@2025.4.25 @modelcontextprotocol/server-google-maps@0.6.2 \\
        @modelcontextprotocol/server-brave-search@0.6.2 @notionhq/notion-mcp-server@2.5.2
    python benchmarks/api_servers.py [--servers .state/api-servers] [--json OUT] [--show]

A request answered by one of its tools is right, by another wrong; a refusal (404, 409, 422) is neither.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.official_servers import NODE, arguments, dry_runs, report
from router.settings import RouterSettings

UUID = "59833787-2cf9-4fdf-8782-e53db20768a5"
REPO = "octocat/hello-world"
REQUESTS: list[tuple[str, tuple[str, ...]]] = [
    ('Post "deploy finished" to the #general channel', ("slack_post_message",)),
    ("Send a message to channel C123 saying hello team", ("slack_post_message",)),
    ("Tell the team on Slack that the build is broken", ("slack_post_message",)),
    ("What was said in channel C123 recently?", ("slack_get_channel_history",)),
    ("Show the last 10 messages in C024BE91L", ("slack_get_channel_history",)),
    ("Show the history of channel C024BE91L", ("slack_get_channel_history",)),
    ("List the Slack channels", ("slack_list_channels",)), ("Who is in the workspace?", ("slack_get_users",)),
    ("Show the profile of user U12345", ("slack_get_user_profile",)),
    ("Who is user U023BECGF?", ("slack_get_user_profile",)),  # Notion's users are UUIDs
    ("React with a thumbs up to message 1712345678.000100 in C123", ("slack_add_reaction",)),
    ("Reply in thread 1712345678.000100 of C123 with thanks", ("slack_reply_to_thread",)),
    ("Get the replies to thread 1712345678.000100 in channel C123", ("slack_get_thread_replies",)),
    (f"Create an issue in {REPO} titled Login fails", ("create_issue",)),
    ("Open a bug report about the login page", ("create_issue",)),
    (f"List the open issues of {REPO}", ("list_issues",)), (f"Show issue 42 of {REPO}", ("get_issue",)),
    (f"Close issue 42 in {REPO}", ("update_issue",)),
    (f'Comment "fixed in main" on issue 42 of {REPO}', ("add_issue_comment",)),
    (f"Merge pull request 7 of {REPO}", ("merge_pull_request",)),
    (f"Show pull request 7 of {REPO}", ("get_pull_request",)),
    (f"What files does PR 7 of {REPO} change?", ("get_pull_request_files",)),
    (f"Are the checks passing on PR 7 in {REPO}?", ("get_pull_request_status",)),
    ("Approve pull request 7", ("create_pull_request_review",)),
    ("Create a repository called demo-app", ("create_repository",)), (f"Fork {REPO}", ("fork_repository",)),
    ("Find repositories about vector databases", ("search_repositories",)),
    ('Search GitHub code for "def main"', ("search_code",)), ("Find GitHub users named linus", ("search_users",)),
    (f"Show the README of {REPO}", ("get_file_contents",)),
    (f"Create a branch release-1.0 in {REPO}", ("create_branch",)),
    (f"Show the recent commits of {REPO}", ("list_commits",)),
    (f"Show the last 5 commits of {REPO}", ("list_commits",)),
    ("Push my changes to GitHub", ()), (f"Delete the repository {REPO}", ()),
    ("What is the address of the Eiffel Tower?", ("maps_geocode", "maps_search_places")),
    ("Geocode 1600 Amphitheatre Parkway, Mountain View", ("maps_geocode",)),
    ("What is at latitude 48.8584 longitude 2.2945?", ("maps_reverse_geocode",)),
    ("Reverse geocode 40.714224, -73.961452", ("maps_reverse_geocode",)),
    ("Find coffee shops near Times Square", ("maps_search_places", "brave_local_search")),
    ("How long does it take to drive from Boston to New York?", ("maps_distance_matrix", "maps_directions")),
    ("Directions from Paris to Lyon by train", ("maps_directions",)),
    ("Walking directions from the Louvre to Notre Dame", ("maps_directions",)),
    ("Distance from San Francisco to Los Angeles", ("maps_distance_matrix", "maps_directions")),
    ("What are the coordinates of 10 Downing Street, London?", ("maps_geocode",)),
    ("How high is Mount Everest?", ("maps_elevation", "brave_web_search")),
    ("Get the details of place ChIJN1t_tDeuEmsRUsoyG83frY4", ("maps_place_details",)),
    ("Search the web for the latest Python release", ("brave_web_search",)),
    ("Who won the world cup in 2022?", ("brave_web_search",)),
    ("Find pizza places in Chicago", ("brave_local_search", "maps_search_places")),
    ("Search Notion for the roadmap page", ("API-post-search",)),
    ("Create a Notion page called Meeting notes", ("API-post-page",)),
    (f"Show Notion page {UUID}", ("API-retrieve-a-page", "API-retrieve-page-markdown")),
    (f"Retrieve block {UUID}", ("API-retrieve-a-block",)), (f"Delete the block {UUID}", ("API-delete-a-block",)),
    (f"Show the comments on block {UUID}", ("API-retrieve-a-comment",)),
    (f"Archive page {UUID}", ("API-patch-page",)), (f"Update block {UUID}", ("API-update-a-block",)),
    (f"Show the database {UUID}", ("API-retrieve-a-database",)),
    (f"Query data source {UUID}", ("API-query-data-source",)),
    ("Who am I in Notion?", ("API-get-self",)), ("List the Notion users", ("API-get-users",)),
    ("Add a comment to the Notion page about the launch", ("API-create-a-comment",)),
    ("Book a table for two at 7pm", ()), ("Translate hello into French", ()),
    ("What is the weather in Paris?", ("brave_web_search",)),
]


# What an operator of these servers says of them: which tools only read (the servers annotate none).
READERS: dict[str, dict[str, Any]] = {
    "github": {"read_only_tools": ["get_*", "list_*", "search_*"]},
    "slack": {"read_only_tools": ["slack_get_*", "slack_list_*"]}, "maps": {"read_only": True},
    "search": {"read_only": True}}


def settings(servers: Path, readers: bool = True) -> RouterSettings:
    modules = servers / "node_modules"
    mcp = modules / "@modelcontextprotocol"

    def node(name: str, script: Path, *args: str, **env: str) -> dict:
        return {"name": name, "kind": "mcp_stdio", "command": "node", "args": [str(script), *args], "env": env,
                **(READERS.get(name, {}) if readers else {})}

    return RouterSettings.model_validate({"backends": [
        node("github", mcp / "server-github" / "dist" / "index.js", GITHUB_PERSONAL_ACCESS_TOKEN="placeholder"),
        node("slack", mcp / "server-slack" / "dist" / "index.js", SLACK_BOT_TOKEN="placeholder", SLACK_TEAM_ID="T0"),
        node("maps", mcp / "server-google-maps" / "dist" / "index.js", GOOGLE_MAPS_API_KEY="placeholder"),
        node("search", mcp / "server-brave-search" / "dist" / "index.js", BRAVE_API_KEY="placeholder"),
        node("notion", modules / "@notionhq" / "notion-mcp-server" / "bin" / "cli.mjs", NOTION_TOKEN="placeholder"),
        node("filesystem", NODE / "server-filesystem" / "dist" / "index.js", str(servers)),  # the bundled one
    ]})


def main() -> None:
    parser = arguments(__doc__, ".state/api-servers",
                       "no `read_only_tools`: every tool of the servers that annotate none may act")
    args = parser.parse_args()
    servers = Path(args.servers).resolve()
    if not (servers / "node_modules" / "@notionhq").is_dir():
        sys.exit(f"the servers are not installed under {servers}: run the npm install of this file's docstring")
    report(asyncio.run(dry_runs(settings(servers, not args.as_they_come), REQUESTS)), args.show, args.json)


if __name__ == "__main__":
    main()
