"""A sixth catalog nobody tuned for: a spreadsheet server (excel-mcp-server, from PyPI) beside the official
filesystem, memory, git and time servers, asked plain requests of a spreadsheet. Its server annotates every tool, and
most of its 50 may change a workbook: they write, clear, sort, merge and format cells, add and delete sheets, charts
and notes. Its requests name sheets ("Sheet1", "the Sales sheet") and cells ("A1:C10", "column B"). Each request names
the tools that would do it (none: nothing here does it rightly). The router's dry run says what it would call;
nothing is called, and no workbook needs to exist.

    python -m venv .state/spreadsheet-servers
    .state/spreadsheet-servers/bin/pip install excel-mcp-server==2.2.2
    python benchmarks/spreadsheet_servers.py [--servers .state/spreadsheet-servers] [--json OUT] [--show]

A request answered by one of its tools is right, by another wrong; a refusal (404, 409, 422) is neither.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.official_servers import READ, arguments, dry_runs_beside, installed, report

BOOK = "/data/report.xlsx"
REQUESTS: list[tuple[str, tuple[str, ...]]] = [
    (f"What sheets are in {BOOK}?", ("describe_workbook",)),
    (f"Which sheets does {BOOK} have?", ("describe_workbook",)),
    (f"What is in {BOOK}?", ("describe_workbook",)), ("List the Excel files in /data", ("list_workbooks",)),
    (f"Read A1:C10 of Sheet1 in {BOOK}", ("read_range",)),
    (f"Show cell B2 of the Sales sheet in {BOOK}", ("read_range",)),
    ("Read B2:D5 of the Costs sheet in /data/budget.xlsx", ("read_range",)),
    (f"Show row 1 of Sheet1 in {BOOK}", ("read_range",)),
    (f"What formulas are in column D of Sheet1 in {BOOK}?", ("read_range",)),
    (f'Find "total" in {BOOK}', ("find_cells",)), (f"Which cells of {BOOK} mention revenue?", ("find_cells",)),
    (f"Describe Sheet1 of {BOOK}", ("describe_sheet",)),
    (f"How many rows does Sheet1 of {BOOK} have?", ("describe_sheet", "read_range")),
    (f"List the charts on Sheet1 of {BOOK}", ("describe_sheet",)),
    (f"Show the notes on Sheet1 of {BOOK}", ("describe_sheet",)),
    (f"Which cells feed the formula in D10 of Sheet1 in {BOOK}?", ("trace_formula",)),
    ("Show the macros in /data/book.xlsm", ("read_vba",)),
    ("Create a workbook at /data/new.xlsx", ("create_workbook",)),
    (f"Add a sheet called Summary to {BOOK}", ("create_sheet",)),
    (f"Rename Sheet1 to Data in {BOOK}", ("rename_sheet",)),
    (f"Delete the Old sheet from {BOOK}", ("delete_sheet",)),
    (f"Write 42 into A1 of Sheet1 in {BOOK}", ("write_range",)), (f"Clear A1:B5 on Sheet1 of {BOOK}", ("clear_range",)),
    (f"Sort Sheet1 of {BOOK} by column B", ("sort_range",)),
    (f"Make a bar chart of A1:B10 on Sheet1 of {BOOK}", ("create_chart",)),
    (f"Bold the header row of Sheet1 in {BOOK}", ("format_range",)),
    (f"Export Sheet1 of {BOOK} to /data/out.csv", ("export_csv",)),
    (f"Import /data/in.csv into Sheet1 of {BOOK}", ("import_csv",)),
    (f"Replace foo with bar in {BOOK}", ("replace_cells",)),
    (f"Insert 3 rows before row 5 on Sheet1 of {BOOK}", ("insert_rows_or_columns",)),
    (f"Delete column C from Sheet1 of {BOOK}", ("delete_rows_or_columns",)),
    ("Add a note to A1 saying check this", ("set_note",)), (f"Merge A1:D1 on Sheet1 of {BOOK}", ("merge_cells",)),
    (f"Freeze the top row of Sheet1 in {BOOK}", ("set_sheet_layout",)),
    (f"Remove duplicate rows from A1:C100 on Sheet1 of {BOOK}", ("transform_range",)),
    (f"What is the sum of column B in {BOOK}?", ()), (f"Delete {BOOK}", ()), ("Email the report to my boss", ()),
    # The other servers' own requests, which a spreadsheet server beside them should not take.
    ("Read {root}/notes.txt", READ), ("Show me the git status", ("git_status",)),
    ("What time is it in Tokyo?", ("get_current_time",)),
]


def spreadsheet_backend(servers: Path) -> dict[str, Any]:
    return {"name": "excel", "kind": "mcp_stdio", "command": str(installed(servers / "bin" / "excel-mcp-server")),
            "args": ["stdio"]}


def main() -> None:
    args = arguments(__doc__, servers=".state/spreadsheet-servers").parse_args()
    rows = dry_runs_beside("mcp-router-sixth-catalog",
                           lambda _: spreadsheet_backend(Path(args.servers)), REQUESTS)
    report(rows, args.show, args.json)


if __name__ == "__main__":
    main()
