"""Learning into the representation: does fine-tuning the retrieval model on collected feedback pay where the
nearest-example learner does not?

    python benchmarks/feedback_training.py DATA_DIR --python .venv-train/bin/python [--seeds 0] [--per-server 5]
        [--steps 100] [--keep 1.0] [--rehearse DIR --repeat N] [--json OUT]

DATA_DIR is what `benchmarks/routing_accuracy.py` reads. For each seed the questions are shuffled and a
quarter of the servers gets no feedback, as in `benchmarks/feedback_curve.py` (the same seed gives the same
order and the same unfed servers). Each other server's first `--per-server` questions get the feedback a
user would give on the shipped router's answer (right: +1 for its choice; wrong: -1 for it and +1 for the
gold tool). From those examples `mcp-router train --from-feedback`'s triples are written and
`benchmarks/train_retriever.py` fine-tunes a model (under `--python`, an environment with torch). Server
R@1 is then measured on the questions nobody gave feedback on:
- `fed`: the fed servers' later questions (what "after five examples" measures);
- `unfed`: every question of the unfed servers (what learning may break), and the largest drop of one
  unfed server with at least five questions;
for the shipped model without and with the examples (the nearest-example learner at the shipped
settings), the untrained model fine-tuning starts from, and the fine-tuned model without and with them.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.feedback_curve import Replay, gold_of, replay_orders, seed_range, user_feedback
from benchmarks.routing_accuracy import build, load
from mcp_router.cli.train import MODELS, TRAIN_SCRIPT, export_triples
from router.learning.evidence import ExampleIndex
from router.learning.examples import Example
from router.retrieval.embeddings import BASE_MODEL, CachedEmbedder, EmbeddingCache, LocalMiniLM
from router.settings import EmbeddingSettings, RouterSettings


async def replay_with(model: str, catalogs: list, queries: list, cache: Path) -> Replay:
    embedder = CachedEmbedder(LocalMiniLM(model=model), EmbeddingCache(cache))
    settings = RouterSettings()
    index = await build(catalogs, embedder, settings.routing)
    return Replay(index, queries, list(await embedder.embed([q.text for q in queries])), settings)


def feedback(replay: Replay, catalogs: dict, order: list[int], unfed: set[str], per_server: int
             ) -> tuple[list[Example], list[int], list[int]]:
    """The examples a user gives on each fed server's first questions (answered without examples), and the
    questions left to measure on: the fed servers' later ones, every unfed server's."""
    examples: list[Example] = []
    seen: dict[str, int] = defaultdict(int)
    fed_later, unfed_questions = [], []
    for i in order:
        q = replay.queries[i]
        server = gold_of(q)[0]
        if server in unfed:
            unfed_questions.append(i)
            continue
        if seen[server] >= per_server:
            fed_later.append(i)
            continue
        seen[server] += 1
        examples += user_feedback(replay.decide(i, None), i, q, replay.vectors[i], catalogs, len(examples))
    return examples, fed_later, unfed_questions


def measure(replay: Replay, examples: list[Example], fed: list[int], unfed: list[int]) -> dict:
    """Server R@1 on the fed servers' later questions and on the unfed servers', per unfed server too."""
    settings = replay.settings
    index = ExampleIndex(examples, settings.learning, settings.routing.min_confidence) if examples else None

    def hit(i: int) -> bool:
        top = replay.top(i, index)
        return top is not None and top[0] in replay.queries[i].gold_servers

    per_server: dict[str, list[bool]] = defaultdict(list)
    for i in unfed:
        per_server[gold_of(replay.queries[i])[0]].append(hit(i))
    fed_hits = [hit(i) for i in fed]
    return {"fed_r1": round(sum(fed_hits) / max(1, len(fed_hits)), 4),
            "unfed_r1": round(sum(map(sum, per_server.values())) / max(1, len(unfed)), 4),
            "unfed_by_server": {s: sum(v) / len(v) for s, v in per_server.items()}}


def revectored(examples: list[Example], replay: Replay) -> list[Example]:
    """The examples with their questions' vectors from the replay's model (each question is one of its own)."""
    by_text = {q.text: replay.vectors[i] for i, q in enumerate(replay.queries)}
    return [dataclasses.replace(e, vector=by_text[e.question]) for e in examples]


def fine_tune(examples: list[Example], args: argparse.Namespace, work: Path, name: str) -> dict:
    """Train on the examples' triples; the model goes to models/NAME (removed by the caller)."""
    counts = export_triples(examples, work / "data")
    if args.rehearse:  # the data the shipped model was trained on, beside the feedback repeated
        taught = (work / "data" / "train.jsonl").read_text()
        rehearsed = (Path(args.rehearse) / "train.jsonl").read_text()
        (work / "data" / "train.jsonl").write_text(taught * args.repeat + rehearsed)
    command = [args.python, str(TRAIN_SCRIPT), str(work / "data"), str(work / "run"), "--steps", str(args.steps),
               "--threads", str(args.threads)] + (["--keep", str(args.keep)] if args.keep < 1 else [])
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    out = MODELS / name
    out.mkdir()
    shutil.copy(work / "run" / "model.onnx", out / "model.onnx")
    shutil.copy(MODELS / BASE_MODEL / "tokenizer.json", out / "tokenizer.json")
    return {**counts, **json.loads((work / "run" / "run.json").read_text())}


