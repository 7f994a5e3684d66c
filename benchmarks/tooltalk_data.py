"""A small catalog nobody tuned for: Microsoft's ToolTalk, in the format routing_accuracy.py reads.

    python benchmarks/tooltalk_data.py OUT_DIR [--mirror-root /work/.mirror]
    python benchmarks/routing_accuracy.py OUT_DIR --no-scale

ToolTalk (microsoft/ToolTalk, MIT) has 28 tools in 7 plugins (account, alarm, calendar, email, message,
reminder, weather), each a Python class with a description and parameters, and 78 hand-written
conversations whose assistant turns carry the calls that answer them. Each plugin becomes a server with
its tools; each assistant turn that calls a tool becomes a question (the user's turn before it) labelled
with the tools it called. A user's turn often leans on the conversation before it ("Yes, go ahead"), which
no router sees, so the figures are a floor. Neither the router's model nor its settings saw it. Reads the
repository at a pinned commit from a bare git copy (`fetch` it first); the raw data never enters this
repository.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.retriever_data import Source, convert_command

TOOLTALK = {"repo": "microsoft/ToolTalk", "commit": "e05f4ce6132c80ed33392b81535b077d56ab28fd",
            "licence": "MIT", "role": "independent check"}
PLUGINS = ("account", "alarm", "calendar", "email", "message", "reminder", "weather")


def _tools(module: str) -> list[dict]:
    """The API classes of one plugin's module: name, description and parameters (a class's own, else its
    parent's), read without running it; abstract ones (`ABC` among their bases) are not tools."""
    fields_of: dict[str, dict[str, ast.expr]] = {"API": {}}
    tools = []
    for node in ast.parse(module).body:
        bases = [getattr(b, "id", "") for b in node.bases] if isinstance(node, ast.ClassDef) else []
        parent = next((b for b in bases if b in fields_of), None)
        if parent is None:
            continue
        own = {t.id: stmt.value for stmt in node.body if isinstance(stmt, ast.Assign)
               for t in stmt.targets if isinstance(t, ast.Name)}
        fields = fields_of[node.name] = {**fields_of[parent], **own}
        if "ABC" in bases or "description" not in fields:
            continue
        params = ast.literal_eval(fields["parameters"]) if "parameters" in fields else {}
        props = {k: {"type": v.get("type", "string"), "description": v.get("description", "")}
                 for k, v in params.items()}
        tools.append({"name": node.name, "description": ast.literal_eval(fields["description"]),
                      "input_schema": {"type": "object", "properties": props,
                                       "required": [k for k, v in params.items() if v.get("required")]}})
    return tools


def convert(source: Source) -> tuple[list[dict], list[dict]]:
    catalog = [{"name": p, "description": "", "tools": _tools(source.read(f"src/tooltalk/apis/{p}.py"))}
               for p in PLUGINS]
    server_of = {t["name"]: s["name"] for s in catalog for t in s["tools"]}
    queries = []
    for path in source.list("data/easy") + source.list("data/tooltalk"):
        said = ""
        for turn in json.loads(source.read(path))["conversation"]:
            if turn["role"] == "user":
                said = turn["text"]
                continue
            called = list(dict.fromkeys(a["request"]["api_name"] for a in turn.get("apis") or ()
                                        if a["request"]["api_name"] in server_of))
            if called and said.strip():
                queries.append({"query": said, "gold_tools": [{"tool": t, "servers": [server_of[t]]} for t in called],
                                "gold_servers": list(dict.fromkeys(server_of[t] for t in called))})
                said = ""  # a later call in the same exchange answers the same words: counted once
    return catalog, queries


def main() -> None:
    convert_command(__doc__ or "", TOOLTALK, convert)


if __name__ == "__main__":
    main()
