"""What the router would do with each question of a catalog, without calling anything: the plan's outcome.

    python benchmarks/plan_outcomes.py DATA [--json OUT] [--show]

DATA is a folder in the format `routing_accuracy.py` reads (LiveMCPBench, or a converted held-out set).
Every question goes through the router's dry run, which decides and plans as `/v1/query` would (no LLM,
every backend healthy), and is counted by what would happen: a call to a gold backend, a call to another
backend, or a refusal (404 nothing likely enough or nothing that can serve the question, 409 too close or
not likely enough to act, 422 arguments the question does not give), with the rule that refused it. `--show`
prints each question whose plan is a call or a refusal by the plan stage's own rules, with the call's arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.routing_accuracy import load
from router.core import Router
from router.request import Request
from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.retrieval.embeddings import CachedEmbedder, EmbeddingCache, LocalMiniLM
from router.settings import RouterSettings
from router.values import BackendStatus, CallOutcome

# The plan stage's own refusals, told apart by their messages.
RULES = {"takes nothing from the question": "takes nothing", "would leave unused": "leaves values",
         "no capability that fits it may change": "reads only", "of a kind no capability": "value kind"}


class Healthy:
    """Every backend healthy, no history: the plan is decided on relevance alone."""

    def __init__(self, names: list[str]) -> None:
        self._statuses = {n: BackendStatus(name=n, kind="mcp_stdio", transport="stdio", health="healthy")
                          for n in names}

    def statuses(self) -> dict[str, BackendStatus]:
        return self._statuses

    def perf(self) -> dict:
        return {}

    def record(self, backend: str, intent: str, outcome: CallOutcome, caller: str | None = None) -> None:
        pass


async def outcomes(data: Path, cache_dir: str) -> list[dict]:
    catalogs, queries = load(data)
    settings = RouterSettings()
    model = LocalMiniLM(model=settings.embeddings.model)
    embedder = CachedEmbedder(model, EmbeddingCache(Path(cache_dir).expanduser()))
    router = Router(settings, executor=None, embed=embedder.embed, stats=Healthy([c.backend for c in catalogs]))
    texts = CatalogTexts.build(catalogs)
    index = CatalogIndex(texts, await embedder.embed(texts.tool_dense), await embedder.embed(texts.server_dense),
                         settings.routing)
    await index.tune_alpha(embedder.embed)
    router.set_catalogs(catalogs, index)
    rows = []
    for q in queries:
        shown = await router.route(Request(question=q.text))  # the dry run: what /v1/query would do
        if shown.calls:
            right = shown.calls[0].split("/", 1)[0] in q.gold_servers
            rows.append({"question": q.text, "outcome": "call, gold backend" if right else "call, other backend",
                         "capability": shown.calls[0], "arguments": shown.arguments})
            continue
        rule = next((name for text, name in RULES.items() if text in shown.message), None)
        rows.append({"question": q.text, "outcome": f"{shown.status} {shown.error}" + (f" ({rule})" if rule else ""),
                     "message": shown.message})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--json", help="write every question's outcome here")
    parser.add_argument("--show", action="store_true", help="print the calls and the plan stage's refusals")
    parser.add_argument("--cache-dir", default=".state/bench")
    args = parser.parse_args()
    rows = asyncio.run(outcomes(args.data_dir, args.cache_dir))
    counts = Counter(r["outcome"] for r in rows)
    print(f"{'outcome':<50} {'questions':>9}")
    for outcome, n in sorted(counts.items()):
        print(f"{outcome:<50} {n:>9}")
    print(f"{'all':<50} {len(rows):>9}")
    if args.show:
        for r in rows:
            if r["outcome"].startswith("call") or "(" in r["outcome"]:
                print(f"\n{r['outcome']}: {r['question'][:160]!r}\n  {r.get('capability') or r['message'][:200]}"
                      + (f" {json.dumps(r['arguments'])[:160]}" if "arguments" in r else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"counts": counts, "questions": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
