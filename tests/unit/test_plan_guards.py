"""The plan stage's guards against acting on a guess: a tool settled by the question's values, a much weaker
candidate in place of a best match that cannot serve the question, a tool name several backends give to
different tools, and the pair a close call lists."""

from __future__ import annotations

import pytest

from router.errors import AmbiguousRoute, ToolFailed
from router.models import QueryRequest
from router.request import Request
from router.values import Capability
from tests.unit.fake_executor import fail, ok
from tests.unit.helpers import TIMEZONE_SCHEMA, catalog, small_catalogs
from tests.unit.router_world import answers, query, world


async def test_a_tool_named_without_its_backend_that_two_backends_offer_as_different_tools_is_asked_about() -> None:
    # Called, the file server's "delete" failed with a tool error and the mail server's "delete" ran instead.
    query_only = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    catalogs = [catalog("time", "files", Capability(backend="time", name="delete", description="Delete a file",
                                                    input_schema=query_only)),
                catalog("clock", "mail", Capability(backend="clock", name="delete", description="Delete an email",
                                                    input_schema=query_only)),
                *small_catalogs()[2:]]
    w = world(answers(time=fail("tool_failed", "no such file"), clock=ok("deleted")), catalogs=catalogs)
    with pytest.raises(AmbiguousRoute) as info:
        await query(w.router, QueryRequest(question="delete the file old-report.txt", tool="delete"))
    assert [c["backend"] for c in info.value.details["candidates"]] == ["time", "clock"]
    assert "name the backend" in info.value.message and w.executor.called == []
    with pytest.raises(ToolFailed):  # named with its backend: called, and its failure is not sent to the other
        await query(w.router, QueryRequest(question="delete the file old-report.txt", backend="time", tool="delete",
                                           fallback_on_override=True))
    assert w.executor.called == ["time"]


def test_a_close_call_lists_the_two_choices_it_compared_not_two_copies_of_one() -> None:
    from router.models import ScoreBreakdown
    from router.stages.plan import _too_close_pair
    from router.values import Analysis, Candidate, Capability, Decision

    def candidate(backend: str, name: str, composite: float) -> Candidate:
        return Candidate(Capability(backend=backend, name=name), ScoreBreakdown(composite=composite), True)

    ranked = (candidate("time1", "get_time", 0.9), candidate("time2", "get_time", 0.9),
              candidate("clock", "world_clock", 0.88))
    analysis = Analysis(question="q", vector=None, intent="general", intent_source="classifier")
    decision = Decision(analysis=analysis, method="hybrid", candidates=ranked, verdict="ambiguous", message="")
    assert [(c["backend"], c["rank"]) for c in _too_close_pair(decision)] == [("time1", 1), ("clock", 3)]


def test_values_that_settle_which_tool_do_not_make_an_unlikely_tool_that_acts_callable() -> None:
    # "London 9am": the alarm takes both values, the clock one; the backend is likely (0.6), but that the
    # alarm is its tool meant is not (0.2): an alarm set on that is an action on a guess.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.plan import settle_by_arguments
    from router.stages.serving import Arguments
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


