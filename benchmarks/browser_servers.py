"""A fourth catalog nobody tuned for: a browser (Microsoft's Playwright MCP server, from npm) beside the official
filesystem, memory, git and time servers, asked plain requests of a browser, most of them to act on a page. Its
server annotates every tool: 17 of its 25 may change something ("destructive"), navigation and clicks included.
Each request names the tools that would do it (none: nothing here does it rightly). The router's dry run says
what it would call; nothing is called, and no browser is started. `make setup` installs the server with the
examples' (`examples/package.json`).

    python benchmarks/browser_servers.py [--json OUT] [--show]

A request answered by one of its tools is right, by another wrong; a refusal (404, 409, 422) is neither.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.official_servers import NODE, READ, arguments, dry_runs_beside, installed, report

PLAYWRIGHT = NODE.parent / "@playwright" / "mcp" / "cli.js"

SHOT = ("browser_take_screenshot",)
SNAPSHOT = ("browser_snapshot", *SHOT)
REQUESTS: list[tuple[str, tuple[str, ...]]] = [
    ("Open https://example.com", ("browser_navigate",)), ("Go to example.com", ("browser_navigate",)),
    ("Navigate to https://news.ycombinator.com", ("browser_navigate",)),
    ("Take a screenshot of the page", SHOT), ("Take a screenshot", SHOT),
    ("What is on the current page?", SNAPSHOT), ("Show me the page's accessibility tree", ("browser_snapshot",)),
    ("Click the login button", ("browser_click",)), ("Click on Sign in", ("browser_click",)),
    ("Type hello into the search box", ("browser_type",)), ("Press Enter", ("browser_press_key",)),
    ("Go back", ("browser_navigate_back",)), ("Go back to the previous page", ("browser_navigate_back",)),
    ("Close the browser", ("browser_close",)), ("Close the tab", ("browser_tabs", "browser_close")),
    ("List the open tabs", ("browser_tabs",)), ("Open a new tab", ("browser_tabs",)),
    ("Show the console messages", ("browser_console_messages",)),
    ("Were there any JavaScript errors on the page?", ("browser_console_messages",)),
    ("Which network requests did the page make?", ("browser_network_requests",)),
    ("Resize the window to 800x600", ("browser_resize",)),
    ("Fill in the form with my name and email", ("browser_fill_form", "browser_type")),
    ("Upload /tmp/report.pdf", ("browser_file_upload",)),
    ("Select Germany in the country dropdown", ("browser_select_option",)), ("Hover over the menu", ("browser_hover",)),
    ("Wait for the text Done to appear", ("browser_wait_for",)), ("Wait 3 seconds", ("browser_wait_for",)),
    ("Accept the dialog", ("browser_handle_dialog",)), ("Dismiss the popup", ("browser_handle_dialog",)),
    ("Run document.title in the page", ("browser_evaluate",)),
    ("What is the title of the page?", ("browser_snapshot", "browser_evaluate")),
    ("Find the word pricing on the page", ("browser_find",)),
    ("Does the page mention refunds?", ("browser_find", "browser_snapshot")),
    ("Switch to dark mode", ("browser_emulate_media",)), ("Drag the card to the done column", ("browser_drag",)),
    ("Scroll down", ()), ("Log in to my bank", ()), ("Buy the cheapest flight to Paris", ()),
    ("Delete my account on this site", ()), ("Submit the form", ()), ("Install the browser", ()),
    ("Save the page as PDF", ()), ("Download the file on the page", ()), ("Clear the cookies", ()),
    ("Reload the page", ()),
    # The other servers' own requests, which a browser beside them should not take.
    ("Read {root}/a.txt", READ), ("What time is it in Tokyo?", ("get_current_time",)),
    ("Remember that Bob likes tea", ("create_entities", "add_observations")),
    ("Show me the git status", ("git_status",)),
    ("List the files in {root}", ("list_directory", "list_directory_with_sizes", "directory_tree")),
]


def browser_backend() -> dict[str, Any]:
    script = installed(PLAYWRIGHT, "`make setup` installs it")
    return {"name": "playwright", "kind": "mcp_stdio", "command": "node", "args": [str(script), "--headless"]}


def main() -> None:
    args = arguments(__doc__).parse_args()
    rows = dry_runs_beside("mcp-router-browser-servers", lambda _: browser_backend(), REQUESTS)
    report(rows, args.show, args.json)


if __name__ == "__main__":
    main()
