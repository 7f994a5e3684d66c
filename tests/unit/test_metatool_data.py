"""The MetaTool converter: one server per tool, a seeded sample of labelled questions, and a catalog that
the routing benchmark reads."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.metatool_data import convert
from benchmarks.routing_accuracy import load

DESCRIPTIONS = {"WeatherTool": "Forecasts and current weather for any city.",
                "ExchangeTool": "Convert currencies at today's rates."}
ROWS = ("Query,Tool\n"
        "Will it rain in Oslo tomorrow?,WeatherTool\n"
        "How many yen is 20 euros?,ExchangeTool\n"
        "What is the forecast for Lima?,WeatherTool\n"
        "Book me a table,RestaurantTool\n"  # a tool without a description: dropped
        " ,WeatherTool\n")


class FakeSource:
    def read(self, path: str) -> str:
        return {"dataset/plugin_des.json": json.dumps(DESCRIPTIONS),
                "dataset/data/all_clean_data.csv": ROWS}[path]


def test_each_tool_is_a_server_and_every_question_names_a_described_tool(tmp_path: Path) -> None:
    catalog, queries = convert(FakeSource(), sample=10, seed=14)
    assert [(s["name"], [t["name"] for t in s["tools"]]) for s in catalog] == [
        ("ExchangeTool", ["ExchangeTool"]), ("WeatherTool", ["WeatherTool"])]
    assert sorted(q["query"] for q in queries) == ["How many yen is 20 euros?", "What is the forecast for Lima?",
                                                  "Will it rain in Oslo tomorrow?"]
    assert all(q["gold_servers"] == [q["gold_tools"][0]["tool"]] for q in queries)
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    catalogs, loaded = load(tmp_path)
    assert len(catalogs) == 2 and {q.text for q in loaded} == {q["query"] for q in queries}


def test_the_sample_is_seeded() -> None:
    first = convert(FakeSource(), sample=2, seed=3)[1]
    assert first == convert(FakeSource(), sample=2, seed=3)[1] and len(first) == 2
