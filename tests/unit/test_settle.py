"""The settle stage: which of the decided candidates a request means, told by what the question says beside the
scores: its values settling a backend's close tools, a reader for a question and a writer for a change, a reader
that takes more of the question, a backend the question names."""

from __future__ import annotations

import pytest

from router.request import Request
from router.values import Capability
from tests.unit.helpers import TIMEZONE_SCHEMA


def test_values_that_settle_which_tool_do_not_make_an_unlikely_tool_that_acts_callable() -> None:
    # "London 9am": the alarm takes both values, the clock one; the backend is likely (0.6), but that the
    # alarm is its tool meant is not (0.2): an alarm set on that is an action on a guess.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.serving import Arguments
    from router.stages.settle import settle_by_arguments
    from router.values import Analysis, Candidate, Decision

    zone = TIMEZONE_SCHEMA
    timed = {"type": "object", "required": ["timezone", "time"], "properties": {
        **TIMEZONE_SCHEMA["properties"], "time": {"type": "string", "description": "HH:MM"}}}
    clock = Capability(backend="clock", name="get_time", read_only=True, input_schema=zone)
    alarm = Capability(backend="clock", name="set_alarm", input_schema=timed)
    question = "London 9am"
    candidates = (Candidate(clock, ScoreBreakdown(composite=0.80, confidence=0.6, tool_confidence=0.7), True),
                  Candidate(alarm, ScoreBreakdown(composite=0.78, confidence=0.6, tool_confidence=0.2), False,
                            unclear_tool=True))
    analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
    decision = Decision(analysis=analysis, method="hybrid", candidates=candidates, verdict="route", message="")
    settled = settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings())
    first = settled.candidates[0]
    assert first.capability.name == "set_alarm" and not first.relevant and first.unsure_action
    assert settled.verdict == "ambiguous"
    # The answer says why it is not called, not where it would have been routed.
    assert settled.message.startswith("clock/tool/set_alarm may change something, and it is not likely enough")


def test_a_file_the_question_names_settles_no_tool_of_a_server_whose_tools_all_take_one() -> None:
    # A spreadsheet server: "Export the Sales sheet of /srv/sales.xlsx to CSV" was answered with the whole workbook
    # (the only close tool needing nothing but the path), and "Show the cells A1:C4 of ..." with its macros.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.serving import Arguments
    from router.stages.settle import settle_by_arguments
    from router.values import Analysis, Candidate, Decision

    def takes(*names: str) -> dict[str, object]:
        return {"type": "object", "required": list(names), "properties": {n: {"type": "string"} for n in names}}

    export_csv = Capability(backend="xl", name="export_csv", input_schema=takes("path", "sheet", "csv_path"))
    workbook = Capability(backend="xl", name="export_workbook", read_only=True, input_schema=takes("path"))
    macros = Capability(backend="xl", name="read_vba", read_only=True, input_schema=takes("path"))
    clock = Capability(backend="xl", name="now", read_only=True, input_schema=TIMEZONE_SCHEMA)

    def settle(question: str, *candidates: Candidate) -> Decision:
        analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
        decision = Decision(analysis=analysis, method="hybrid", candidates=candidates, verdict="route", message="")
        return settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings())

    clear, weak = ScoreBreakdown(composite=0.8, confidence=0.8, tool_confidence=0.9), ScoreBreakdown(
        composite=0.75, confidence=0.8, tool_confidence=0.15)
    exported = settle("Export the Sales sheet of /srv/sales.xlsx to CSV", Candidate(export_csv, clear, True),
                      Candidate(workbook, weak, True))
    assert exported.candidates[0].capability.name == "export_csv"  # asked for its sheet, not answered by another
    unclear = ScoreBreakdown(composite=0.8, confidence=0.5, tool_confidence=0.3)
    shown = settle("Show the cells A1:C4 of /srv/sales.xlsx", Candidate(export_csv, unclear, False, unclear_tool=True),
                   Candidate(macros, weak, True))
    assert shown.candidates[0].capability.name == "export_csv" and shown.verdict == "route"
    # A value of a kind the first tool does not take still settles it: "What hour is it in Tokyo?" ranks the
    # conversion first, which needs a time the question does not give, and the clock weakly.
    convert = Capability(backend="xl", name="convert_time", read_only=True, input_schema={
        "type": "object", "required": ["source_timezone", "time", "target_timezone"], "properties": {
            "source_timezone": {"type": "string", "description": "IANA time zone"},
            "time": {"type": "string", "description": "HH:MM"},
            "target_timezone": {"type": "string", "description": "IANA time zone"}}})
    for first in (Candidate(convert, clear, True), Candidate(export_csv, unclear, False, unclear_tool=True)):
        timed = settle("What hour is it in Tokyo?", first, Candidate(clock, weak, True))
        assert timed.candidates[0].capability.name == "now"


