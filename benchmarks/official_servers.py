"""A catalog nobody tuned for: the official filesystem and memory servers (npm), git and time servers (PyPI),
asked plain requests, most of them to change something. Each request names the tools that would do it (none:
nothing in this catalog does it rightly); the router's dry run says what it would call, nothing is called.

    python benchmarks/official_servers.py [--json OUT] [--show] [--no-fixed-arguments]

A request answered by one of its tools is right, by another wrong; a refusal (404, 409, 422) is neither. The git
server works on a repository fixed by the operator (`fixed_arguments`), as a deployment would run it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.example_questions import connected_router
from router.models import RouteRequest
from router.request import Request
from router.settings import RouterSettings

NODE = Path(__file__).resolve().parents[1] / "examples" / "node_modules" / "@modelcontextprotocol"
READ = ("read_file", "read_text_file")
LIST = ("list_directory", "list_directory_with_sizes", "directory_tree")
# (request, the tools that would do it); {root} is the served folder, {repo} the repository.
REQUESTS: list[tuple[str, tuple[str, ...]]] = [
    ("Show me the git status", ("git_status",)),
    ("What changed since the last commit?", ("git_status", "git_diff_unstaged", "git_diff_staged", "git_diff")),
    ("Show the unstaged changes", ("git_diff_unstaged",)), ("Show the staged diff", ("git_diff_staged",)),
    ("Show the last 5 commits", ("git_log",)), ("Show the git log of {repo}", ("git_log",)),
    ("Show me the git status of {repo}", ("git_status",)), ("Commit my changes with message fix typo", ("git_commit",)),
    ("Commit all changes in {repo}", ("git_commit",)), ("Stage notes.txt", ("git_add",)),
    ("Unstage everything", ("git_reset",)), ("Switch to the main branch", ("git_checkout",)),
    ("Create a branch called feature-x", ("git_create_branch",)), ("Undo my last commit", ()),
    ("Discard my local changes", ()), ("Delete the branch feature-x", ()), ("Merge feature-x into main", ()),
    ("Push my commits to origin", ()), ("Revert the last commit", ()), ("Tag this commit as v1.0", ()),
    ("Stash my changes", ()), ("Checkout the file notes.txt from HEAD", ()),
    ("Reset the repository to the previous commit", ()), ("Initialize a new git repository", ()),
    ("Clone the repository from github", ()), ("Which files changed in the last commit?", ("git_show", "git_log")),
    ("Read {root}/a.txt", READ), ("What is in {root}/notes.txt?", READ), ("Show me the contents of notes.txt", READ),
    ("List the files in {root}", LIST), ("What files are in {root}?", LIST), ("Print the tree of {root}", LIST),
    ("How big is {root}/a.txt?", ("get_file_info", "list_directory_with_sizes")),
    ("Get info about {root}/a.txt", ("get_file_info",)),
    ("Show the size and modification date of {root}/b.txt", ("get_file_info",)),
    ("Show the first 2 lines of {root}/notes.txt", READ), ("Find all markdown files", ("search_files",)),
    ("What is the biggest file in {root}?", ("list_directory_with_sizes",)),
    ("Search {root} for markdown files", ("search_files",)),
    ("Find the files named *.txt in {root}", ("search_files",)),
    ("Is there a file called notes.txt?", ("search_files", "get_file_info", *LIST)),
    ("Compare {root}/a.txt and {root}/b.txt", ("read_multiple_files",)),
    ("Write hello world to {root}/a.txt", ("write_file",)), ("Append a line to {root}/a.txt", ("edit_file",)),
    ("Replace foo with bar in {root}/a.txt", ("edit_file",)), ("Empty the file {root}/a.txt", ("write_file",)),
    ("Make a new file with my shopping list", ("write_file",)),
    ("Create a folder called reports", ("create_directory",)),
    ("Create the directory {root}/reports", ("create_directory",)), ("Rename notes.txt to todo.txt", ("move_file",)),
    ("Move {root}/a.txt to {root}/b.txt", ("move_file",)), ("Rename {root}/a.txt to {root}/c.txt", ("move_file",)),
    ("Move all logs into the archive folder", ("move_file",)), ("Delete notes.txt", ()), ("Delete {root}/a.txt", ()),
    ("Remove the folder {root}/old", ()), ("Copy notes.txt to backup.txt", ()),
    ("Copy {root}/a.txt to {root}/b.txt", ()),
    ("Make {root}/a.txt read-only", ()), ("Back up {root}/a.txt to {root}/a.bak", ()),
    ("Restore {root}/a.txt from {root}/a.bak", ()), ("Clean up the temp directory", ()), ("Zip the reports folder", ()),
    ("Save this note: buy milk", ("create_entities", "add_observations", "write_file")),
    ("Remember that Bob likes tea", ("create_entities", "add_observations")),
    ("Forget that Bob likes tea", ("delete_observations",)),
    ("Bob no longer works at Acme", ("delete_relations", "delete_observations")),
    ("Alice is Bob's sister", ("create_relations", "create_entities")),
    ("Delete Bob from memory", ("delete_entities",)),
    ("What do you know about Bob?", ("search_nodes", "open_nodes", "read_graph")),
    ("Update Bob's email to bob@example.com", ("add_observations",)),
    ("What time is it in Tokyo?", ("get_current_time",)),
    ("Convert 3pm New York time to London time", ("convert_time",)),
    ("What was the time in Tokyo yesterday at noon?", ()), ("What time will it be in Tokyo in 3 hours?", ()),
    ("What time does the sun set in Paris?", ()), ("What time is it in Paris?", ("get_current_time",)),
    ("Change the time zone to Europe/Paris", ()), ("Set my time zone to Tokyo", ()),
    ("What time is it?", ("get_current_time",)), ("What time is it in Springfield?", ()),
    ("When it's noon in Sydney, what time is it in London?", ("convert_time",)), ("Stage {root}/a.txt", ("git_add",)),
    ("Schedule a meeting at 3pm tomorrow", ()), ("Cancel my 3pm meeting", ()),
]


def settings(root: Path, repo: Path, memory: Path, fixed: bool = True) -> RouterSettings:
    git = Path(sys.executable).parent / "mcp-server-git"
    return RouterSettings.model_validate({"backends": [
        {"name": "filesystem", "kind": "mcp_stdio", "command": "node",
         "args": [str(NODE / "server-filesystem" / "dist" / "index.js"), str(root)]},
        {"name": "memory", "kind": "mcp_stdio", "command": "node",
         "args": [str(NODE / "server-memory" / "dist" / "index.js")], "env": {"MEMORY_FILE_PATH": str(memory)}},
        {"name": "git", "kind": "mcp_stdio", "command": str(git), "args": ["--repository", str(repo)],
         **({"fixed_arguments": {"repo_path": str(repo)}} if fixed else {})},
        {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time"}]})


def _world(tmp: Path) -> tuple[Path, Path]:
    root, repo = tmp / "files", tmp / "repo"
    root.mkdir()
    for name, text in (("a.txt", "foo\n"), ("b.txt", "bar\n"), ("notes.txt", "buy milk\n")):
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("draft\n")
    subprocess.run(["git", "-C", str(repo), "add", "notes.txt"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-q",
                    "-m", "first"], check=True)
    return root, repo


async def dry_runs(settings: RouterSettings, requests: list[tuple[str, tuple[str, ...]]],
                   **values: Path) -> list[dict[str, Any]]:
    """What the router's dry run would call for each request (its `{name}`s filled from `values`): right (one of
    the request's tools), wrong (another) or refused (the status)."""
    rows = []
    async with connected_router(settings) as router:
        for template, tools in requests:
            question = template.format(**values)
            shown = await router.route(Request.dry_run(RouteRequest(question=question)))
            called = shown.calls[0].split("/", 1)[1] if shown.calls else None
            outcome = f"refused ({shown.status})" if called is None else "right" if called in tools else "wrong"
            first = shown.candidates[0].scores if called and shown.candidates else None
            rows.append({"request": template, "tools": list(tools), "outcome": outcome, "called": called,
                         "arguments": shown.arguments, "message": shown.message[:160],
                         "confidence": first and round(first.confidence, 3),
                         "tool_confidence": first and round(first.tool_confidence, 3)})
    return rows


