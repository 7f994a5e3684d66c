"""Values a question writes out as a tool takes them (`router/stages/written.py`): a web address for a parameter
that takes one, an arithmetic expression for one that takes that."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments, derive_with_leftovers
from router.stages.written import GLOB, PATH, takes_expression, takes_url
from router.values import Capability


def tool(parameter: str, description: str = "") -> Capability:
    return Capability(backend="b", name="t", input_schema={"type": "object", "required": [parameter], "properties": {
        parameter: {"type": "string", "description": description}}})


def derived(parameter: str, question: str) -> object:
    got = derive_arguments(tool(parameter), question)
    return got[0][parameter] if isinstance(got, tuple) else None


@pytest.mark.parametrize(("question", "url"), [
    ("Fetch https://example.com.", "https://example.com"),
    ("Summarize www.example.org/page, please", "https://www.example.org/page"),
    ("Open (https://a.example/c?d=1)", "https://a.example/c?d=1"), ("Read 'http://x.example/a b'", "http://x.example/a"),
    # Brackets of its own stay, a closing quote and a link's markdown do not.
    ("Fetch https://en.wikipedia.org/wiki/Mercury_(planet)", "https://en.wikipedia.org/wiki/Mercury_(planet)"),
    ("Fetch \u201chttps://example.com/a\u201d", "https://example.com/a"),
    ("Fetch [https://a.example/x](https://a.example/x)", "https://a.example/x"), ("Open https://", None),
    # A host of a common top-level domain written bare gets https's scheme, as an address bar gives it ("Download the
    # page at example.com" was a 422); an e-mail address, a file name, a path or a word with a dot in it is none.
    ("Fetch example.com", "https://example.com"), ("Open docs.python.org/3/library/re.html?",
                                                   "https://docs.python.org/3/library/re.html"),
    ("Mail bob@example.com", None), ("Read notes.txt", None), ("See example.community", None),
    ("Node.js is great", None), ("Read /srv/notes.txt", None), ("What is new?", None),
    # A domain of mail addresses is no page to read ("List users whose email ends with example.com" fetched it).
    ("List users whose email ends with example.com", None), ("Which users have an example.com address?", None),
    ("Send an email to bob about https://example.com", "https://example.com"),
])
def test_a_web_address_the_question_writes_goes_to_a_parameter_for_one(question: str, url: str | None) -> None:
    assert derived("url", question) == url


@pytest.mark.parametrize(("question", "expression"), [
    ("Calculate (3 + 4) * 12", "(3 + 4) * 12"), ("What is 17 * 23?", "17 * 23"), ("What is 2^10?", "2^10"),
    ("What is 5 - 3", "5 - 3"), ("What is -5 + 2?", "-5 + 2"), ("17\u00d723", "17*23"), ("3/4", "3/4"),
    ("On 2024-01-05, what is 3+4?", "3+4"),
    # A date, a range of pages, a lone number and unbalanced brackets are none.
    ("Pages 10-12", None), ("What happened on 2024-01-05?", None), ("What is 42?", None), ("(1 + 2", None),
    # Numbers of other kinds, and words or numbers next to it that change it, give none rather than a part.
    ("What is 1,000 + 2,000?", None), ("What is 1,5 + 2,5", None), ("What is 1e3 + 2", None),
    ("What is 1:30 + 2:45?", None), ("What is 0x10 + 1", None), ("Calculate sqrt(16) + 2", None),
    ("Compute 2 (3+4)", None), ("Simplify x**2 + 2*x + 1", None), ("Differentiate x^2 + 3x", None),
    ("Evaluate 3 + 4 squared", None), ("What is 10 + 5 minus 3", None), ("12 mod 5 + 1", None),
    ("7.5% of 200 + 3", None),
])
def test_an_arithmetic_expression_goes_to_a_parameter_for_one(question: str, expression: str | None) -> None:
    assert derived("expression", question) == expression


@pytest.mark.parametrize(("name", "description", "url", "expression"), [
    ("url", "", True, False), ("image_url", "", True, False), ("pageLink", "", True, False),
    ("target", "The URL to fetch", True, False), ("expression", "", False, True), ("formula", "", False, True),
    ("input", "A mathematical expression", False, True),
    ("curl", "", False, False), ("url_count", "", False, False), ("query", "", False, False),
])
def test_a_parameter_takes_a_web_address_or_an_expression_by_its_name_or_description(
        name: str, description: str, url: bool, expression: bool) -> None:
    assert (takes_url(name, description), takes_expression(name, description)) == (url, expression)


def test_a_second_expression_is_left_unused_so_one_call_does_not_answer_half_of_the_question() -> None:
    got, left = derive_with_leftovers(tool("expression"), "What are 3+4 and 5*6?")
    assert got[0] == {"expression": "3+4"} and left == ["5*6"]  # type: ignore[index]


def test_a_free_text_name_described_as_an_expression_gets_the_expression_not_the_question() -> None:
    calculator = tool("input", "A mathematical expression, e.g. 2*(3+4)")
    assert derive_arguments(calculator, "What is 17 * 23?")[0] == {"input": "17 * 23"}


def test_a_long_run_of_brackets_or_spaces_is_read_in_linear_time() -> None:
    import time

    started = time.perf_counter()
    for question in ("Calculate " + "(" * 32_000, "Calculate 1" + " " * 32_000 + "?", "1+" * 16_000 + "x"):
        assert derived("expression", question) is None
    assert time.perf_counter() - started < 2  # seconds: quadratic, these took 20-30 s each


def test_a_question_of_many_sql_keywords_is_read_in_linear_time() -> None:
    import time

    from router.stages.serving import value_kinds

    started = time.perf_counter()
    for question in ("SELECT " * 4_500, "WITH a " * 4_500):  # no FROM: each SELECT was read to the end
        assert value_kinds(question) == {} and derived("sql", question) is None
    for gap in (" ", "."):  # a statement's end was looked for at every place, and every way to read the gap
        assert derived("sql", "Run SELECT * FROM t" + gap * 20_000 + "x").endswith("x")
    assert time.perf_counter() - started < 2  # seconds: these took 3.7, 4.5 and minutes


def test_a_description_that_also_calls_it_a_question_keeps_the_question_whole() -> None:
    ask = tool("input", "A question, or a mathematical expression to compute")
    question = "What is the population of France?"
    assert derive_arguments(ask, question)[0] == {"input": question}


def test_a_number_the_question_gives_another_parameter_by_its_name_is_not_the_first_optional_ones() -> None:
    # The official fetch server: `max_length` comes first, but the question sets where to start.
    fetch = Capability(backend="fetch", name="fetch", input_schema={
        "type": "object", "required": ["url"],
        "properties": {"url": {"type": "string"}, "max_length": {"type": "integer"},
                       "start_index": {"type": "integer"}}})
    for question in ("Fetch https://example.com with start_index 5000", "Fetch https://example.com from index 5000"):
        assert derive_arguments(fetch, question)[0] == {"url": "https://example.com", "start_index": 5000}
    assert derive_arguments(fetch, "Fetch https://example.com, max length 300")[0] == {
        "url": "https://example.com", "max_length": 300}


def test_a_file_name_pattern_goes_to_a_parameter_for_one_and_is_no_path() -> None:
    # The official filesystem server's `search_files` needs a glob; "**/*.txt" was read as the path "/*.txt".
    search = Capability(backend="fs", name="search_files", input_schema={
        "type": "object", "required": ["path", "pattern"],
        "properties": {"path": {"type": "string"}, "pattern": {"type": "string"}}})
    assert derive_arguments(search, "Find files named *.txt in /srv")[0] == {"path": "/srv", "pattern": "*.txt"}
    assert derive_arguments(search, "List every file matching **/*.py under /srv/app")[0] == {
        "path": "/srv/app", "pattern": "**/*.py"}
    assert isinstance(derive_arguments(search, "Search /srv for markdown files"), ArgumentsRequired)
    # A wildcard makes no path of what it is in: "Delete /tmp/*.log" names no file.
    assert [m.group(0) for m in PATH.finditer("Delete /tmp/*.log and read '/srv/*.md'")] == []
    # Nor is the part before a wildcard: "app.log.*" is the rotated logs, not the live one.
    delete = Capability(backend="fs", name="delete_file", input_schema={
        "type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}})
    for question in ("Delete /var/log/app.log.*", "rm ~/notes.*", "Delete '/srv/a b.*'"):
        assert isinstance(derive_arguments(delete, question), ArgumentsRequired), question
    # A question's closing mark is not the pattern's.
    for question in ("In /srv, which files match *.md?", "Find the files in /srv named *.md.",
                     "Search /srv for *.md: all"):
        assert derive_arguments(search, question)[0] == {"path": "/srv", "pattern": "*.md"}, question
    # The whole word or none: the first half of "test_*.py|*_test.py", or "*" of "*.md.", would find other files.
    assert [m.group(0) for m in GLOB.finditer("Search for test_*.py|*_test.py")] == []
    assert [m.group(0) for m in GLOB.finditer("Calculate 3 * 4, or 2*3")] == []


def test_a_repository_written_out_gives_its_owner_and_name_together_or_not_at_all() -> None:
    # The GitHub server's tools take `owner` and `repo`: "the open issues of octocat/hello-world" was a 422.
    issues = Capability(backend="github", name="list_issues", input_schema={
        "type": "object", "required": ["owner", "repo"], "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"},
            "state": {"type": "string", "enum": ["open", "closed", "all"]}}})
    assert derive_arguments(issues, "List the open issues of octocat/hello-world.")[0] == {
        "owner": "octocat", "repo": "hello-world", "state": "open"}
    # No repository: two small words, a file's path, a web address, a folder.
    for question in ("List issues and/or pull requests", "List issues in docs/guide.md",
                     "List issues of https://github.com/a/b", "List issues of /srv/repo"):
        assert isinstance(derive_arguments(issues, question), ArgumentsRequired), question
    # A name alone is none: the repository is given whole or not at all.
    named = Capability(backend="github", name="get_repo", input_schema={
        "type": "object", "required": ["repo"], "properties": {"repo": {"type": "string"}}})
    assert isinstance(derive_arguments(named, "Show octocat/hello-world"), ArgumentsRequired)
