"""Retrieval quality and speed of the RAG knowledge-base server on the bundled documents.

    python benchmarks/rag.py [--docs examples/docs] [--questions benchmarks/rag_questions.jsonl] [--json OUT]

The labelled set names, for each question, the document sections (source + heading) that answer
it; they are resolved to chunk ids after chunking, so the set survives changes of chunk size.
Reported: Recall@k (share of a question's answering chunks in the top k), Hit@1 and MRR for dense
only (alpha=1), BM25 only (alpha=0) and the hybrid default; the ingest rate (chunks embedded per
second, embedding included, local all-MiniLM-L6-v2 on one thread); the no-op re-ingest time; and
the latency of a whole query (question embedding, retrieval, extractive answer), p50 and p95.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp_router.servers.knowledge_base.engine import EngineSettings, RagEngine  # noqa: E402
from mcp_router.servers.knowledge_base.ingest import Chunking  # noqa: E402
from mcp_router.servers.knowledge_base.store import ChunkStore  # noqa: E402
from router.retrieval.embeddings import LocalMiniLM  # noqa: E402


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, round(p / 100 * (len(v) - 1)))]


def load_questions(path: Path, engine: RagEngine) -> list[tuple[str, set[str]]]:
    chunks, _ = engine.store.load()
    by_section: dict[tuple[str, str], set[str]] = {}
    for c in chunks:
        by_section.setdefault((c.source, str(c.metadata.get("heading", ""))), set()).add(c.id)
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        item = json.loads(line)
        relevant: set[str] = set()
        for ans in item["answers"]:
            ids = by_section.get((ans["source"], ans["heading"]))
            if not ids:
                raise SystemExit(f"{path}:{n}: no chunk for {ans['source']} > {ans['heading']!r}")
            relevant |= ids
        out.append((item["question"], relevant))
    return out


async def evaluate(engine: RagEngine, questions: list[tuple[str, set[str]]], alpha: float, k: int
                   ) -> dict[str, float]:
    recall, hit1, rr = [], [], []
    for question, relevant in questions:
        ranked = [c["id"] for c in await engine.search(question, max(k, 10), alpha, None, [])]
        recall.append(len(relevant & set(ranked[:k])) / len(relevant))
        hit1.append(1.0 if ranked and ranked[0] in relevant else 0.0)
        rr.append(next((1 / i for i, cid in enumerate(ranked, 1) if cid in relevant), 0.0))
    return {f"recall@{k}": statistics.fmean(recall), "hit@1": statistics.fmean(hit1),
            "mrr": statistics.fmean(rr)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    model = LocalMiniLM()
    load_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="rag-bench-") as tmp:
        engine = RagEngine(ChunkStore(tmp), model, settings=EngineSettings(alpha=args.alpha),
                           chunking=Chunking(size=args.chunk_size, overlap=args.chunk_overlap))
        model.encode(["warm-up"])
        report = await engine.ingest(args.docs)
        again = await engine.ingest(args.docs)
        questions = load_questions(Path(args.questions), engine)
        quality = {}
        modes = (("dense (alpha=1)", 1.0), ("bm25 (alpha=0)", 0.0),
                 (f"hybrid (alpha={args.alpha})", args.alpha))
        for name, alpha in modes:
            quality[name] = await evaluate(engine, questions, alpha, args.k)
        latencies = []
        for question, _ in questions:
            await engine.query(question, k=args.k)
        for _ in range(args.repeat):
            for question, _ in questions:
                t0 = time.perf_counter()
                await engine.query(question, k=args.k)
                latencies.append((time.perf_counter() - t0) * 1000)
    return {
        "documents": report.documents, "chunks": report.chunks_total, "questions": len(questions),
        "k": args.k,
        "chunk_size": args.chunk_size, "chunk_overlap": args.chunk_overlap, "model_load_s": round(load_s, 3),
        "ingest_s": report.seconds, "ingest_chunks_per_s": round(report.chunks_embedded / report.seconds, 1),
        "reingest_unchanged_ms": round(again.seconds * 1000, 1), "reingest_embedded": again.chunks_embedded,
        "query_ms_p50": round(pct(latencies, 50), 2), "query_ms_p95": round(pct(latencies, 95), 2),
        "quality": {name: {m: round(v, 3) for m, v in q.items()} for name, q in quality.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default=str(ROOT / "examples" / "docs"))
    parser.add_argument("--questions", default=str(ROOT / "benchmarks" / "rag_questions.jsonl"))
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--chunk-size", type=int, default=800)
    parser.add_argument("--chunk-overlap", type=int, default=120)
    parser.add_argument("--repeat", type=int, default=5, help="passes over the questions for the latency")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    k = result["k"]
    print(f"{result['questions']} questions over {result['chunks']} chunks of {result['documents']} "
          f"documents (chunk size {result['chunk_size']}, overlap {result['chunk_overlap']})\n")
    print(f"| retrieval | Recall@{k} | Hit@1 | MRR |\n|---|---|---|---|")
    for name, q in result["quality"].items():
        print(f"| {name} | {q[f'recall@{k}']:.3f} | {q['hit@1']:.3f} | {q['mrr']:.3f} |")
    print(f"\n| speed | value |\n|---|---|\n"
          f"| ingest, embedding included | {result['ingest_chunks_per_s']} chunks/s "
          f"({result['ingest_s']} s) |\n"
          f"| re-ingest, nothing changed | {result['reingest_unchanged_ms']} ms, "
          f"{result['reingest_embedded']} chunks embedded |\n"
          f"| query (embed, retrieve, extractive answer) | p50 {result['query_ms_p50']} ms, "
          f"p95 {result['query_ms_p95']} ms |\n"
          f"| model load | {result['model_load_s']} s |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
