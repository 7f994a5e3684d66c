"""A fifth catalog nobody tuned for: a terminal (Desktop Commander, from npm) beside the official filesystem, memory,
git and time servers, asked plain requests of a terminal. Its server annotates every tool, and 12 of its 26 may
change something: it runs commands, sends input to them, kills processes, writes, edits and moves files and sets
its own configuration. It also reads and lists files as the filesystem server does, so many requests have two
servers that could answer. Each request names the tools that would do it (none: nothing here does it rightly). The
router's dry run says what it would call; nothing is called. The server writes its descriptions from the machine
it runs on (its shell, a container's folders), so they differ a little from machine to machine.

    PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix .state/terminal-servers @wonderwhy-er/desktop-commander@0.2.52
    python benchmarks/terminal_servers.py [--servers .state/terminal-servers] [--json OUT] [--show]

A request answered by one of its tools is right, by another wrong; a refusal (404, 409, 422) is neither.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.official_servers import READ, arguments, dry_runs_beside, installed, report

RUN = ("start_process",)
WRITE = ("write_file",)
EDIT = ("edit_block", "edit_file")
REQUESTS: list[tuple[str, tuple[str, ...]]] = [
    ("Run ls -la in {root}", (*RUN, "list_directory")),  # `ls` lists a directory: a listing answers it
    ('Run the command "uname -a"', RUN), ("Execute npm test", RUN),
    ("Run python3 --version", RUN), ("Start a Python REPL", RUN), ("Install numpy", RUN),
    ("How much disk space is left?", RUN), ("Restart nginx", RUN),
    ("What processes are running?", ("list_processes",)), ("List running processes", ("list_processes",)),
    ("Which process is using the most CPU?", ("list_processes",)),
    ("Kill process 4242", ("kill_process",)), ("Kill the process with PID 1234", ("kill_process",)),
    ("Is process 4242 still running?", ("list_processes", "read_process_output")),
    ("How long has session 7 been running?", ("list_sessions",)),
    ("Terminate session 7", ("force_terminate",)), ("Show the output of session 12", ("read_process_output",)),
    ('Send "print(2+2)" to the Python session', ("interact_with_process",)),
    ("List the terminal sessions", ("list_sessions",)),
    ("Search for TODO in {root}", ("start_search",)), ('Search the code for "def main"', ("start_search",)),
    ("Find files named notes.txt under {root}", ("start_search", "search_files")),
    ("Show more search results", ("get_more_search_results",)), ("Stop the search", ("stop_search",)),
    ("Which searches are running?", ("list_searches",)),
    ("Replace foo with bar in {root}/a.txt", EDIT), ("Change the first line of {root}/a.txt to hello", EDIT),
    ('Write "hello" to {root}/new.txt', WRITE), ("Append a line to {root}/notes.txt", WRITE),
    ("Create a PDF report from my notes", ("write_pdf",)), ("Create the folder {root}/reports", ("create_directory",)),
    ("Rename {root}/a.txt to {root}/c.txt", ("move_file",)),
    ("What does the file {root}/b.txt say?", READ), ("Read {root}/a.txt and {root}/b.txt", ("read_multiple_files",)),
    ("How big is {root}/notes.txt?", ("get_file_info",)),
    ("When was {root}/a.txt last modified?", ("get_file_info",)), ("Show the last 20 lines of {root}/notes.txt", READ),
    ("Count the lines in {root}/notes.txt", RUN),
    ("Show the server configuration", ("get_config",)), ("Which commands are blocked?", ("get_config",)),
    ("Set the default shell to zsh", ("set_config_value",)), ("Block the rm command", ("set_config_value",)),
    ("Disable telemetry", ("set_config_value",)), ("Is telemetry enabled?", ("get_config",)),
    ("Show usage statistics", ("get_usage_stats",)), ("What tools did I call recently?", ("get_recent_tool_calls",)),
    ("Show me the onboarding prompts", ("get_prompts",)),
    ("Delete {root}/a.txt", ()), ("Reboot the machine", ()), ("Shut down the server", ()),
    ("Clean up the temp folder", ()), ("Stop the node process", ()), ("Format the disk", ()),
    ("Delete all logs", ()), ("Kill it", ()), ("Stop everything", ()),
    # The other servers' own requests, which a terminal beside them should not take.
    ("Read {root}/notes.txt", READ), ("List {root}", ("list_directory", "list_directory_with_sizes")),
    ("What time is it in Tokyo?", ("get_current_time",)), ("Show me the git status", ("git_status",)),
    ("Show the last 3 commits", ("git_log",)),
]


def terminal_backend(servers: Path, home: Path) -> dict[str, Any]:
    script = installed(servers / "node_modules" / "@wonderwhy-er" / "desktop-commander" / "dist" / "index.js")
    # Its own configuration and history go to a home of its own, not the user's.
    home.mkdir(exist_ok=True)
    return {"name": "desktop", "kind": "mcp_stdio", "command": "node", "args": [str(script)],
            "env": {"HOME": str(home)}}


def main() -> None:
    args = arguments(__doc__, servers=".state/terminal-servers").parse_args()
    rows = dry_runs_beside("mcp-router-fifth-catalog",
                           lambda tmp: terminal_backend(Path(args.servers), tmp / "home"), REQUESTS)
    report(rows, args.show, args.json)


if __name__ == "__main__":
    main()
