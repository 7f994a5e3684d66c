"""Spreadsheet values as tools take them: a sheet's name and cells in A1 notation, a rename's new name, and the
reader of a sheet before the reader of its workbook. Schemas as excel-mcp-server (PyPI) lists them; each case was a
refusal on that server beside the official ones, or is what must stay one."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.models import ScoreBreakdown
from router.request import Request
from router.settings import RouterSettings
from router.stages.arguments import derive_arguments
from router.stages.serving import Arguments
from router.stages.settle import settle_by_arguments
from router.values import Analysis, Candidate, Capability, Catalog, Decision


def _tool(name: str, required: list[str], read_only: bool = True, **properties: dict) -> Capability:
    return Capability(backend="excel", name=name, read_only=read_only, input_schema={
        "type": "object", "required": required, "properties": {"path": {"type": "string"}, **properties}})


SHEET = {"type": "string"}
READ_RANGE = _tool("read_range", ["path", "sheet"], sheet=SHEET, range={
    "type": "string", "description": "e.g. 'A1:D20', 'B:B', '2:3'. Default: the used range."})
DESCRIBE_SHEET = _tool("describe_sheet", ["path", "sheet"], sheet=SHEET)
DESCRIBE_WORKBOOK = _tool("describe_workbook", ["path"])


@pytest.mark.parametrize(("question", "sheet", "cells"), [
    ("Read A1:C10 of Sheet1 in /data/report.xlsx", "Sheet1", "A1:C10"),
    ("Show cell B2 of the Sales sheet in /data/report.xlsx", "Sales", "B2"),
    ('Read column B of the sheet called "Q1 Data" in /data/report.xlsx', "Q1 Data", "B:B"),  # no cell "Q1"
    ("Read rows 2 to 10 of Sheet2 in /data/report.xlsx", "Sheet2", "2:10"),
    ("Read columns B-D of the Costs sheet in /data/report.xlsx", "Costs", "B:D"),
    ("Read Sheet1!A1:D1 in /data/report.xlsx", "Sheet1", "A1:D1"),
    ("Read Sheet1 of /data/report.xlsx", "Sheet1", None),  # the used range: the tool's default
])
def test_a_sheet_and_its_cells_are_read_as_spreadsheets_write_them(question: str, sheet: str,
                                                                   cells: str | None) -> None:
    args, _ = derive_arguments(READ_RANGE, question)
    assert (args["path"], args["sheet"], args.get("range")) == ("/data/report.xlsx", sheet, cells)


@pytest.mark.parametrize("question", [
    "Read the first sheet of /data/report.xlsx",  # which sheet is first is the workbook's to say
    "Read sheet 2 of /data/report.xlsx",  # the second sheet, not one named "2"
    "What sheets are in /data/report.xlsx?",
])
def test_a_sheet_the_question_does_not_name_is_not_guessed(question: str) -> None:
    derived = derive_arguments(READ_RANGE, question)
    assert isinstance(derived, ArgumentsRequired) and derived.details["missing"] == "sheet"


@pytest.mark.parametrize(("question", "cell"), [
    ("Add a note to B7 of Sheet1 in /data/a.xlsx saying check this", "B7"),
    ("Add a note to A1:B2 of Sheet1 in /data/a.xlsx", None),  # a range is not one cell
    ("Add a note to a1 of Sheet1 in /data/a.xlsx", None),  # references are written in capitals
])
def test_a_cell_parameter_takes_one_cell(question: str, cell: str | None) -> None:
    note = _tool("set_note", ["path", "sheet", "cell"], read_only=False, sheet=SHEET, cell={"type": "string"})
    derived = derive_arguments(note, question)
    assert (derived[0]["cell"] if isinstance(derived, tuple) else None) == cell


def test_a_range_is_no_time_of_day_and_a_time_no_range() -> None:
    moved = _tool("copy_range", ["path", "sheet", "range"], sheet=SHEET, range={"type": "string"})
    assert derive_arguments(moved, "Copy rows 3:4 of Sheet1 in /data/a.xlsx")[0]["range"] == "3:4"
    assert isinstance(derive_arguments(moved, "Copy Sheet1 of /data/a.xlsx at 10:30"), ArgumentsRequired)


@pytest.mark.parametrize(("question", "new"), [
    ("Rename Sheet1 to Data in /data/report.xlsx", "Data"),
    ('Rename Sheet1 of /data/report.xlsx to "Q1 Data"', "Q1 Data"),
    ("Rename Sheet1 of /data/report.xlsx to the old one", None),
    ("Rename Sheet1 of /data/report.xlsx to Data and sort it", None),  # the rest of the request is no name
])
def test_a_rename_gives_its_new_name(question: str, new: str | None) -> None:
    rename = _tool("rename_sheet", ["path", "sheet", "new_name"], read_only=False, sheet=SHEET,
                   new_name={"type": "string"})
    derived = derive_arguments(rename, question)
    assert (derived[0]["new_name"] if isinstance(derived, tuple) else None) == new
    assert not isinstance(derived, tuple) or derived[0]["sheet"] == "Sheet1"


def test_the_closest_reader_answers_when_it_takes_the_question_s_values_and_more_than_the_others() -> None:
    # "How many rows does Sheet1 of a.xlsx have?" was a 409 offering the sheet's and the workbook's descriptions;
    # the closest, the sheet's, takes the sheet as well as the file.
    chart = _tool("create_workbook", ["path"], read_only=False)

    def settle(question: str, readers: tuple[Capability, ...]) -> Decision:
        analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
        decision = Decision(analysis=analysis, method="hybrid", verdict="ambiguous", message="", candidates=(
            Candidate(chart, ScoreBreakdown(composite=0.88, confidence=0.44, tool_confidence=0.33), False,
                      unsure_action=True),
            *(Candidate(r, ScoreBreakdown(composite=0.86 - i / 100, confidence=0.44, tool_confidence=0.19 - i / 50),
                        False, unclear_tool=True) for i, r in enumerate(readers))))
        return settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings())

    question = "How many rows does Sheet1 of /data/report.xlsx have?"
    settled = settle(question, (DESCRIBE_SHEET, DESCRIBE_WORKBOOK))
    assert settled.verdict == "route" and settled.candidates[0].capability is DESCRIBE_SHEET
    # Two readers that take the same values: which is meant is asked.
    asked = settle(question, (DESCRIBE_SHEET, _tool("describe_used_range", ["path", "sheet"], sheet=SHEET)))
    assert asked.verdict == "ambiguous" and not asked.candidates[0].relevant
    # The closest taking less than another is `_wider_reader`'s; it takes nothing here: asked.
    asked = settle("How big is /data/report.xlsx?", (DESCRIBE_SHEET, DESCRIBE_WORKBOOK))
    assert asked.verdict == "ambiguous"


def test_of_all_a_backend_s_readers_the_one_that_takes_every_value_of_the_question_answers() -> None:
    # "Show row 1 of Sheet1 in a.xlsx": retrieval ranked the writers and the macros' reader first, the range's reader
    # below the decision's candidates; of the server's every reader, it alone takes the file, the sheet and the row.
    workbook = _tool("create_workbook", ["path"], read_only=False)
    macros = _tool("read_vba", ["path"], max_lines={"type": "integer"})
    every = (workbook, macros, DESCRIBE_WORKBOOK, DESCRIBE_SHEET, READ_RANGE)

    def settle(question: str, tools: tuple[Capability, ...] = every, catalogs: dict | None = None) -> Decision:
        analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
        ranked = [Candidate(t, ScoreBreakdown(composite=0.88 - i / 50, confidence=0.43, tool_confidence=0.3 - i / 20),
                            False, unsure_action=not t.read_only, unclear_tool=t.read_only)
                  for i, t in enumerate(tools)]
        decision = Decision(analysis=analysis, method="hybrid", verdict="ambiguous", message="",
                            candidates=tuple(ranked[:2]))
        arguments = Arguments(Request(question=question), catalogs=catalogs)
        arguments.tools_of = lambda backend: tuple(ranked) if backend == "excel" else ()
        return settle_by_arguments(decision, arguments, RouterSettings())

    for question, cells in (("Show row 1 of Sheet1 in /data/report.xlsx", "1:1"),  # the 1 the macros take, a row
                            ("Show cell B2 of the Sales sheet in /data/report.xlsx", "B2")):
        settled = settle(question)
        assert settled.verdict == "route" and settled.candidates[0].capability is READ_RANGE
        assert settled.candidates[0].relevant and "of all its backend's readers" in settled.message
        assert derive_arguments(READ_RANGE, question)[0]["range"] == cells
    # The values say where, the words what: a word another reader's texts say, and the range's do not, was asked.
    described = Capability(backend="excel", name="describe_sheet", read_only=True,
                           input_schema=DESCRIBE_SHEET.input_schema,
                           description="Describe a sheet: used range, merges, charts, validation and sparklines.")
    assert settle("Show the sparklines in G2:G9 of Sheet1 in /data/report.xlsx",
                  (workbook, macros, DESCRIBE_WORKBOOK, described, READ_RANGE)).verdict == "ambiguous"
    # Nor does the server's description, which lists what every tool there does, speak for the range's reader.
    notes = Capability(backend="excel", name="describe_sheet", read_only=True, input_schema=DESCRIBE_SHEET.input_schema,
                       description="Describe a sheet: used range, merges, charts and notes.")
    server = {"excel": Catalog(backend="excel", version="1", capabilities=(),
                               description="Workbooks: cells, sheets, charts, notes, formulas.")}
    assert settle("What is the note on B3 of Sheet1 in /data/report.xlsx?",
                  (workbook, macros, DESCRIBE_WORKBOOK, notes, READ_RANGE), server).verdict == "ambiguous"
    # Two readers taking the same values, or one taking the file alone, tell nothing: which is meant is asked.
    assert settle("Describe Sheet1 of /data/report.xlsx", (workbook, macros, DESCRIBE_SHEET,
                                                           _tool("list_charts", ["path", "sheet"], sheet=SHEET))
                  ).verdict == "ambiguous"
    assert settle("What is in /data/report.xlsx?", (workbook, macros, DESCRIBE_WORKBOOK)).verdict == "ambiguous"


async def test_settling_ranks_every_tool_of_a_backend_for_the_question() -> None:
    from router.models import RouteRequest
    from tests.unit.router_world import BOTH_CLOCKS, world

    w = world()
    _, arguments = await w.router._settled(Request.dry_run(RouteRequest(question=BOTH_CLOCKS)))
    tools = arguments.tools_of("calc")
    assert tools and {c.capability.backend for c in tools} == {"calc"}
    assert len(tools) == len(w.router.catalogs["calc"].capabilities) > 1
    # A caller whose policy denies a tool never has it ranked: every tool of a backend is every tool it may use.
    assert "multiply" in {c.capability.name for c in tools}
    from router.security.identity import Principal
    from router.security.policy import Access, Policy

    ops = Access(Principal("ops-bot", "ops", "api_key"), Policy(allow=["calc"], deny=["calc/multiply"]))
    _, theirs = await w.router._settled(Request.dry_run(RouteRequest(question=BOTH_CLOCKS), access=ops))
    assert {c.capability.name for c in theirs.tools_of("calc")} == \
        {c.capability.name for c in tools} - {"multiply"} != set()


def test_a_word_said_by_another_reader_in_its_singular_or_plural_keeps_the_question_open() -> None:
    # "What is the note on B3 of Sheet1?" read the cell: the sheet's description lists "notes", which retrieval's stems
    # keep apart from "note" ("not" and "note"), and the server's description, which lists notes too, spoke for both.
    from router.stages.search_terms import unmatched_words

    sheet = Capability(backend="excel", name="describe_sheet", read_only=True, input_schema=DESCRIBE_SHEET.input_schema,
                       description="Describe a sheet: charts, images, notes, hyperlinks.")
    assert unmatched_words(sheet, "What is the note on B3?") == ["b3"]
    assert unmatched_words(Capability(backend="fs", name="read_file", description="Read a file"),
                           "Read the files") == []