def test_a_choice_whose_word_the_first_tool_speaks_of_too_settles_nothing() -> None:
    # The official filesystem server: "the size and modification date of b.txt" went from the file's information to
    # a directory listing sorted by size (its `sortBy` enum took the word "size"), which fails on a file.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.serving import Arguments
    from router.stages.settle import settle_by_arguments
    from router.values import Analysis, Candidate, Decision

    path = {"path": {"type": "string"}}
    info = Capability(backend="fs", name="get_file_info", read_only=True, description=(
        "Retrieve detailed metadata about a file or directory: size, creation time, last modified time"),
        input_schema={"type": "object", "required": ["path"], "properties": path})
    listing = Capability(backend="fs", name="list_directory_with_sizes", read_only=True, description=(
        "Get a detailed listing of all files and directories in a specified path, including sizes"),
        input_schema={"type": "object", "required": ["path"], "properties": {
            **path, "sortBy": {"type": "string", "enum": ["name", "size"]}}})
    scores = ScoreBreakdown(composite=0.8, confidence=0.8, tool_confidence=0.4)

    def first_of(question: str, likely: bool = True) -> str:
        analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
        decision = Decision(analysis=analysis, method="hybrid", verdict="route", message="", candidates=(
            Candidate(info, scores, True), Candidate(listing, scores, likely)))
        settled = settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings())
        return settled.candidates[0].capability.name

    assert first_of("Show the size and modification date of /srv/b.txt") == "get_file_info"
    # A choice the first tool's texts do not speak of still settles: "by name"; and so does one the question puts
    # beside its parameter's word.
    assert first_of("List /srv sorted by name") == "list_directory_with_sizes"
    assert first_of("List the files in /srv sorted by size") == "list_directory_with_sizes"
    # "The biggest" names the order, not the word the information speaks of: the listing takes the path and more of
    # the question, so it reads in the information's place, even where its own tool confidence is low.
    assert first_of("What is the biggest file in /srv?") == "list_directory_with_sizes"
    assert first_of("What is the biggest file in /srv?", likely=False) == "list_directory_with_sizes"
    assert first_of("Show the size of /srv/b.txt", likely=False) == "get_file_info"


def test_a_reader_that_takes_more_of_the_question_answers_before_a_likelier_one_that_leaves_it() -> None:
    # The official git server: "Which files changed in the last commit?" was the staged diff, the likeliest reader
    # (tool confidence 0.33 against 0.11), which leaves "the last commit" unused; `git_show` takes it as HEAD.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.serving import Arguments
    from router.stages.settle import settle_by_arguments
    from router.values import Analysis, Candidate, Decision

    lines = {"type": "object", "properties": {"context_lines": {"type": "integer"}}}
    commit = Capability(backend="git", name="git_commit", description="Records changes to the repository",
                        input_schema={"type": "object", "required": ["message"],
                                      "properties": {"message": {"type": "string"}}})
    staged = Capability(backend="git", name="git_diff_staged", read_only=True, input_schema=lines,
                        description="Shows changes that are staged for commit")
    show = Capability(backend="git", name="git_show", read_only=True, description="Shows the contents of a commit",
                      input_schema={"type": "object", "required": ["revision"],
                                    "properties": {"revision": {"type": "string"}}})

    def first_of(question: str, show_composite: float = 0.795) -> str:
        analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
        decision = Decision(analysis=analysis, method="hybrid", verdict="ambiguous", message="", candidates=(
            Candidate(commit, ScoreBreakdown(composite=0.885, confidence=0.54, tool_confidence=0.27), False,
                      unsure_action=True),
            Candidate(staged, ScoreBreakdown(composite=0.865, confidence=0.55, tool_confidence=0.33), True),
            Candidate(show, ScoreBreakdown(composite=show_composite, confidence=0.43, tool_confidence=0.11), False)))
        settled = settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings())
        assert settled.verdict == "route" and settled.candidates[0].relevant
        return settled.candidates[0].capability.name

    assert first_of("Which files changed in the last commit?") == "git_show"
    assert first_of("Which files are staged?") == "git_diff_staged"  # no commit named: the show takes nothing
    assert first_of("Which files changed in the last commit?", show_composite=0.6) == "git_diff_staged"  # too far


