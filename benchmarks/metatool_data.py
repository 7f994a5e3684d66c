"""An independent check of routing: MetaTool's ToolE questions, in the format routing_accuracy.py reads.

    python benchmarks/metatool_data.py OUT_DIR [--mirror-root /work/.mirror] [--sample 2000] [--seed 14]
    python benchmarks/routing_accuracy.py OUT_DIR --no-scale --model all-MiniLM-L6-v2 --model ...

ToolE (HowieHwong/MetaTool, MIT) has 199 tools, ChatGPT plugins each described in one or two
sentences, and 20,614 questions labelled with the one tool that answers them. No model or setting
of the router was trained or tuned on it, so it checks choices made on LiveMCPBench and ToolAlpaca.
Each tool becomes a server with that one tool (its description on the tool, as a plugin has no
other). Reads the repository at a pinned commit from a bare git copy (`fetch` it first), so the
raw data never enters this repository. Writes OUT_DIR/catalog.json and a seeded sample of the
questions in OUT_DIR/queries.jsonl.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.retriever_data import Source, write_routing_set

METATOOL = {"repo": "HowieHwong/MetaTool", "commit": "35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb",
            "licence": "MIT", "role": "independent check"}


def convert(source: Source, sample: int, seed: int) -> tuple[list[dict], list[dict]]:
    descriptions = json.loads(source.read("dataset/plugin_des.json"))
    catalog = [{"name": name, "description": "", "tools": [{"name": name, "description": text,
                                                             "input_schema": {"type": "object", "properties": {}}}]}
               for name, text in sorted(descriptions.items())]
    rows = [r for r in csv.DictReader(io.StringIO(source.read("dataset/data/all_clean_data.csv")))
            if r["Tool"] in descriptions and r["Query"].strip()]
    random.Random(seed).shuffle(rows)
    queries = [{"query": r["Query"], "gold_tools": [{"tool": r["Tool"], "servers": [r["Tool"]]}],
                "gold_servers": [r["Tool"]]} for r in rows[:sample]]
    return catalog, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--mirror-root", default="/work/.mirror")
    parser.add_argument("--sample", type=int, default=2000, help="questions to keep (seeded)")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    catalog, queries = convert(Source(Path(args.mirror_root), METATOOL), args.sample, args.seed)
    write_routing_set(Path(args.out_dir), catalog, queries, {"source": METATOOL, "seed": args.seed})


if __name__ == "__main__":
    main()
