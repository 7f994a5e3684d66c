"""Smart tool selection on a labelled catalog (LiveMCPBench format): how many tools are cut, how
many of each query's gold tools are kept.

    python benchmarks/tool_selection.py ../shared/benchmarks/livemcpbench [--json OUT] [--share 0.2]

Runs the router's own `ToolSelector` (retrieval path; the LLM path needs a model) with the local
embedding model, one user message per query.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.routing_accuracy import build, load
from router.llm.selection import ToolSelector
from router.retrieval.embeddings import CachedEmbedder, EmbeddingCache, LocalMiniLM
from router.settings import EmbeddingSettings, RoutingSettings, ToolSelectionSettings


async def run(args: argparse.Namespace) -> dict:
    catalogs, queries = load(Path(args.data_dir))
    model = LocalMiniLM(model=EmbeddingSettings().model)
    embedder = CachedEmbedder(model, EmbeddingCache(Path(args.cache_dir).expanduser()))
    index = await build(catalogs, embedder, RoutingSettings())
    report: dict = {"queries": len(queries), "total_tools": len(index)}
    print(f"{len(catalogs)} servers, {len(index)} tools, {len(queries)} queries")
    print(f"{'tool share':>11}{'reduction':>11}{'gold kept':>11}{'queries all kept':>18}{'p50 ms':>9}")
    for share in args.share:
        selector = ToolSelector(ToolSelectionSettings(max_tool_share=share, max_servers=1000), model.embed)
        reductions, kept, complete, latencies = [], 0, 0, []
        mentions = 0
        for q in queries:
            sel = await selector.select(index, [{"role": "user", "content": q.text}])
            servers = set(sel.servers)
            reductions.append(sel.metrics["reduction_ratio"])
            latencies.append(sel.selection_ms)
            hits = [bool(so & servers) for _, so in q.gold_tools]
            kept += sum(hits)
            mentions += len(hits)
            complete += all(hits)
        row = {"reduction_ratio": round(statistics.fmean(reductions), 4), "gold_kept": round(kept / mentions, 4),
               "queries_all_gold_kept": round(complete / len(queries), 4),
               "p50_ms": round(statistics.median(latencies), 2)}
        report[str(share)] = row
        print(f"{share:>11.2f}{row['reduction_ratio']:>11.3f}{row['gold_kept']:>11.3f}"
              f"{row['queries_all_gold_kept']:>18.3f}{row['p50_ms']:>9.1f}")
    default = str(ToolSelectionSettings().max_tool_share)
    if default in report:
        report["default"] = report[default]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--share", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.5])
    parser.add_argument("--cache-dir", default=str(Path(__file__).resolve().parents[1] / ".state" / "bench"))
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
