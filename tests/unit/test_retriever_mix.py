"""The training mix: API-Bank's API records parse, and multi-step requests never mark a needed tool wrong."""

from __future__ import annotations

import random
from dataclasses import dataclass

from benchmarks.retriever_mix import _description, _input_parameters, compose_multistep


@dataclass
class Ex:
    query: str
    toolset: str
    gold: list[str]
    also: tuple[str, ...] = ()


API_INFO = '''description = "Query the weather of a city on a date."
input_parameters = {
    'city': {'type': 'str', 'description': 'The city.'},
    'date': {'type': 'str', 'description': 'The date.'}
}
output_parameters = {
    'weather': {'type': 'str', 'description': 'The forecast.'}
}'''


def test_an_api_record_gives_its_description_and_only_its_input_parameters() -> None:
    assert _description(API_INFO) == "Query the weather of a city on a date."
    assert set(_input_parameters(API_INFO)) == {"city", "date"}
    assert _input_parameters('description = "x"\ninput_parameters = {}\n}') == {}
    assert _input_parameters('description = "x"\ninput_parameters = {\n}') == {}


def test_multistep_parts_come_from_different_toolsets_and_exclude_each_other_from_negatives() -> None:
    examples = [Ex(f"do task {i} for me", f"server{i % 4}", [f"tool{i}"]) for i in range(12)]
    examples.append(Ex("do task 0 for me", "server9", ["extra"]))  # one request needing two servers
    out = compose_multistep(examples, 50, random.Random(3), Ex)
    assert out
    by_query: dict[str, list[Ex]] = {}
    for e in out:
        by_query.setdefault(e.query, []).append(e)
    for query, parts in by_query.items():
        toolsets = [p.toolset for p in parts]
        assert len(set(toolsets)) == len(toolsets) >= 2
        for p in parts:
            assert set(p.also) == set(toolsets) - {p.toolset}
            assert f"task {p.gold[0].removeprefix('tool')} " in query or p.gold == ["extra"]
        if any(p.gold == ["extra"] for p in parts):  # the two-server request keeps both of its parts
            assert {"server0", "server9"} <= set(toolsets)


def test_the_same_seed_composes_the_same_requests() -> None:
    examples = [Ex(f"request number {i}", f"s{i}", [f"t{i}"]) for i in range(20)]
    first = compose_multistep(examples, 10, random.Random(7), Ex)
    assert first == compose_multistep(examples, 10, random.Random(7), Ex)
    assert first != compose_multistep(examples, 10, random.Random(8), Ex)
