"""`mcp-router train --from-feedback`: the collected examples become training triples and a model folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mcp_router.cli.main import main
from mcp_router.cli.train import export_triples
from router.learning.examples import FEEDBACK_FILE, Example, ExampleStore


def ex(name: str, label: int, question: str) -> Example:
    return Example(backend="b", kind="tool", name=name, label=label, question=question,
                   vector=np.ones(3, dtype=np.float32), document=f"{name} document")


def test_triples_take_the_wrong_capability_as_the_negative_else_another_one(tmp_path: Path) -> None:
    no_document = Example(backend="b", kind="tool", name="gone", label=1, question="q3", vector=np.ones(3))
    examples = [ex("right", 1, "q1"), ex("wrong", -1, "q1"), ex("other", 1, "q2"), no_document]
    counts = export_triples(examples, tmp_path)
    triples = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert {"query": "q1", "positive": "right document", "negative": "wrong document"} in triples
    q2 = next(t for t in triples if t["query"] == "q2")
    assert q2["positive"] == "other document" and q2["negative"] in ("right document", "wrong document")
    assert counts["triples"] == 2 and not any(t["query"] == "q3" for t in triples)


def config_with_feedback(tmp_path: Path) -> Path:
    """A config whose state holds a right and a wrong example of one question."""
    state = tmp_path / "state"
    store = ExampleStore(state / FEEDBACK_FILE, cap=10)
    store.add([ex("right", 1, "what time is it"), ex("wrong", -1, "what time is it")])
    store.close()
    config = tmp_path / "router.yaml"
    config.write_text(f"state_dir: {state}\nbackends: []\n")
    return config


def test_the_command_exports_trains_with_the_given_interpreter_and_writes_the_model_folder(tmp_path: Path) -> None:
    config = config_with_feedback(tmp_path)
    # Stands in for the torch environment: writes what train_retriever.py writes into its OUT_DIR.
    fake = tmp_path / "fake_python"
    fake.write_text(f"#!{sys.executable}\nimport sys, pathlib\nout = pathlib.Path(sys.argv[3]); "
                    "out.mkdir(parents=True)\n(out / 'model.onnx').write_bytes(b'onnx')\n"
                    "(out / 'training.json').write_text(open(pathlib.Path(sys.argv[2]) / 'train.jsonl').read())\n")
    fake.chmod(0o755)
    out = tmp_path / "models" / "tuned"
    code = main(["train", "--from-feedback", "--config", str(config), "--out", str(out), "--python", str(fake),
                 "--work-dir", str(tmp_path / "work")])
    assert code == 0
    assert (out / "model.onnx").read_bytes() == b"onnx" and (out / "tokenizer.json").is_file()
    assert json.loads((out / "training.json").read_text())["negative"] == "wrong document"


def test_an_interpreter_that_does_not_exist_is_named_not_a_traceback(tmp_path: Path, capsys: Any) -> None:
    config = config_with_feedback(tmp_path)
    missing = tmp_path / ".venv-train" / "bin" / "python"
    assert main(["train", "--from-feedback", "--config", str(config), "--python", str(missing),
                 "--work-dir", str(tmp_path / "work")]) == 2
    assert f"--python {missing}: No such file or directory" in capsys.readouterr().err


def test_without_examples_the_command_says_so(tmp_path: Path) -> None:
    config = tmp_path / "router.yaml"
    config.write_text(f"state_dir: {tmp_path / 'empty'}\nbackends: []\n")
    assert main(["train", "--from-feedback", "--config", str(config), "--export-only"]) == 1