def test_the_one_reader_of_a_backend_answers_a_question_its_texts_say_whole() -> None:
    # The SQLite server: "Show the insights memo" was a 409 offering its one reader, the memo, beside its tools that
    # write (the closest, `append_insight`, may act; the memo's tool confidence was 0.20).
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.serving import Arguments
    from router.stages.settle import settle_by_arguments
    from router.values import Analysis, Candidate, Decision

    append = Capability(backend="sqlite", name="append_insight", description="Add a business insight to the memo",
                        input_schema={"type": "object", "required": ["insight"],
                                      "properties": {"insight": {"type": "string"}}})
    memo = Capability(backend="sqlite", name="Business Insights Memo", kind="resource", read_only=True,
                      description="A living document of discovered business insights", target="memo://insights")

    def settle(question: str) -> Decision:
        analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
        decision = Decision(analysis=analysis, method="hybrid", verdict="ambiguous", message="", candidates=(
            Candidate(append, ScoreBreakdown(composite=0.86, confidence=0.84, tool_confidence=0.7), False,
                      unsure_action=True),
            Candidate(memo, ScoreBreakdown(composite=0.84, confidence=0.84, tool_confidence=0.2), False,
                      unclear_tool=True)))
        return settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings())

    shown = settle("Show the insights memo")
    assert shown.verdict == "route" and shown.candidates[0].capability is memo and shown.candidates[0].relevant
    # A question its texts do not say whole is not the memo's to answer: which tool is asked.
    asked = settle("Show the sales numbers")
    assert asked.verdict == "ambiguous" and not asked.candidates[0].relevant


def test_a_question_that_names_a_backend_is_not_answered_by_another_backend_s_reader() -> None:
    # "Search Notion for the roadmap page": Notion's search (a POST, so it may act) was replaced by the maps server's
    # place search, a reader.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.serving import Arguments
    from router.stages.settle import settle_by_arguments
    from router.values import Analysis, Candidate, Decision

    text = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    search = Capability(backend="notion", name="API-post-search", description="Search by title", input_schema=text)
    places = Capability(backend="maps", name="maps_search_places", read_only=True, description="Search for places",
                        input_schema=text)

    def first_of(question: str) -> str:
        analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
        decision = Decision(analysis=analysis, method="hybrid", verdict="route", message="", candidates=(
            Candidate(search, ScoreBreakdown(composite=0.6, confidence=0.4, tool_confidence=0.9), True,
                      unsure_action=True),
            Candidate(places, ScoreBreakdown(composite=0.5, confidence=0.3, tool_confidence=0.9), True)))
        return settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings()).candidates[
            0].capability.key

    assert first_of("Search Notion for the roadmap page") == "notion/tool/API-post-search"
    assert first_of("Search for the roadmap page") == "maps/tool/maps_search_places"  # as before: reading is no guess