def test_a_much_weaker_candidate_is_not_called_in_place_of_a_best_match_that_cannot_serve_the_question() -> None:
    from router.errors import NoRelevantBackend as Declined
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.plan import plan
    from router.stages.serving import Arguments
    from router.values import Analysis, Candidate, Decision

    text = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    units = Capability(backend="calc", name="convert_units", read_only=True, input_schema=text,
                       description="Convert a quantity between units of length and mass")
    prices = Capability(backend="shop", name="find_price", read_only=True, input_schema=text,
                        description="Look up a product's price")
    question = "Convert 100 USD to EUR"
    analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")

    def planned(weaker: float) -> object:
        candidates = (Candidate(units, ScoreBreakdown(composite=0.9, confidence=0.8), True),
                      Candidate(prices, ScoreBreakdown(composite=weaker, confidence=0.2), True))
        decision = Decision(analysis=analysis, method="hybrid", candidates=candidates, verdict="route", message="")
        return plan(decision, Arguments(Request(question=question)), {}, RouterSettings())

    assert isinstance(planned(0.6).refusal, Declined)  # type: ignore[attr-defined]  # a guess at what was meant
    assert [c.capability.name for c in planned(0.85).calls] == ["find_price"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("question", ["Delete the file /tmp/old.txt", "Remove old logs from /var/log",
                                      "Copy into /backup the file /etc/hosts"])
def test_a_tool_that_may_act_is_not_called_on_a_path_taken_from_the_question(question: str) -> None:
    # Which path a change acts on, and in which role, is more than a path's shape tells: "from /var/log" names the
    # folder the logs are in, and deleting it would be an action on a guess. The derivation still counts the path,
    # so that a reader taking it is not put first instead ("Create the directory /srv/x" was a directory listing).
    from router.errors import ArgumentsRequired
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.arguments import derive_arguments
    from router.stages.plan import plan
    from router.stages.serving import Arguments
    from router.values import Analysis, Candidate, Decision

    paths = {"type": "string", "description": "A file path"}
    change = Capability(backend="files", name="change", input_schema={
        "type": "object", "required": ["source"], "properties": {"source": paths, "destination": paths}})
    assert "source" in derive_arguments(change, question)[0]  # type: ignore[index]
    analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
    decision = Decision(analysis=analysis, method="hybrid", verdict="route", message="", candidates=(
        Candidate(change, ScoreBreakdown(composite=0.9, confidence=0.9, tool_confidence=0.9), True),))
    planned = plan(decision, Arguments(Request(question=question)), {}, RouterSettings())
    assert not planned.calls and isinstance(planned.refusal, ArgumentsRequired)
    assert "which path a change acts on is the caller's to say" in planned.refusal.message
    # A tool that reads is called on it.
    reader = Capability(backend="files", name="show", input_schema=change.input_schema, read_only=True)
    read = "Show /tmp/old.txt"
    decision = Decision(analysis=Analysis(question=read, vector=None, intent="general", intent_source="classifier"),
                        method="hybrid", verdict="route", message="", candidates=(
        Candidate(reader, ScoreBreakdown(composite=0.9, confidence=0.9, tool_confidence=0.9), True),))
    [call] = plan(decision, Arguments(Request(question=read)), {}, RouterSettings()).calls
    assert call.arguments == {"source": "/tmp/old.txt"}


def test_a_reader_is_no_stand_in_for_a_tool_that_may_act_and_lacks_its_arguments() -> None:
    # "Create the directory /srv/x": the directory maker may not act on a path taken from the question, and the
    # lister, as relevant and able to take the path, listed it.
    from router.errors import ArgumentsRequired
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.plan import plan
    from router.stages.serving import Arguments
    from router.values import Analysis, Candidate, Decision

    path = {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}
    make = Capability(backend="files", name="create_directory", input_schema=path)
    listing = Capability(backend="files", name="list_directory", input_schema=path, read_only=True)
    question = "Create the directory /srv/x"
    decision = Decision(analysis=Analysis(question=question, vector=None, intent="general",
                                          intent_source="classifier"), method="hybrid", verdict="route", message="",
                        candidates=(Candidate(make, ScoreBreakdown(composite=0.9, confidence=0.9, tool_confidence=0.9),
                                              True),
                                    Candidate(listing, ScoreBreakdown(composite=0.85, confidence=0.8,
                                                                      tool_confidence=0.9), True)))
    planned = plan(decision, Arguments(Request(question=question)), {}, RouterSettings())
    assert isinstance(planned.refusal, ArgumentsRequired) and planned.refusal.details["tool"] == "create_directory"


def test_a_time_converted_on_another_date_is_judged_on_derived_values_of_two_zones_and_every_date() -> None:
    from router.stages.serving import DATED, Arguments

    zone = {"type": "string", "description": "IANA timezone name"}
    convert = Capability(backend="time", name="convert_time", read_only=True, input_schema={
        "type": "object", "required": ["source_timezone", "time", "target_timezone"],
        "properties": {"source_timezone": zone, "time": {"type": "string", "description": "HH:MM"},
                       "target_timezone": zone}})

    def doubt(question: str, **kw: object) -> str | None:
        from datetime import UTC, datetime

        arguments = Arguments(Request(question=question, **kw))  # type: ignore[arg-type]
        arguments.now = datetime(2026, 11, 28, 12, tzinfo=UTC)
        return arguments.unserved(convert)

    assert doubt("What time is it in New York when it is 9am in London on March 20?") == DATED
    assert doubt("What time is it in New York when it is 9am in London on January 5, and on March 20?") == DATED
    assert doubt("What time is it in Paris when it is 9am in London on July 1?") is None  # their clocks move together
    # The caller's own arguments are its to give, and never break the plan.
    given = {"source_timezone": "europe/london", "time": "24:00", "target_timezone": "America/New_York"}
    assert doubt("Convert it for the meeting on March 20", arguments=given) is None
    # A tool that takes the date converts on it.
    dated = Capability(backend="time", name="convert_on", read_only=True, input_schema={
        **convert.input_schema, "properties": {**convert.input_schema["properties"],
                                               "when": {"type": "string", "format": "date"}}})
    arguments = Arguments(Request(question="What time is it in New York when it is 9am in London on March 20?"))
    assert arguments.unserved(dated) is None


def test_a_file_the_question_names_settles_no_tool_of_a_server_whose_tools_all_take_one() -> None:
    # A spreadsheet server: "Export the Sales sheet of /srv/sales.xlsx to CSV" was answered with the whole workbook
    # (the only close tool needing nothing but the path), and "Show the cells A1:C4 of ..." with its macros.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.plan import settle_by_arguments
    from router.stages.serving import Arguments
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
    from router.stages.plan import settle_by_arguments
    from router.stages.serving import Arguments
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
    from router.stages.plan import settle_by_arguments
    from router.stages.serving import Arguments
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


def test_a_question_that_names_a_backend_is_not_answered_by_another_backend_s_reader() -> None:
    # "Search Notion for the roadmap page": Notion's search (a POST, so it may act) was replaced by the maps server's
    # place search, a reader.
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.plan import settle_by_arguments
    from router.stages.serving import Arguments
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
    from router.stages.plan import settle_by_arguments
    from router.stages.serving import Arguments
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


def test_a_tool_that_may_act_is_not_called_on_an_array_of_paths_taken_from_the_question() -> None:
    # As a path: which files a change acts on is the caller's to say, several of them too.
    from router.errors import ArgumentsRequired
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.arguments import derive_arguments
    from router.stages.plan import plan
    from router.stages.serving import Arguments
    from router.values import Analysis, Candidate, Decision

    question = "Delete /tmp/a.txt and /tmp/b.txt"
    remove = Capability(backend="files", name="delete_files", input_schema={"type": "object", "required": ["paths"],
                        "properties": {"paths": {"type": "array", "items": {"type": "string"},
                                                 "description": "The file paths to delete"}}})
    assert derive_arguments(remove, question)[0] == {"paths": ["/tmp/a.txt", "/tmp/b.txt"]}  # type: ignore[index]
    analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
    decision = Decision(analysis=analysis, method="hybrid", verdict="route", message="", candidates=(
        Candidate(remove, ScoreBreakdown(composite=0.9, confidence=0.9, tool_confidence=0.9), True),))
    planned = plan(decision, Arguments(Request(question=question)), {}, RouterSettings())
    assert not planned.calls and isinstance(planned.refusal, ArgumentsRequired)
