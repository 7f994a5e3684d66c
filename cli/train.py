"""`mcp-router train --from-feedback`: fine-tune the retrieval model on the examples the router collected.

    mcp-router train --from-feedback --config router.yaml [--out models/NAME] [--python .venv-train/bin/python]

The examples in `state_dir/feedback.sqlite` become (question, positive, negative) triples: the
positive is the document of a capability that was right for the question; the negative is one that
was wrong for it, else another capability's document (of the same backend when it has others).
`benchmarks/train_retriever.py` then fine-tunes the model on them (it needs torch, so `--python`
names an environment that has it; the router itself stays torch-free), and the ONNX model and
tokenizer are written to `--out`. A folder under models/ is what `embeddings.model` names: set it
to the folder's name and restart the router.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import mcp_router.models
from mcp_router import examples
from mcp_router.models import model_dir
from router.errors import ConfigError
from router.learning.examples import FEEDBACK_FILE, Example, ExampleStore
from router.retrieval.embeddings import BASE_MODEL
from router.settings.file import load_settings

ROOT = Path(__file__).resolve().parents[1]
TRAIN_SCRIPT = ROOT / "benchmarks" / "train_retriever.py"  # in a checkout of the project
MODELS = Path(mcp_router.models.__file__).resolve().parent


def export_triples(examples: list[Example], out_dir: Path, seed: int = 14) -> dict[str, int]:
    """Write out_dir/train.jsonl and manifest.json; returns the counts."""
    rng = random.Random(seed)
    documents = {e.key: e.document for e in examples if e.document}
    by_question: dict[str, dict[int, list[str]]] = defaultdict(lambda: {1: [], -1: []})
    for e in examples:
        if e.document:
            by_question[e.question][e.label].append(e.key)
    triples = []
    for question, labelled in by_question.items():
        for positive in dict.fromkeys(labelled[1]):
            wrong = [k for k in labelled[-1] if k != positive]
            others = [k for k in documents if k != positive and k not in labelled[1]]
            # A sibling of the same backend is the harder (more useful) negative when there is one.
            siblings = [k for k in others if k.split("/", 1)[0] == positive.split("/", 1)[0]]
            negative = wrong[0] if wrong else (rng.choice(siblings or others) if others else None)
            if negative is not None:
                triples.append({"query": question, "positive": documents[positive], "negative": documents[negative]})
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "train.jsonl").open("w", encoding="utf-8") as fh:
        for t in triples:
            fh.write(json.dumps(t, ensure_ascii=False) + "\n")
    counts = {"examples": len(examples), "questions": len(by_question), "triples": len(triples),
              "capabilities": len(documents)}
    (out_dir / "manifest.json").write_text(json.dumps({"source": "feedback", "counts": counts}, indent=1))
    return counts


def cmd_train(args: argparse.Namespace) -> int:
    if not args.from_feedback:
        print("mcp-router train: only --from-feedback is supported", file=sys.stderr)
        return 2
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"mcp-router: {exc}", file=sys.stderr)
        return 2
    store_path = Path(settings.state_dir) / FEEDBACK_FILE
    if not store_path.is_file():
        print(f"mcp-router train: no examples yet ({store_path} does not exist)", file=sys.stderr)
        return 1
    store = ExampleStore(store_path, settings.learning.max_examples_per_capability)
    examples = store.all()
    store.close()
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="mcp-router-train-"))
    counts = export_triples(examples, work / "data")
    print(f"exported {counts['triples']} triples from {counts['examples']} examples to {work / 'data'}")
    if counts["triples"] == 0:
        print("mcp-router train: nothing to train on (an example needs a capability document and a negative)",
              file=sys.stderr)
        return 1
    if args.export_only:
        return 0
    command = [args.python, str(TRAIN_SCRIPT), str(work / "data"), str(work / "run"), "--steps", str(args.steps)]
    print("running " + " ".join(command), flush=True)
    try:
        failed = subprocess.run(command, cwd=ROOT).returncode
    except OSError as exc:  # no such interpreter, or not one that can run
        print(f"mcp-router train: --python {args.python}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if failed:
        print(f"mcp-router train: training failed; {args.python} needs torch, sentence-transformers, onnx "
              f"(see {TRAIN_SCRIPT.relative_to(ROOT)})", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else MODELS / f"{settings.embeddings.model}-feedback"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "run" / "model.onnx", out / "model.onnx")
    shutil.copy(model_dir(BASE_MODEL) / "tokenizer.json", out / "tokenizer.json")
    shutil.copy(work / "run" / "training.json", out / "training.json")
    if out.resolve().parent == MODELS.resolve():
        print(f"model written to {out}; set embeddings.model: {out.name} and restart the router")
    else:
        print(f"model written to {out}; copy it to models/{out.name}/, set embeddings.model: {out.name} and restart")
    return 0


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("train", help="fine-tune the retrieval model on the collected examples")
    t.add_argument("--from-feedback", action="store_true", required=True,
                   help="train on the examples in state_dir/feedback.sqlite")
    t.add_argument("--config", default=str(examples.CONFIG))
    t.add_argument("--out", help="model folder to write (default models/<embeddings.model>-feedback)")
    t.add_argument("--python", default=sys.executable, help="an interpreter with torch (the training environment)")
    t.add_argument("--steps", type=int, default=200)
    t.add_argument("--work-dir", help="where the triples and training run go (default: a temporary folder)")
    t.add_argument("--export-only", action="store_true", help="write the triples, do not train")