def test_a_question_that_names_a_backend_is_not_answered_by_another_backend_at_all() -> None:
    # "Search Notion for meeting notes" was a web search for "Notion for meeting notes": Notion's search was a little
    # below the confidence threshold, the local search a little above it.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.serving import Arguments
    from router.stages.settle import settle_by_arguments
    from router.values import Analysis, Candidate, Decision

    text = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    notion = Capability(backend="notion", name="API-post-search", read_only=True, description="Search by title",
                        input_schema=text)
    web = Capability(backend="search", name="brave_local_search", read_only=True, description="Search for places",
                     input_schema=text)

    def settled(question: str, likely: bool = False) -> Decision:
        analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
        decision = Decision(analysis=analysis, method="hybrid", verdict="route", message="", candidates=(
            Candidate(web, ScoreBreakdown(composite=0.79, confidence=0.097, tool_confidence=0.5), True),
            Candidate(notion, ScoreBreakdown(composite=0.85, confidence=0.078, tool_confidence=0.5), likely)))
        return settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings())

    asked = settled("Search Notion for meeting notes")
    assert asked.verdict == "ambiguous" and asked.candidates[0].capability.backend == "notion"
    assert "names backend 'notion'" in asked.message and "search/tool/brave_local_search" in asked.message
    routed = settled("Search Notion for meeting notes", likely=True)
    assert routed.verdict == "route" and routed.candidates[0].capability.backend == "notion"
    # A backend called by a common word is not named by its use, nor by a sentence's first word.
    for question in ("Search for meeting notes", "search notion for meeting notes", "Notion: meeting notes"):
        assert settled(question).candidates[0].capability.backend == "search", question
    # Called a server, it is named however it is written ("Add 3 and 4 using the everything server" was the
    # calculator's).
    for question in ("search the notion server for meeting notes", "Use the notion backend to find meeting notes"):
        assert settled(question, likely=True).candidates[0].capability.backend == "notion", question
    assert settled("search my notion server for meeting notes").candidates[0].capability.backend == "search"


# As @playwright/mcp 0.0.83 lists it: one tool lists, opens, closes and selects tabs, and its server marks it as one
# that may change something.
TABS = Capability(backend="playwright", name="browser_tabs", input_schema={
    "type": "object", "required": ["action"], "properties": {
        "action": {"type": "string", "enum": ["list", "new", "close", "select"], "description": "Operation to perform"},
        "index": {"type": "number"}, "url": {"type": "string"}}})


@pytest.mark.parametrize(("question", "reads"), [
    ("List the open tabs", True), ("Show me the tab list", True),
    ("Open a new tab", False), ("Close the tab", False), ("Select the second tab", False),
    ("Close every tab in the list", False),  # a change asked for: its action says nothing of what the call does
])
def test_a_tool_that_may_act_is_called_on_a_readers_bars_when_the_action_it_is_given_only_reads(
        question: str, reads: bool) -> None:
    # "List the open tabs" was a 409: likely enough to be meant (0.48), but not to act on, and listing acts on nothing.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.serving import Arguments
    from router.stages.settle import settle_by_arguments
    from router.values import Analysis, Candidate, Decision

    reader = Capability(backend="playwright", name="browser_snapshot", read_only=True,
                        input_schema={"type": "object", "properties": {}})
    analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")

    def settled(rival: float) -> Decision:
        candidates = (Candidate(TABS, ScoreBreakdown(composite=0.80, confidence=0.8, tool_confidence=0.6), False,
                                unsure_action=True),
                      Candidate(reader, ScoreBreakdown(composite=rival, confidence=0.8, tool_confidence=0.4), True))
        decision = Decision(analysis=analysis, method="hybrid", candidates=candidates, verdict="ambiguous", message="")
        return settle_by_arguments(decision, Arguments(Request(question=question)), RouterSettings())

    first = settled(0.6).candidates[0]
    assert (first.capability.name == "browser_tabs" and first.relevant and not first.unsure_action) is reads
    assert (settled(0.6).verdict == "route") is reads
    # Too close to another likely candidate (a tie, at the default margin), it is still asked about.
    assert settled(0.80).verdict == "ambiguous" and settled(0.80).candidates[0].unsure_action


def test_only_an_enumerated_action_that_reads_makes_a_call_a_reading() -> None:
    from router.stages.names import reads_by_its_action

    assert reads_by_its_action(TABS, {"action": "list"})
    assert not reads_by_its_action(TABS, {"action": "close"}) and not reads_by_its_action(TABS, {"url": "list"})
    free = Capability(backend="b", name="run", input_schema={"type": "object", "properties": {
        "command": {"type": "string"}, "format": {"type": "string", "enum": ["list", "table"]}}})
    # A free command is whatever the caller writes, and a format of the answer says nothing of what the call does.
    assert not reads_by_its_action(free, {"command": "list"}) and not reads_by_its_action(free, {"format": "list"})
