"""The calculator example finds the arithmetic in a question, verb phrasings included."""

from __future__ import annotations

import pytest

from mcp_router.examples.servers.calculator import evaluate


@pytest.mark.parametrize(("question", "value"), [
    ("add 2 and 40", 42), ("Add 7 to 5 please", 12), ("what is the sum of 2 and 3?", 5),
    ("subtract 3 from 10", 7), ("multiply 6 by 7", 42), ("divide 10 by 4", 2.5),
    ("the difference between 10 and 4", 6), ("What is 12 times (3 + 4)?", 84), ("what is 15 percent of 80?", 12),
    ("2^10 / 4", 256), ("What is 1,000 plus 1?", 1001), ("Add two numbers 3 and 4", 7),
    ("Multiply the numbers 6 and 7", 42), ("Add 2, 3 and 4", 9), ("What's 3 squared?", 9),
    ("What is the log of 1000?", 3), ("the natural logarithm of 1", 0), ("sine of 0", 0), ("cos of 0 plus 1", 2),
    ("What is the sum of 3 and 4 and 5?", 12), ("sqrt 2", 2 ** 0.5), ("What is 100 divided by 7?", 100 / 7),
])
def test_the_arithmetic_of_a_question_is_evaluated(question: str, value: float) -> None:
    assert evaluate(question)[1] == pytest.approx(value)


def test_numbers_with_no_operation_between_them_are_an_error_not_an_answer() -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    with pytest.raises(ToolError, match="no operation found"):
        evaluate("the numbers 3 and 4")  # once "3 = 3"
    with pytest.raises(ToolError, match="no operation found"):
        evaluate("Calculate the area of a circle with radius 3")  # once "3 = 3" too
    with pytest.raises(ToolError, match="leaves out 3 of"):
        evaluate("Multiply 6 by 7 and add 3")  # once "6 * 7 = 42"


def test_a_power_too_large_to_compute_in_a_moment_is_refused() -> None:
    """The server has one thread: a call that computed for seconds would hold every other caller's."""
    from mcp.server.mcpserver.exceptions import ToolError

    for question in ("((9**999)**999)**9", "2**5000", "(10**300)**400"):
        with pytest.raises(ToolError, match="exponent too large"):
            evaluate(question)
    assert evaluate("9**999")[1] == 9 ** 999


@pytest.mark.parametrize(("question", "answer"), [
    ("How many seconds are in 3 hours?", "3 hours = 10800 seconds"),
    ("How many minutes in a day?", "1 day = 1440 minutes"),
    ("how many pounds is 3 kg", "3 kg = 6.61387 pounds"), ("convert 5 km to miles", "5 km = 3.10686 miles"),
])
async def test_a_conversion_is_found_however_it_is_asked(question: str, answer: str) -> None:
    from mcp_router.examples.servers.calculator import convert_units

    assert await convert_units(question) == answer