def gains(rows: dict[str, dict], unfed_min: int, sizes: dict[str, int]) -> None:
    """Each row's gain over the shipped model without examples, and its worst drop on an unfed server."""
    base = rows["shipped"]
    for row in rows.values():
        row["fed_gain"] = round(row["fed_r1"] - base["fed_r1"], 4)
        drops = [base["unfed_by_server"][s] - r for s, r in row["unfed_by_server"].items() if sizes[s] >= unfed_min]
        row["max_regression_unfed"] = round(max(drops, default=0.0), 4)


async def run(args: argparse.Namespace) -> dict:
    catalogs, queries = load(Path(args.data_dir))
    queries = [q for q in queries if q.gold_tools and q.gold_servers]
    by_backend = {c.backend: c for c in catalogs}
    cache = Path(args.cache_dir).expanduser()
    shipped = await replay_with(args.model, catalogs, queries, cache)
    untrained = await replay_with(BASE_MODEL, catalogs, queries, cache)  # where fine-tuning starts from
    sizes: dict[str, int] = defaultdict(int)
    for q in queries:
        sizes[gold_of(q)[0]] += 1
    results = []
    for seed, order, unfed in replay_orders(queries, seed_range(args.seeds), args.unfed_share):
        examples, fed, unfed_qs = feedback(shipped, by_backend, order, unfed, args.per_server)
        rows = {"shipped": measure(shipped, [], fed, unfed_qs), "untrained": measure(untrained, [], fed, unfed_qs),
                "shipped + examples": measure(shipped, examples, fed, unfed_qs)}
        name = f"feedback-training-{seed}"
        with tempfile.TemporaryDirectory() as work:
            try:
                training = fine_tune(examples, args, Path(work), name)
                tuned = await replay_with(name, catalogs, queries, Path(work) / "cache")
            finally:
                shutil.rmtree(MODELS / name, ignore_errors=True)
        rows["fine-tuned"] = measure(tuned, [], fed, unfed_qs)
        rows["fine-tuned + examples"] = measure(tuned, revectored(examples, tuned), fed, unfed_qs)
        gains(rows, args.unfed_min, sizes)
        results.append({"seed": seed, "examples": len(examples), "fed_questions": len(fed),
                        "unfed_questions": len(unfed_qs), "training": training, "rows": rows})
        print(f"seed {seed}: {len(examples)} examples ({training['triples']} triples, {training['seconds']} s of "
              f"training); measured on {len(fed)} later questions of fed servers, {len(unfed_qs)} of unfed ones")
        for label, r in rows.items():
            print(f"  {label:<24} fed R@1 {r['fed_r1']:.3f} ({r['fed_gain']:+.3f})  unfed R@1 {r['unfed_r1']:.3f}  "
                  f"max regression unfed {r['max_regression_unfed']:+.3f}")
    for r in results:
        for row in r["rows"].values():
            row.pop("unfed_by_server")
    return {"data_dir": args.data_dir, "model": args.model, "per_server": args.per_server, "steps": args.steps,
            "keep": args.keep, "rehearse": args.rehearse, "repeat": args.repeat, "seeds": args.seeds,
            "by_seed": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--python", required=True, help="an interpreter with torch (see train_retriever.py)")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--per-server", type=int, default=5, help="feedback events per fed server")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep", type=float, default=1.0, help="share of the training's change kept (--keep of "
                        "train_retriever.py; 1: all of it)")
    parser.add_argument("--rehearse", metavar="DIR", help="train on DIR/train.jsonl as well (what "
                        "`benchmarks/retriever_data.py` writes: the shipped model's training data)")
    parser.add_argument("--repeat", type=int, default=1, help="times the feedback triples enter the training data")
    parser.add_argument("--unfed-share", type=float, default=0.25)
    parser.add_argument("--unfed-min", type=int, default=5, help="questions an unfed server needs to count in "
                        "max_regression_unfed")
    parser.add_argument("--model", default=EmbeddingSettings().model)
    parser.add_argument("--cache-dir", default="~/.cache/mcp-router/embeddings")
    parser.add_argument("--json")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
