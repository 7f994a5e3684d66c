"""Routing accuracy and decision latency on a labelled MCP catalog (LiveMCPBench format).

    python benchmarks/routing_accuracy.py ../shared/benchmarks/livemcpbench [--limit N] [--json OUT]
        [--model all-MiniLM-L6-v2 --model all-MiniLM-L6-v2-tool-retrieval]

DATA_DIR holds `catalog.json` (servers with tools) and `queries.jsonl` (questions with `gold_tools`
and/or `gold_servers`). Servers that list no tools are ranked by their own descriptions (a catalog of
descriptions only reports the server metrics); `--descriptions-only` drops every tool to measure that.
Every method runs the router's own `CatalogIndex` with the local embedding model, its fusion weight
self-tuned as the router does (`hybrid_fixed_alpha`: the configured alpha instead; `--no-self-tune` turns
the tuning off for every method); decision latency includes embedding the query. A second pass
replicates the catalog to about 5,000 tools (suffixed copies) to show how latency and accuracy scale.
With several `--model`s (local models shipped in models/) every model runs every method in the same
run; the first one fills the top-level JSON keys, and `models` holds each model's results. `--alpha-oracle`
adds how far any weighting of the two retrievers could go: each recall at the best alpha for the catalog, and
with each question's own best alpha (an oracle, JSON key `alpha_oracle`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.retrieval.embeddings import CachedEmbedder, EmbeddingCache, LocalMiniLM
from router.retrieval.hybrid import InMemoryVectorStore
from router.retrieval.text import spelled
from router.settings import EmbeddingSettings, RoutingSettings
from router.values import Capability, Catalog

COPY = "~copy"


@dataclass
class Query:
    text: str
    gold_tools: list[tuple[str, set[str]]]  # (tool name, servers listing it)
    gold_servers: set[str]


def load(data_dir: Path) -> tuple[list[Catalog], list[Query]]:
    raw = json.loads((data_dir / "catalog.json").read_text(encoding="utf-8"))
    catalogs = []
    for server in raw:
        caps = tuple(
            Capability(backend=server["name"], name=t["name"], description=t.get("description") or "",
                       input_schema=t.get("input_schema") or {})
            for t in server.get("tools") or []
        )
        catalogs.append(Catalog(backend=server["name"], version="1", description=server.get("description") or "",
                                capabilities=caps))
    queries = []
    for line in (data_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        tools = [(g["tool"], set(g.get("servers") or [])) for g in q.get("gold_tools") or []]
        servers = set(q.get("gold_servers") or ([q["server"]] if q.get("server") else []))
        queries.append(Query(q["query"], tools, servers))
    return catalogs, queries


def replicate(catalogs: list[Catalog], target_tools: int) -> list[Catalog]:
    total = sum(len(c.capabilities) for c in catalogs) or 1
    copies = max(1, round(target_tools / total))
    out = list(catalogs)
    for i in range(1, copies):
        for c in catalogs:
            name = f"{c.backend}{COPY}{i}"
            caps = tuple(replace(t, backend=name, name=f"{t.name}{COPY}{i}") for t in c.capabilities)
            out.append(replace(c, backend=name, capabilities=caps))
    return out


def base(name: str) -> str:
    return name.split(COPY)[0]


METHODS = {
    "bm25": {"alpha": 0.0, "method": "flat"},
    "dense": {"alpha": 1.0, "method": "flat"},
    "hybrid": {"method": "flat"},
    "hybrid_two_level": {"method": "two_level"},
    "default": {},
}


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def metrics_for(index: CatalogIndex, queries: list[Query], embedder: Encoder, method: dict,
                settings: RoutingSettings, hits: dict[str, list[bool]] | None = None) -> dict[str, float]:
    """Recall, nDCG and decision latency; `hits`, when given, receives each recall's hit or miss per question
    (server) or per gold tool mentioned (tool)."""
    has_tools = any(len(c.capabilities) for c in index.texts.catalogs)
    server_hits: dict[int, list[bool]] = {1: [], 3: [], 5: []}
    tool_hits: dict[int, list[bool]] = {5: [], 10: []}
    ndcgs = []
    latencies = []
    alpha = method.get("alpha")
    kind = method.get("method", settings.method)
    for q in queries:
        t0 = time.perf_counter()
        qvec = embedder.encode([spelled(q.text)])[0]  # timed: a decision embeds its query, as the router reads it
        ranked = index.search(q.text, qvec, 10, method=kind, alpha=alpha)
        servers = index.rank_servers(q.text, qvec, 5, method=kind, alpha=alpha)
        latencies.append((time.perf_counter() - t0) * 1000)
        top_servers = [base(s.backend) for s in servers]
        if q.gold_servers:
            for k in server_hits:
                server_hits[k].append(bool(q.gold_servers & set(top_servers[:k])))
        if has_tools and q.gold_tools:
            top = [(base(r.capability.name), base(r.capability.backend)) for r in ranked]
            for name, servers_of in q.gold_tools:
                for k in tool_hits:
                    tool_hits[k].append(any(t == name and s in servers_of for t, s in top[:k]))
            rel = [1.0 if any(t == n and s in so for n, so in q.gold_tools) else 0.0 for t, s in top[:5]]
            dcg = sum(r / math.log2(i + 2) for i, r in enumerate(rel))
            ideal = sum(1 / math.log2(i + 2) for i in range(min(len(q.gold_tools), 5)))
            ndcgs.append(dcg / ideal if ideal else 0.0)
        elif q.gold_servers:
            rel = [1.0 if s in q.gold_servers else 0.0 for s in top_servers[:5]]
            dcg = sum(r / math.log2(i + 2) for i, r in enumerate(rel))
            ideal = sum(1 / math.log2(i + 2) for i in range(min(len(q.gold_servers), 5)))
            ndcgs.append(dcg / ideal if ideal else 0.0)
    lat = sorted(latencies)
    recall = {f"server_R@{k}": v for k, v in server_hits.items()}
    if has_tools and tool_hits[5]:
        recall.update({f"tool_R@{k}": v for k, v in tool_hits.items()})
    if hits is not None:
        hits.update(recall)
    out = {name: sum(v) / max(len(v), 1) for name, v in recall.items()}
    out["ndcg@5"] = statistics.fmean(ndcgs) if ndcgs else 0.0
    out["p50_ms"] = lat[len(lat) // 2]
    out["p99_ms"] = lat[min(len(lat) - 1, math.ceil(len(lat) * 0.99) - 1)]
    return out


ALPHAS = tuple(i / 10 for i in range(11))


class _Remembered:
    """The model, each question embedded once: the oracle ranks every question at each of the weights."""

    def __init__(self, model: Encoder) -> None:
        self.model, self.vectors = model, {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        for t in texts:
            if t not in self.vectors:
                self.vectors[t] = self.model.encode([t])[0]
        return np.stack([self.vectors[t] for t in texts])


def alpha_oracle(index: CatalogIndex, queries: list[Query], model: Encoder,
                 settings: RoutingSettings) -> dict[str, dict[str, float]]:
    """How far any weighting of the two retrievers could go. For each recall: the best single alpha for the catalog
    (on both levels, flat) and an oracle that picks each question's (each gold tool's) best one of `ALPHAS`."""
    remembered = _Remembered(model)
    per_alpha = []
    for a in ALPHAS:
        hits: dict[str, list[bool]] = {}
        metrics_for(index, queries, remembered, {"alpha": a, "method": "flat"}, settings, hits)
        per_alpha.append(hits)
    out = {}
    for name in per_alpha[0]:
        grid = np.array([h[name] for h in per_alpha], dtype=bool)
        if grid.shape[1]:
            best = int(np.argmax(grid.mean(axis=1)))
            out[name] = {"best_alpha": ALPHAS[best], "best": float(grid[best].mean()),
                         "oracle": float(grid.any(axis=0).mean())}
    return out


async def build(catalogs: list[Catalog], embedder: CachedEmbedder, settings: RoutingSettings) -> CatalogIndex:
    texts = CatalogTexts.build(catalogs)
    tool_vecs = await embedder.embed(texts.tool_dense) if texts.tool_dense else None
    server_vecs = await embedder.embed(texts.server_dense)
    index = CatalogIndex(texts, tool_vecs, server_vecs, settings)
    await index.tune_alpha(embedder.embed)  # as the router does when it builds its index
    return index


def table(title: str, results: dict[str, dict[str, float]]) -> str:
    cols = ["server_R@1", "server_R@3", "server_R@5", "tool_R@5", "tool_R@10", "ndcg@5", "p50_ms", "p99_ms"]
    cols = [c for c in cols if any(c in r for r in results.values())]
    width = max(18, *(len(n) + 2 for n in results))
    lines = [title, f"{'method':<{width}}" + "".join(f"{c:>12}" for c in cols)]
    for name, r in results.items():
        lines.append(f"{name:<{width}}" + "".join(f"{r.get(c, float('nan')):>12.3f}" for c in cols))
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict:
    catalogs, queries = load(Path(args.data_dir))
    if args.descriptions_only:
        catalogs = [replace(c, capabilities=()) for c in catalogs]
    if args.limit:
        queries = queries[: args.limit]
    overrides = {k: v for k, v in (("alpha", args.alpha), ("server_weight", args.server_weight)) if v is not None}
    if args.no_self_tune:
        overrides["self_tune_alpha"] = False
    settings = RoutingSettings(**overrides)  # overrides: for sweeping the defaults, not for reporting them
    models = args.model or [EmbeddingSettings().model]
    report: dict = {"data_dir": str(args.data_dir), "queries": len(queries), "defaults": {
        "alpha": settings.alpha, "self_tune_alpha": settings.self_tune_alpha, "server_weight": settings.server_weight,
        "method": settings.method}, "models": {}}
    for model_name in models:
        model = LocalMiniLM(model=model_name, compute=args.compute)
        embedder = CachedEmbedder(model, EmbeddingCache(Path(args.cache_dir).expanduser()))
        model.encode(["warm up"])
        per_model: dict = {"model_id": model.model_id, "compute": model.compute}
        for label, cats in (("catalog", catalogs), ("replicated", replicate(catalogs, args.scale_tools))):
            if label == "replicated" and args.no_scale:
                continue
            index = await build(cats, embedder, settings)
            # hybrid_fixed_alpha: the configured alpha on both levels, as before self-tuning.
            methods = dict(METHODS, hybrid_fixed_alpha={"alpha": settings.alpha, "method": "flat"})
            results = {name: metrics_for(index, queries, model, m, settings) for name, m in methods.items()}
            key = "methods" if label == "catalog" else "replicated"
            per_model[key] = results
            per_model[f"{key}_alpha"] = {"tools": index.tools.alpha, "servers": index.servers.alpha}
            per_model[f"{key}_tools"] = len(index)
            stand_ins = sum(c.server_level for c in index.texts.capabilities)
            print(table(f"\n{model_name}, {label}: {len(cats)} servers, {len(index) - stand_ins} tools"
                        + (f" ({stand_ins} servers by description only)" if stand_ins else "")
                        + f", {len(queries)} queries; alpha tools {index.tools.alpha:g}, servers "
                        + f"{index.servers.alpha:g}", results))
            if args.alpha_oracle and label == "catalog":
                oracle = per_model["alpha_oracle"] = alpha_oracle(index, queries, model, settings)
                print("\nany weighting of the two retrievers (alpha on both levels, flat):")
                for name, o in oracle.items():
                    print(f"  {name:<11} default {results['default'][name]:.3f}   best for the catalog "
                          f"{o['best']:.3f} (alpha {o['best_alpha']:g})   best for each question {o['oracle']:.3f}")
        report["models"][model_name] = per_model
    first = report["models"][models[0]]
    report.update({k: v for k, v in first.items() if k != "model_id"})
    if len(models) > 1:
        print(table("\ndefault method, by model", {m: r["methods"]["default"] for m, r in report["models"].items()}))
    report["vector_store"] = vector_store_scaling()
    # The flat keys the issue asks for: method name -> metrics (first model).
    report.update(report["methods"])
    return report


def vector_store_scaling(sizes: tuple[int, ...] = (1_000, 5_000, 50_000, 200_000), dim: int = 384) -> dict:
    """Exact top-200 search over the in-memory matrix, per catalog size: where it stops being enough."""
    rng = np.random.default_rng(0)
    out = {}
    print(f"\nin-memory vector store, exact top-200 by cosine ({dim} dims)")
    print(f"{'vectors':>10}{'p50 ms':>10}{'MB':>8}")
    for n in sizes:
        m = rng.standard_normal((n, dim)).astype(np.float32)
        store = InMemoryVectorStore(m / np.linalg.norm(m, axis=1, keepdims=True))
        q = m[0] / np.linalg.norm(m[0])
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            store.top(q, 200)
            times.append((time.perf_counter() - t0) * 1000)
        out[str(n)] = {"p50_ms": round(statistics.median(times), 3), "mb": round(m.nbytes / 2**20, 1)}
        print(f"{n:>10}{out[str(n)]['p50_ms']:>10.2f}{out[str(n)]['mb']:>8.1f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--scale-tools", type=int, default=5000)
    parser.add_argument("--no-scale", action="store_true", help="skip the replicated-catalog pass")
    parser.add_argument("--descriptions-only", action="store_true",
                        help="drop every server's tools: route on server descriptions alone")
    parser.add_argument("--model", action="append", help="local model in models/ (repeat to compare; "
                        "default: the configured embeddings.model)")
    parser.add_argument("--compute", choices=["auto", "int8", "float"], default="auto",
                        help="embeddings.compute: how the local model multiplies (auto: by processor)")
    parser.add_argument("--alpha", type=float, help="override routing.alpha (a sweep)")
    parser.add_argument("--server-weight", type=float, help="override routing.server_weight (a sweep)")
    parser.add_argument("--alpha-oracle", action="store_true",
                        help="also: the best alpha for the catalog and for each question (an upper bound for fusion)")
    parser.add_argument("--no-self-tune", action="store_true", help="routing.self_tune_alpha off: alpha as configured")
    parser.add_argument("--cache-dir", default=str(Path(__file__).resolve().parents[1] / ".state" / "bench"))
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"\nwrote {args.json_out}")


if __name__ == "__main__":
    main()
