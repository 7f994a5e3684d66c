"""Values a question writes out as a tool takes them (`router/stages/written.py`): a web address for a parameter
that takes one, an arithmetic expression for one that takes that."""

from __future__ import annotations

import pytest

from router.stages.arguments import derive_arguments, derive_with_leftovers
from router.stages.written import takes_expression, takes_url
from router.values import Capability


def tool(parameter: str, description: str = "") -> Capability:
    return Capability(backend="b", name="t", input_schema={"type": "object", "required": [parameter], "properties": {
        parameter: {"type": "string", "description": description}}})


def derived(parameter: str, question: str) -> object:
    got = derive_arguments(tool(parameter), question)
    return got[0][parameter] if isinstance(got, tuple) else None


@pytest.mark.parametrize(("question", "url"), [
    ("Fetch https://example.com.", "https://example.com"),
    ("Summarize www.example.org/page, please", "www.example.org/page"),
    ("Open (https://a.example/c?d=1)", "https://a.example/c?d=1"), ("Read 'http://x.example/a b'", "http://x.example/a"),
    # No scheme and no "www.", and a path, are no web address.
    ("Fetch example.com", None), ("Read /srv/notes.txt", None), ("What is new?", None),
])
def test_a_web_address_the_question_writes_goes_to_a_parameter_for_one(question: str, url: str | None) -> None:
    assert derived("url", question) == url


@pytest.mark.parametrize(("question", "expression"), [
    ("Calculate (3 + 4) * 12", "(3 + 4) * 12"), ("What is 17 * 23?", "17 * 23"), ("What is 2^10?", "2^10"),
    ("What is 5 - 3", "5 - 3"), ("What is -5 + 2?", "-5 + 2"), ("17\u00d723", "17*23"), ("3/4", "3/4"),
    ("On 2024-01-05, what is 3+4?", "3+4"),
    # A date, a range of pages, a lone number and unbalanced brackets are none.
    ("Pages 10-12", None), ("What happened on 2024-01-05?", None), ("What is 42?", None), ("(1 + 2", None),
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
