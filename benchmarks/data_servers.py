"""A third catalog nobody tuned for: data servers from PyPI beside the official memory and time servers (SQLite, the
web fetcher, the knowledge-graph memory, the clock), asked plain requests, many of them written as SQL or as web
addresses. Each request names the tools that would do it (none: nothing here does it rightly). The router's dry
run says what it would call; nothing is called. SQLite's server annotates nothing, so the operator says which of
its tools only read (`read_only_tools`), as a deployment would; `--as-they-come` leaves each one that may act.

    python -m venv .state/data-servers/sqlite
    .state/data-servers/sqlite/bin/pip install mcp-server-sqlite==2025.4.25 "mcp<2"   # it runs on the 1.x SDK only
    python -m venv .state/data-servers/fetch
    .state/data-servers/fetch/bin/pip install mcp-server-fetch==2026.10.24
    python benchmarks/data_servers.py [--servers .state/data-servers] [--json OUT] [--show] [--as-they-come]

A request answered by one of its tools is right, by another wrong; a refusal (404, 409, 422) is neither.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.official_servers import NODE, arguments, dry_runs, report
from router.settings import RouterSettings

PAGE = "https://example.com"
REQUESTS: list[tuple[str, tuple[str, ...]]] = [
    ("What tables are in the database?", ("list_tables",)), ("List the tables", ("list_tables",)),
    ("Describe the users table", ("describe_table",)), ("What columns does the users table have?", ("describe_table",)),
    ("Show me the schema of the orders table", ("describe_table",)),
    ("Run SELECT * FROM users", ("read_query",)), ("SELECT count(*) FROM users", ("read_query",)),
    ("How many users are there?", ("read_query",)), ("Show me all users", ("read_query",)),
    ("List users whose email ends with example.com", ("read_query",)),
    ("DELETE FROM users WHERE id = 1", ("write_query",)), ("Delete the user bob", ("write_query",)),
    ("INSERT INTO users(name) VALUES ('carol')", ("write_query",)),
    ("Insert a user named alice with email alice@example.com", ("write_query",)),
    ("UPDATE users SET email='b@b.org' WHERE name='bob'", ("write_query",)),
    ("Update bob's email to bob@new.org", ("write_query", "add_observations")),
    ("Create a table orders with id and total", ("create_table",)),
    ("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)", ("create_table",)),
    ("Drop the users table", ("write_query",)), ("Add an insight: most users are named bob", ("append_insight",)),
    ("Show the insights memo", ("Business Insights Memo",)),
    ("Back up the database", ()), ("Export the users table to CSV", ()),
    (f"Fetch {PAGE}", ("fetch",)), (f"Get the first 500 characters of {PAGE}", ("fetch",)),
    (f"What does {PAGE}/docs say?", ("fetch",)), ("Download the page at example.com", ("fetch",)),
    (f"Read {PAGE}/a.html from character 1000", ("fetch",)), ("Summarize https://news.ycombinator.com", ("fetch",)),
    (f"Fetch the raw HTML of {PAGE}", ("fetch",)), (f"Post this form to {PAGE}/submit", ()),
    ("Remember that alice is an admin", ("create_entities", "add_observations")),
    ("Search memory for alice", ("search_nodes",)), ("Show everything in memory", ("read_graph",)),
    ("Forget alice", ("delete_entities",)), ("Who is bob?", ("search_nodes", "open_nodes")),
    ("Alice works at Acme", ("create_entities", "create_relations", "add_observations")),
    ("What time is it in Berlin?", ("get_current_time",)),
    ("Convert 9am Tokyo time to Paris time", ("convert_time",)),
    ("Send an email to bob", ()), ("Translate hello into German", ()), ("Book a flight to Rome", ()),
]

READERS = {"sqlite": {"read_only_tools": ["read_query", "list_tables", "describe_table"]}}


def settings(servers: Path, db: Path, memory: Path, readers: bool = True) -> RouterSettings:
    def python(name: str, command: Path, *args: str) -> dict:
        return {"name": name, "kind": "mcp_stdio", "command": str(command), "args": list(args),
                **(READERS.get(name, {}) if readers else {})}

    return RouterSettings.model_validate({"backends": [
        python("sqlite", servers / "sqlite" / "bin" / "mcp-server-sqlite", "--db-path", str(db)),
        python("fetch", servers / "fetch" / "bin" / "mcp-server-fetch"),
        {"name": "memory", "kind": "mcp_stdio", "command": "node",
         "args": [str(NODE / "server-memory" / "dist" / "index.js")], "env": {"MEMORY_FILE_PATH": str(memory)}},
        {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time"}]})


def main() -> None:
    parser = arguments(__doc__, ".state/data-servers",
                       "no `read_only_tools`: every SQLite tool may act, as its server says nothing")
    args = parser.parse_args()
    servers = Path(args.servers).resolve()
    if not all((servers / name / "bin" / f"mcp-server-{name}").exists() for name in ("sqlite", "fetch")):
        sys.exit(f"the servers are not installed under {servers}: run the installs of this file's docstring")
    tmp = Path(tempfile.mkdtemp(prefix="mcp-router-data-servers-"))
    try:
        db = tmp / "shop.db"
        with sqlite3.connect(db) as con:
            con.execute("create table users (id integer primary key, name text, email text)")
            con.execute("insert into users (name, email) values ('bob', 'bob@example.com')")
        rows = asyncio.run(dry_runs(settings(servers, db, tmp / "memory.jsonl", not args.as_they_come), REQUESTS))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(rows, args.show, args.json)


if __name__ == "__main__":
    main()
