"""ToolAlpaca's APIs as a catalog: each function's parameters as the schema an MCP server in front of the API would
give them, required and typed as the API's documentation writes them."""

from __future__ import annotations

import json

from benchmarks.retriever_data import load_toolalpaca

API = {
    "Name": "Nager.Date", "Description": "Public holidays",
    "Function_Description": repr({
        "LongWeekend": 'Get long weekends for a given country\nParameters: {"year": "Required. integer. ", '
                       '"countryCode": "Required. string. Two-character country code.", "offset": "integer. "}\n'
                       "Output: the weekends",
        "getAirport": 'Parameters: {"icao_code": "Required. string. The ICAO code."}\nOutput: an airport',
        "tagged": 'Find cats\nParameters: {"tags": "Array[string]. Tags.", "filter": "Object. A filter."}',
        "components": "",
    }),
    "Instructions": repr(["Long weekends in Germany in 2024?"]),
    "Golden_Answers": repr([[{"Action": "LongWeekend"}]]),
}


class Mirror:
    def read(self, name: str) -> str:
        return json.dumps([API] if name.endswith("eval_real.json") else [])


def test_a_function_s_parameters_are_required_and_typed_as_its_documentation_writes_them() -> None:
    catalog, queries = load_toolalpaca(Mirror())  # type: ignore[arg-type]
    tools = {t["name"]: t for t in catalog[0]["tools"]}
    weekend = tools["LongWeekend"]["input_schema"]
    # Before, every parameter was an untyped optional one: 107 of 130 calls went out without the values they need.
    assert weekend["required"] == ["year", "countryCode"]
    assert [weekend["properties"][p]["type"] for p in ("year", "countryCode", "offset")] == ["integer", "string",
                                                                                             "integer"]
    assert tools["LongWeekend"]["description"] == "Get long weekends for a given country"
    # A description that opens with its parameters has them too (it was the whole text, and no parameter).
    assert tools["getAirport"]["input_schema"]["required"] == ["icao_code"]
    assert tools["getAirport"]["description"] == ""
    tagged = tools["tagged"]["input_schema"]["properties"]
    assert tagged["tags"]["type"] == "array" and tagged["tags"]["items"] == {"type": "string"}
    assert tagged["filter"]["type"] == "object" and "required" not in tools["tagged"]["input_schema"]
    assert tools["components"]["input_schema"] == {"type": "object", "properties": {}}
    assert queries[0]["gold_tools"] == [{"tool": "LongWeekend", "servers": ["Nager.Date"]}]
