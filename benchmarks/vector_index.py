"""Where exact search stops fitting a decision, and what an approximate index gives in its place.

    python benchmarks/vector_index.py DATA_DIR [DATA_DIR ...] [--sizes 20000,100000,200000,500000]
        [--queries 300] [--json OUT]

The router's dense half takes the top `routing.dense_top_n` (200) capabilities by cosine over every
capability vector (`InMemoryVectorStore`: exact, float32), then fuses BM25 over those. Per catalog size N
this measures one question's cost of that exact top-200 and of three FAISS indexes that could stand in
its place (`pip install faiss-cpu`; not a dependency of the router), each on one thread, built on two:
an exact scan of 8-bit vectors (`IndexScalarQuantizer`), an inverted file (`IndexIVFFlat`, 4 sqrt(N)
lists, 16 or 32 searched) and a graph (`IndexHNSWFlat`, M 32, efConstruction 200, efSearch 400). For
each: p50 / p99, build time, and recall as ann-benchmarks counts it (of its top 200 and top 10, the
share at least as close as the exact 200th and 10th, within 1e-3, so a near copy found in place of its
twin counts). Beside them, BM25's scores over N documents: the half a vector index does not shorten.

Vectors: the capability texts and questions of the DATA_DIRs (LiveMCPBench format, embedded with the
shipped model through the benchmark cache). A catalog of N is the real capability vectors, each
repeated with Gaussian noise (cosine to its source 0.80 to 0.95) until there are N: a large catalog
holds many near copies of the same kinds of tools. Their sparse texts repeat the same way. The questions
are the real ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.routing_accuracy import load
from router.retrieval.catalog import CatalogTexts
from router.retrieval.embeddings import CachedEmbedder, EmbeddingCache, LocalMiniLM
from router.retrieval.hybrid import BM25, InMemoryVectorStore
from router.retrieval.text import question_tokens, tokenize
from router.settings import EmbeddingSettings, RoutingSettings

TOP = RoutingSettings().dense_top_n


async def real_vectors(dirs: list[str], cache_dir: str) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """(capability vectors, their sparse texts, question vectors, questions) of the data sets."""
    embedder = CachedEmbedder(LocalMiniLM(model=EmbeddingSettings().model), EmbeddingCache(Path(cache_dir)))
    docs: list[str] = []
    sparse: list[str] = []
    questions: list[str] = []
    for d in dirs:
        catalogs, queries = load(Path(d))
        texts = CatalogTexts.build(catalogs)
        docs += texts.tool_dense
        sparse += texts.tool_sparse
        questions += [q.text for q in queries]
    return await embedder.embed(docs), sparse, await embedder.embed(questions), questions


def grow(base: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` unit vectors: `base` first, then noisy copies of it (cosine to the source 0.80 to 0.95)."""
    dim = base.shape[1]
    src = base[np.arange(n) % len(base)]
    target = rng.uniform(0.80, 0.95, size=(n, 1))
    sigma = np.sqrt((1 / target**2 - 1) / dim)  # |noise|^2 ~ dim * sigma^2 gives that cosine
    noisy = src + rng.standard_normal(src.shape).astype(np.float32) * sigma.astype(np.float32)
    noisy[: len(base)] = base[: min(n, len(base))]
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def recall(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Of the approximate top k (cosines, best first), the share as close as the exact k-th (ann-benchmarks'
    k-NN recall, with its 1e-3 tolerance): a near copy in place of its twin counts as found."""
    return float(np.mean(found[:k] >= exact[k - 1] - 1e-3))


def p50(times: list[float]) -> float:
    return round(statistics.median(times), 3)


def candidates(m: np.ndarray, rng: np.random.Generator) -> dict[str, tuple[Any, float]]:
    """FAISS indexes that could stand behind `VectorStore`, built over `m`: name -> (index, build seconds)."""
    import faiss

    n, dim = m.shape
    faiss.omp_set_num_threads(2)  # building is once per catalog change: both cores
    built: dict[str, tuple[Any, float]] = {}
    t0 = time.perf_counter()
    sq8 = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    sq8.train(m)
    sq8.add(m)
    built["int8 flat"] = sq8, time.perf_counter() - t0
    t0 = time.perf_counter()
    nlist = int(4 * np.sqrt(n))
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    ivf.train(m[rng.choice(n, min(n, 50 * nlist), replace=False)])
    ivf.add(m)
    built["ivf"] = ivf, time.perf_counter() - t0
    t0 = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 200
    hnsw.add(m)
    hnsw.hnsw.efSearch = 2 * TOP
    built["hnsw"] = hnsw, time.perf_counter() - t0
    faiss.omp_set_num_threads(1)  # a replica answers one question per core, as the router does
    return built


def timed_search(search: Any, qvecs: np.ndarray, truth: list[np.ndarray]) -> dict[str, float]:
    times, top_all, top10 = [], [], []
    for q, sims in zip(qvecs, truth, strict=True):
        t0 = time.perf_counter()
        found = search(q)
        times.append((time.perf_counter() - t0) * 1000)
        top_all.append(recall(found, sims, TOP))
        top10.append(recall(found, sims, 10))
    return {"p50_ms": p50(times), "p99_ms": round(float(np.percentile(times, 99)), 3),
            "recall_top200": round(float(np.mean(top_all)), 4), "recall_top10": round(float(np.mean(top10)), 4)}


def measure(n: int, base: np.ndarray, sparse: list[str], qvecs: np.ndarray, questions: list[str],
            rng: np.random.Generator) -> dict:
    m = grow(base, n, rng)
    exact = InMemoryVectorStore(m)
    truth = [exact.top(q, TOP)[1] for q in qvecs]
    out: dict[str, Any] = {"vectors": n, "mb": round(m.nbytes / 2**20, 1),
                           "exact": timed_search(lambda q: exact.top(q, TOP)[1], qvecs, truth)}
    for name, (index, build_s) in candidates(m, rng).items():
        for nprobe in (16, 32) if name == "ivf" else (None,):
            label = name
            if nprobe is not None:  # the lists searched: recall against time
                index.nprobe = nprobe
                label = f"ivf nprobe {nprobe}"
            out[label] = {**timed_search(lambda q, index=index: index.search(q[None, :], TOP)[0][0], qvecs, truth),
                          "build_s": round(build_s, 1)}
    corpus = [tokenize(sparse[i % len(sparse)]) or ["<empty>"] for i in range(n)]
    bm25 = BM25(corpus)
    bm25_ms = []
    for text in questions:
        t0 = time.perf_counter()
        bm25.scores(question_tokens(text))
        bm25_ms.append((time.perf_counter() - t0) * 1000)
    out["bm25_p50_ms"] = p50(bm25_ms)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dirs", nargs="+")
    parser.add_argument("--sizes", default="20000,100000,200000,500000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--cache-dir", default=str(Path(__file__).resolve().parents[1] / ".state" / "bench"))
    args = parser.parse_args()
    base, sparse, qvecs, questions = asyncio.run(real_vectors(args.data_dirs, args.cache_dir))
    rng = np.random.default_rng(0)
    pick = rng.choice(len(qvecs), size=min(args.queries, len(qvecs)), replace=False)
    qvecs, questions = qvecs[pick], [questions[i] for i in pick]
    print(f"{len(base)} real capability vectors, {len(qvecs)} questions; top {TOP} by cosine, one thread")
    print("per question: p50 / p99 ms; recall of the top 200 and top 10 (share as close as the exact 200th / 10th)")
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        r = measure(n, base, sparse, qvecs, questions, rng)
        rows.append(r)
        print(f"\n{n} vectors ({r['mb']} MB float32); BM25 over as many documents {r['bm25_p50_ms']:.2f} ms p50")
        for name, v in r.items():
            if isinstance(v, dict):
                build = f"  built in {v['build_s']:.1f} s" if "build_s" in v else ""
                print(f"  {name:<16}{v['p50_ms']:>8.2f} /{v['p99_ms']:>7.2f} ms   recall {v['recall_top200']:.3f}"
                      f" / {v['recall_top10']:.3f}{build}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"real_vectors": len(base), "questions": len(qvecs),
                                                   "top": TOP, "sizes": rows}, indent=1))


if __name__ == "__main__":
    main()