async def run(fixed: bool = True) -> list[dict[str, Any]]:
    # One folder name on every run: a question's words, its paths too, move its ranking.
    tmp = Path(tempfile.gettempdir()) / "mcp-router-official-servers"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        root, repo = _world(tmp)
        return await dry_runs(settings(root, repo, tmp / "memory.jsonl", fixed), REQUESTS, root=root, repo=repo)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def installed(path: Path, how: str = "install it as this script's docstring says") -> Path:
    """`path`, the installed server a benchmark runs, or the exit that says how to install it."""
    if not path.is_file():
        raise SystemExit(f"{path} is missing: {how}")
    return path


def dry_runs_beside(folder: str, backend: Callable[[Path], dict[str, Any]],
                    requests: list[tuple[str, tuple[str, ...]]]) -> list[dict[str, Any]]:
    """`dry_runs` of `requests` on the official servers and the backend `backend` configures beside them (given the
    scratch folder), in a fresh `folder` of the system's temporary directory, removed after."""
    tmp = Path(tempfile.gettempdir()) / folder
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        root, repo = _world(tmp)
        base = settings(root, repo, tmp / "memory.jsonl").model_dump()
        config = RouterSettings.model_validate({**base, "backends": [*base["backends"], backend(tmp)]})
        return asyncio.run(dry_runs(config, requests, root=root, repo=repo))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(rows: list[dict[str, Any]], show: bool, out: str | None) -> None:
    """Print the outcomes' counts (with `show`, every request first) and the wrong answers; write them to `out`."""
    if show:
        for r in rows:
            print(f"{r['outcome']:14} {r['called'] or '-':30} {r['request']}")
    counts = Counter(r["outcome"] for r in rows)
    doable = sum(1 for r in rows if r["tools"])
    print(f"\n{'outcome':16}{'requests':>9}")
    for outcome in sorted(counts):
        print(f"{outcome:16}{counts[outcome]:>9}")
    print(f"{'all':16}{len(rows):>9}   ({doable} that a tool here does)")
    for r in rows:
        if r["outcome"] == "wrong":
            print(f"wrong: {r['request']!r} -> {r['called']} (would be {', '.join(r['tools']) or 'none'})")
    if out:
        Path(out).write_text(json.dumps({"counts": dict(counts), "requests": rows}, indent=2, default=str))


def arguments(doc: str, servers: str | None = None, as_they_come: str | None = None) -> argparse.ArgumentParser:
    """The options every catalog benchmark takes: `--json`, `--show`, and where its servers are installed and what
    `--as-they-come` leaves, for those that have them."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if servers is not None:
        parser.add_argument("--servers", default=servers, help="where the servers are installed")
    parser.add_argument("--json", help="write every request's outcome here")
    parser.add_argument("--show", action="store_true", help="print every request and what it got")
    if as_they_come is not None:
        parser.add_argument("--as-they-come", action="store_true", help=as_they_come)
    return parser


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--no-fixed-arguments", action="store_true",
                        help="run the git server as it comes: each tool asks for the repository's path")
    args = parser.parse_args()
    report(asyncio.run(run(fixed=not args.no_fixed_arguments)), args.show, args.json)


if __name__ == "__main__":
    main()
