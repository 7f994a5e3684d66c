"""A catalog nobody tuned for: Gorilla's APIBench, in the format routing_accuracy.py reads.

    python benchmarks/apibench_data.py OUT_DIR [--mirror-root /work/.mirror]
    python benchmarks/routing_accuracy.py OUT_DIR --no-scale

APIBench (ShishirPatil/gorilla, Apache-2.0) describes the models of Hugging Face, TensorFlow Hub and
PyTorch Hub (1,157 distinct), each an API with a domain ("Video Classification"), a functionality and a
description, and asks 1,785 held-out questions ("What is an API that can classify sports activities in
videos?") labelled with the one model that answers them. Each hub's domain ("Hugging Face Text
Classification") becomes a server holding that domain's models as its tools, so a question is routed right
when it reaches its domain; the labelled model is one of many that could serve, so the tool figures are a
floor. Neither the router's model nor its settings saw it (the model's training took the same
repository's BFCL function-calling set, other questions about other functions). Reads the repository at a
pinned commit from a bare git copy (`fetch` it first); the raw data never enters this repository.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.retriever_data import Source, convert_command

APIBENCH = {"repo": "ShishirPatil/gorilla", "commit": "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8",
            "licence": "Apache-2.0", "role": "independent check"}
# api file -> (eval file, the hub's name for its servers)
HUBS = {"huggingface": ("huggingface", "Hugging Face"), "tensorflowhub": ("tensorflow", "TensorFlow Hub"),
        "torchhub": ("torchhub", "PyTorch Hub")}
_INSTRUCTION = re.compile(r"###Instruction:\s*(.*?)\s*(?:###|$)", re.S)


def _key(api: dict) -> tuple[str, str]:
    # TF-Hub models share one call (`hub.KerasLayer(url)`) but not a name; names repeat across hubs.
    return str(api.get("api_name", "")), str(api.get("api_call", ""))


def _tool(api: dict, name: str) -> dict:
    args = api.get("api_arguments")
    props = {str(k): {"description": str(v)} for k, v in args.items()} if isinstance(args, dict) else {}
    text = " ".join(str(api.get(k) or "") for k in ("functionality", "description")).strip()
    return {"name": name, "description": text, "input_schema": {"type": "object", "properties": props}}


def convert(source: Source) -> tuple[list[dict], list[dict]]:
    servers: dict[str, list[dict]] = {}
    name_of: dict[tuple[str, str], tuple[str, str]] = {}  # api key -> (server, tool name)
    for api_file, (_, hub) in HUBS.items():
        for line in source.read(f"data/api/{api_file}_api.jsonl").splitlines():
            if not line.strip():
                continue
            api = json.loads(line)
            if _key(api) in name_of:
                continue
            server = f"{hub} {api.get('domain') or 'other'}"
            tools = servers.setdefault(server, [])
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(api.get("api_name", "")))[:60] or "api"
            while any(t["name"] == name for t in tools):
                name += "_"
            tools.append(_tool(api, name))
            name_of[_key(api)] = (server, name)
    queries = []
    for eval_file, _ in HUBS.values():
        for row in map(json.loads, filter(str.strip, source.read(f"data/apibench/{eval_file}_eval.json").splitlines())):
            found = _INSTRUCTION.search(str(row.get("code", "")))
            gold = name_of.get(_key(row.get("api_data") or {}))
            if found and gold and found.group(1).strip():
                server, tool = gold
                queries.append({"query": found.group(1).strip(), "gold_tools": [{"tool": tool, "servers": [server]}],
                                "gold_servers": [server]})
    catalog = [{"name": s, "description": "", "tools": tools} for s, tools in sorted(servers.items())]
    return catalog, queries


def main() -> None:
    convert_command(__doc__ or "", APIBENCH, convert)


if __name__ == "__main__":
    main()
