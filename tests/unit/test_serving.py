"""What of a question a tool can serve, whatever its arguments: the kinds of value it carries, a request to
change something, a question that only asks, a request to switch something one way, and the words a call must
be about."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments
from router.stages.search_terms import unmatched_words
from router.values import Capability


def test_a_question_carries_currency_values_a_unit_converter_does_not_name() -> None:
    from router.stages.serving import unserved, value_kinds

    kinds = value_kinds("Convert 100 USD to EUR")
    assert kinds == {"currency": ["USD", "EUR"]}
    units = Capability(backend="calc", name="convert_units", description="Convert between units of length and mass")
    money = Capability(backend="fx", name="convert", description="Convert an amount between currencies")
    assert unserved(units, kinds) == "currency" and unserved(money, kinds) is None
    assert value_kinds("how many pounds is 3 kg") == {} and value_kinds("Europe trip ideas") == {}
    # Codes that are also words or abbreviations in capitals name no currency.
    assert value_kinds("Write a PHP script for CVE-2021-44228 on the SAR images") == {}
    assert value_kinds("Rates of the Thai baht and the US dollar") == {"currency": ["Thai baht", "US dollar"]}


def test_a_sql_statement_goes_to_a_tool_of_sql_that_runs_its_kind() -> None:
    # The SQLite server: a SELECT is for read_query, not for write_query ("INSERT, UPDATE, or DELETE"), nor for the
    # memory server's delete_entities, which knows no SQL; a tool that names no statement kind may run any.
    from router.stages.serving import unserved, value_kinds

    def sql_tool(name: str, description: str) -> Capability:
        return Capability(backend="sqlite", name=name, description=description, input_schema={
            "type": "object", "required": ["query"], "properties": {"query": {"type": "string", "description": (
                "SQL query to execute")}}})

    read = sql_tool("read_query", "Execute a SELECT query on the SQLite database")
    write = sql_tool("write_query", "Execute an INSERT, UPDATE, or DELETE query on the SQLite database")
    any_kind = sql_tool("run", "Run a statement")
    forget = Capability(backend="memory", name="delete_entities", description="Delete entities from the graph")
    select, delete = value_kinds("Run SELECT * FROM users"), value_kinds("DELETE FROM users WHERE id = 1")
    assert list(select) == ["SQL SELECT"] and list(delete) == ["SQL DELETE"]
    assert unserved(read, select) is None and unserved(write, select) == "SQL SELECT"
    assert unserved(write, delete) is None and unserved(read, delete) == "SQL DELETE"
    assert unserved(any_kind, select) is None and unserved(any_kind, delete) is None
    assert unserved(forget, delete) == "SQL DELETE"
    assert derive_arguments(read, "Please run 'SELECT name FROM users WHERE id = 3';")[0] == {
        "query": "SELECT name FROM users WHERE id = 3"}
    for statement in ("select name from users where id = 2", "select name, email from users order by name",
                      "select count(id) from users limit 5"):  # in lower case, with a clause after its table
        assert derive_arguments(read, statement)[0] == {"query": statement}
    # English, not SQL: "Select the users from Paris", "delete from my list"; and a statement the question only talks
    # about is not the request: it neither refuses the tools that know no SQL nor is sent.
    for question in ("Select the users from Paris", "Select a seat from row 12 where it is quiet",
                     "select a seat from the row where it is quiet",
                     "Please delete from my list", "FLIGHTS WITH LAYOVERS FROM PARIS",
                     "How do I do SELECT name FROM users in pandas?", "What happens if I run DELETE FROM users?"):
        assert value_kinds(question) == {}
        assert isinstance(derive_arguments(write, question), ArgumentsRequired)
    # A statement's own literals stay whole: its closing quote, and a ";" inside one.
    for statement in ("SELECT * FROM users WHERE name = 'O''Brien'", "SELECT * FROM t WHERE a = 'x;y'"):
        assert derive_arguments(read, f"Run {statement}.")[0] == {"query": statement}



@pytest.mark.parametrize(("question", "verb"), [
    ("Remember that Bob likes tea", "remember"), ("Please delete all my notes", "delete"),
    ("Could you, please, save this page", "save"), ("Kindly book a table for two", "book"),
    ("What do you remember about Bob?", None), ("Add 3 and 4", None), ("Create a chart of sales", None),
    ("Remembering names is hard", None), ("Set a timer for 5 minutes", "set"), ("Please turn off the lights", "turn"),
    ("Settings of the router?", None), ("Set up a cluster", None), ("Turn this list into a table", None),
    ("Turn on dark mode", "turn"), ("Change the time zone to Europe/Paris", "change"),
    ("Change 100 USD to EUR", None), ("Change dollars to euros", None), ("Change log of the router?", None),
    ("Change in GDP since 2020?", None),  # conversions; things
    ("Make /srv/a.txt read-only", "make"), ("Please make the repo private", "make"), ("Make a chart of sales", None),
    ("Make me a sandwich", None), ("Checkout the file notes.txt from HEAD", "checkout"),
    ("Undo my last commit", "undo"), ("Make a.txt read only", "make"), ("Make\nthe repo private", "make"),
    # A state word that describes what to make, not how to leave something; a checkout that is a noun.
    ("Make me a list of the public holidays in 2025", None), ("Make a table of inactive users", None),
    ("Checkout conversion rate for March", None), ("Truncate 'hello world' to 5 characters", None),
    # What a database, a repository or a tracker is asked to do: a demo prompt seeding the database does not back it up.
    ("Back up the database", "back up"), ("Backup my files", "backup"), ("Back to the list of tools", None),
    ("Drop the users table", "drop"), ("Close issue 42", "close"), ("Close to the station, what cafes are open?", None),
    ("Commit my changes", "commit"), ("Tag this commit as v1.0", "tag"), ("Push my commits to origin", "push"),
    # The same words heading a thing asked about.
    ("Commit history of octocat/hello-world", None), ("Close price of Tesla yesterday", None),
    ("Install instructions for numpy", None), ("Drop rate of legendary items", None), ("Close-up photos", None),
    ("Backup status of the database", None), ("Push notification history", None), ("Purge history", None),
    # Staging files and changes; a stage asked about.
    ("Stage /srv/repo/a.txt", "stage"), ("Stage all changes", "stage"), ("Stage everything", "stage"),
    ("Stage 2 results of the tour", None), ("Stage names of famous actors", None),
    ("Stage directions for Hamlet", None),
])
def test_a_request_to_change_something_is_told_by_its_leading_verb(question: str, verb: str | None) -> None:
    from router.stages.serving import asks_for_change

    assert asks_for_change(question) == verb


@pytest.mark.parametrize(("question", "lead"), [
    ("List all entities in memory", "list"), ("What's in my notes?", "what"), ("Can you show the memos", "show"),
    ("Find the duplicates and delete them", None), ("What do you remember about Bob?", None),
    ("Get me a taxi", None), ("How do I enable tracing?", None), ("Listing prices rose", None),
    ("Tell me the time in Tokyo", "tell"), ("Please tell us a story", "tell"), ("Tell Bob I'm late", None),
    ("What is the change in price?", "what"),  # a noun here
    ("Show the last commit", "show"), ("List the tags", "list"), ("What is in the backup?", "what"),  # nouns too
    ("Show me how to uninstall Steam", "show"), ("Tell me how to purge the cache", "tell"),
    ("How long has session 7 been running?", "how long"), ("How many files are in /srv?", "how many"),
    ("How do I stop it?", None), ("Did the tests pass?", "did"), ("Has the build finished?", "has"),
    ("Was the file deleted?", "was"), ("How many files can I delete?", None),
])
def test_a_question_that_only_asks_is_told_by_its_leading_word(question: str, lead: str | None) -> None:
    from router.stages.serving import asks_to_read

    assert asks_to_read(question) == lead


@pytest.mark.parametrize(("question", "way"), [
    ("Turn off the simulated logs", "turn off"), ("Please switch on the lights", "switch on"),
    ("Can you disable alerts", "disable"), ("Stop the logging", "stop"), ("Turn the simulated logs off", "turn off"),
    ("Toggle simulated logging off", "toggle off"), ("Shut off the logging", "shut off"),
    ("Now disable simulated logging", "disable"), ("How do I enable tracing?", "enable"),
    ("Toggle the logging", None), ("Turn the page", None), ("What does the logging toggle do?", None),
    ("Is logging enabled?", None),
])
def test_a_request_to_switch_something_one_way_is_told_by_its_leading_words(question: str, way: str | None) -> None:
    from router.stages.serving import asks_one_way

    assert asks_one_way(question) == way


def test_a_tool_that_switches_whichever_way_things_are_is_told_from_one_that_is_told_which_way() -> None:
    from router.stages.serving import toggles

    def tool(name: str, description: str, **props: dict[str, object]) -> Capability:
        return Capability(backend="b", name=name, description=description,
                          input_schema={"type": "object", "properties": props})

    assert toggles(tool("toggle-simulated-logging", "Toggles simulated, random-leveled logging on or off."))
    assert toggles(tool("lights", "Toggle the kitchen light.", room={"type": "string"}))
    assert toggles(tool("toggleLight", "Switches the light."))
    # Told which way, it is a setter; naming a toggle's state is no toggle.
    assert not toggles(tool("toggle_light", "Toggle a light.", on={"type": "boolean"}))
    assert not toggles(tool("set_mode", "Toggles the mode.", mode={"enum": ["on", "off"]}))
    assert not toggles(tool("get_status", "Says whether logging is toggled on."))
    assert toggles(tool("logging", "This tool toggles the simulated logging."))
    assert not toggles(tool("logging", "This tool toggles the logging.", on={"type": ["boolean", "null"]}))


def test_the_words_of_a_question_a_capability_is_not_about() -> None:
    roots = Capability(backend="everything", name="get-roots-list",
                       description="Lists the current MCP roots provided by the client.")
    # Stop words and words that only ask ("list", "show") need no echo; the rest are named as asked.
    assert unmatched_words(roots, "List the files in my home directory") == ["files", "home", "directory"]
    assert unmatched_words(roots, "Show me the roots the client provides") == []
    image = Capability(backend="everything", name="get-tiny-image", description="Returns a tiny MCP logo image.")
    assert unmatched_words(image, "Give me a sample image") == ["sample"]
    # What its server says it is for counts as its own words.
    assert unmatched_words(image, "Give me a sample image", "The MCP reference test server (sample prompts)") == []
    # An adverb of its words is about them; a word that only ends as one is not.
    calls = Capability(backend="desktop", name="get_recent_tool_calls", description="Get recent tool call history.")
    assert unmatched_words(calls, "What tools did I call recently?") == []
    assert unmatched_words(calls, "Which calls came from Italy?") == ["came", "italy"]


def test_a_tool_tells_the_time_now_when_its_texts_say_so_and_it_takes_no_time_or_date() -> None:
    from router.stages.serving import tells_the_time_now
    from router.values import Capability

    def tool(name: str, description: str, *params: str) -> Capability:
        return Capability(backend="t", name=name, description=description, input_schema={
            "type": "object", "properties": {p: {"type": "string"} for p in params}})

    assert tells_the_time_now(tool("get_current_time", "Get current time in a specific timezone", "timezone"))
    assert tells_the_time_now(tool("getCurrentDatetime", "Returns the date and time in a zone", "tz"))
    assert not tells_the_time_now(tool("convert_time", "Convert time between timezones", "time", "source_timezone"))
    assert not tells_the_time_now(tool("time_at", "The current time, or at a date", "timezone", "date"))
    assert not tells_the_time_now(tool("get_current_time", "The current time", "timezone", "offset_hours"))
    # Tools that start from the current time to tell something else: a forecast, a calendar.
    assert not tells_the_time_now(tool("get_forecast", "Forecast from the current time for the next N days", "days"))
    assert not tells_the_time_now(tool("list_events", "Events starting from the current time", "calendar"))


@pytest.mark.parametrize(("question", "other"), [
    ("What was the time in Tokyo yesterday at noon?", True), ("What time will it be in Tokyo tomorrow?", True),
    ("Convert 3pm London time to Mars time", True),
    # A time from now, a part of today, a date with slashes, the sun's hours, a holiday, an event's time.
    ("What time will it be in Tokyo in 3 hours?", True), ("What time is it in Tokyo 30 minutes from now?", True),
    ("Tell me the time in Los Angeles this morning", True), ("What will the time be in London on 3/30?", True),
    ("What time does the sun set in Paris?", True), ("What time is it in India on Christmas?", True),
    ("What time was it in London at the start of the year?", True), ("Tell me the time in Tokyo in 45 mins", True),
    ("What's the time in Tokyo in 1.5 hours?", True), ("What will the time be in Tokyo 2 hours from right now?", True),
    ("What was the time in Tokyo earlier today?", True), ("Will it be dark already in Oslo at 9pm?", True),
    ("What time do I have to leave Tokyo?", True),
    # About now, though a time or a day is in it; and numbers that are no time of day.
    ("Is it Friday in Sydney yet?", False), ("Is it after 5pm in London now?", False),
    ("Connect to 127.0.0.1:8080; what time is it in Tokyo?", False), ("What time is it in Tokyo?", False),
    ("What's the time in New York right now?", False), ("What time zone is Tokyo in?", False),
    ("What time is it on Christmas Island?", False),
    ("What time do they have in Tokyo?", False), ("Show the time in Tokyo in 12/24 hour format", False),
])
def test_a_question_about_another_time_than_now_is_not_answered_by_the_time_now(question: str, other: bool) -> None:
    from router.request import Request
    from router.stages.serving import NOT_NOW, Arguments
    from router.values import Capability

    now = Capability(backend="time", name="get_current_time", description="Get current time in a specific timezone",
                     read_only=True, input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}})
    assert (Arguments(Request(question=question)).unserved(now) == NOT_NOW) is other


def test_a_tool_that_answers_as_of_now_takes_no_date_and_speaks_of_no_other_time() -> None:
    from router.stages.clocks import answers_as_of_now
    from router.values import Capability

    def tool(name: str, description: str, *params: str) -> Capability:
        return Capability(backend="t", name=name, description=description, input_schema={
            "type": "object", "properties": {p: {"type": "string"} for p in params}})

    assert answers_as_of_now(tool("getExchangeRates", "Retrieve real-time currency exchange rates", "base", "symbols"))
    assert answers_as_of_now(tool("latest_get", "Get rates for all supported currencies", "base"))
    assert answers_as_of_now(tool("current_weather", "The weather in a city", "city"))
    assert not answers_as_of_now(tool("historical_get", "Get historical exchange rate data", "base", "date"))
    assert not answers_as_of_now(tool("rates", "Get the current rates, or those of a given date", "base"))
    assert not answers_as_of_now(tool("weather", "Current weather and forecasts", "city"))
    assert not answers_as_of_now(tool("rates", "Get the latest rates", "base", "start_date"))
    assert not answers_as_of_now(tool("holidays", "Get the current holidays", "countryCode", "year"))
    assert not answers_as_of_now(tool("convert", "Convert an amount from one currency to another", "from", "to"))


@pytest.mark.parametrize(("question", "other"), [
    # ToolAlpaca's 1Forge: "the exchange rate data for USD to JPY from October 1, 2021, to November 30, 2021" was
    # answered with today's rates.
    ("Get the USD to JPY rate from October 1, 2021, to November 30, 2021", True),
    ("What was the USD to EUR rate yesterday?", True), ("What was the rate 3 days ago?", True),
    ("What was the USD to EUR rate in 2019?", True), ("USD to EUR rate for last week", True),
    ("What is the USD to EUR rate?", False), ("What is the USD to EUR rate now?", False),
    ("Get the rates for 2019 models of cars", False),
])
def test_a_question_about_another_day_is_not_answered_as_of_now(question: str, other: bool) -> None:
    from router.request import Request
    from router.stages.serving import TODAY, Arguments
    from router.values import Capability

    live = Capability(backend="fx", name="getExchangeRates", description="Retrieve real-time currency exchange rates",
                      read_only=True, input_schema={"type": "object", "properties": {"base": {"type": "string"}}})
    assert (Arguments(Request(question=question)).unserved(live) == TODAY) is other
