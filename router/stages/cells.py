"""Spreadsheet values as a question writes them: a sheet's name ("Sheet1", "the Sales sheet", 'the sheet called
"Q1 Data"') and cells in A1 notation ("B2", "A1:C10", "column B", "rows 2 to 5"), for a parameter that takes one.

    sheet_in("Read A1:C10 of Sheet1 in /data/a.xlsx", "sheet", free)        # ((15, 21), "Sheet1")
    cells_in("Read A1:C10 of Sheet1 in /data/a.xlsx", "range", {}, free)    # ((5, 11), "A1:C10")

A cell parameter (`cell`, `start_cell`, one described as a cell) takes one cell; a range parameter (`range`,
`cell_range`, one described by an example such as 'A1:D20') takes a range, a whole column or row, or one cell. The
letters of a reference are capitals, as spreadsheets write them: "a1" is no cell.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from router.stages.names import name_in
from router.stages.written import words_of

Span = tuple[int, int]

_SHEET_PARAMETERS = frozenset({"sheet", "sheetname", "sheettitle", "worksheet", "worksheetname", "tab", "tabname"})
# Excel's and Google Sheets' names for a new sheet: "Sheet1", "Sheet 2" is the second sheet, not a name.
_DEFAULT_SHEET = re.compile(r"(?<![\w'\"])Sheet\d{1,3}(?!\w)", re.I)
_SHEET_KINDS = ("sheet", "worksheet", "tab")

_CELL = r"\$?[A-Z]{1,3}\$?[1-9]\d{0,6}"
_EDGE_BEFORE, _EDGE_AFTER = r"(?<![\w:$.])", r"(?![\w:]|\.\d)"
_ONE_CELL = re.compile(rf"{_EDGE_BEFORE}{_CELL}{_EDGE_AFTER}")
_RANGE = re.compile(rf"{_EDGE_BEFORE}{_CELL}(?::{_CELL})?{_EDGE_AFTER}|"  # A1:C10, B2
                    rf"{_EDGE_BEFORE}\$?[A-Z]{{1,3}}:\$?[A-Z]{{1,3}}{_EDGE_AFTER}|"  # B:B
                    rf"{_EDGE_BEFORE}\$?[1-9]\d{{0,6}}:\$?[1-9]\d{{0,6}}{_EDGE_AFTER}")  # 2:3 (not a time: see below)
_THROUGH = r"\s*(?:-|\u2013|(?i:to|through|thru))\s*"
_COLUMNS = re.compile(rf"\b(?i:col(?:umn)?s?)\s+([A-Z]{{1,3}})(?:{_THROUGH}([A-Z]{{1,3}}))?(?![\w:])")
_ROWS = re.compile(rf"\b(?i:rows?)\s+([1-9]\d{{0,6}})(?:{_THROUGH}([1-9]\d{{0,6}}))?(?![\w:.])")
_CELL_PARAMETERS = frozenset({"cell", "celladdress", "cellref", "cellreference", "startcell", "topleft",
                              "topleftcell", "anchorcell", "targetcell"})
_RANGE_PARAMETERS = frozenset({"range", "cellrange", "cells", "rangea1", "a1range", "a1notation", "rangenotation"})
_DESCRIBED_CELL = re.compile(r"\bcell\b", re.I)
_DESCRIBED_RANGE = re.compile(rf"\bA1 notation\b|['\"`]{_CELL}:{_CELL}['\"`]|\brange of cells\b", re.I)
_QUOTES = frozenset("\"'`\u201c")
_TIME = re.compile(r"\b(?:at|by|from|until|till|before|after|to)\s+$", re.I)  # "at 10:30" is a time, not rows


def takes_sheet(parameter: str) -> bool:
    return "".join(words_of(parameter)) in _SHEET_PARAMETERS


def sheet_in(question: str, parameter: str, free: Callable[[Span], bool]) -> tuple[Span, str] | None:
    """The span and name of the sheet the question first names, where `free`, for a parameter that takes one."""
    if not takes_sheet(parameter):
        return None
    found = [(m.span(), m.group(0)) for m in _DEFAULT_SHEET.finditer(question) if free(m.span())]
    found += [named for kind in _SHEET_KINDS if (named := name_in(question, parameter, free, kind)) is not None]
    return min(found, default=None)


def _kind(parameter: str, spec: dict[str, Any]) -> str | None:
    """"cell" or "range", the reference a parameter takes, else None."""
    joined, described = "".join(words_of(parameter)), str(spec.get("description", ""))
    if joined in _RANGE_PARAMETERS or _DESCRIBED_RANGE.search(described):
        return "range"
    if joined in _CELL_PARAMETERS or (_DESCRIBED_CELL.search(described) and not re.search(r"\bcells\b", described)):
        return "cell"
    return None


def _inside_quotes(question: str, span: Span) -> bool:
    """Whether `span` begins a quoted text that goes on past it: 'the sheet "Q1 Data"' writes no cell Q1."""
    before, after = question[span[0] - 1:span[0]], question[span[1]:span[1] + 1]
    return before in _QUOTES and after != before and not (before == "\u201c" and after == "\u201d")


def cells_in(question: str, parameter: str, spec: dict[str, Any], free: Callable[[Span], bool]
             ) -> tuple[Span, str] | None:
    """The span and A1 reference of the first cell (for a cell parameter) or range, column or row (for a range
    parameter) the question gives, where `free`."""
    kind = _kind(parameter, spec)
    if kind is None:
        return None
    found = [(m.span(), m.group(0)) for m in (_ONE_CELL if kind == "cell" else _RANGE).finditer(question)
             if not (kind == "range" and m.group(0)[0].isdigit() and _TIME.search(question[:m.start()]))
             and not _inside_quotes(question, m.span())]
    if kind == "range":
        found += [(m.span(), f"{m.group(1)}:{m.group(2) or m.group(1)}") for m in _COLUMNS.finditer(question)]
        found += [(m.span(), f"{m.group(1)}:{m.group(2) or m.group(1)}") for m in _ROWS.finditer(question)]
    return min(((span, value) for span, value in found if free(span)), default=None)
