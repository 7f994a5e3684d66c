"""Training and held-out data for the routing retriever, converted from public tool-use datasets.

    python benchmarks/retriever_data.py OUT_DIR [--mirror-root /work/.mirror]
        [--drop-overlap-with ../shared/benchmarks/livemcpbench]

Reads each source at a pinned commit from a bare git copy of its repository (`git show`), so the
raw data never enters this repository; only this script and the commit hashes do. Writes:

- OUT_DIR/train.jsonl: (query, positive, negative) triples. Documents are built with the router's
  own `capability_dense_text` / `server_dense_text`, so the model learns exactly the form it will see.
  The negative is a hard one: the tool (or server) of the same toolset that the untrained model
  ranks highest among the wrong ones. Sources: Seal-Tools and BFCL (generated requests, sampled down),
  API-Bank (dialogues over servers of many tools, `retriever_mix.py`), and multi-step requests
  composed from each source's own requests. Each triple names its `source`.
- OUT_DIR/heldout/<name>/catalog.json + queries.jsonl: a dataset kept out of training entirely, in
  the format `benchmarks/routing_accuracy.py` reads.
- OUT_DIR/manifest.json: sources, commits, licences, counts and the tool-name overlap with the
  catalog given by --drop-overlap-with (those tools are removed when the flag is set; without it the
  overlap is only reported when --overlap-report is given).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.retriever_mix import APIBANK, compose_multistep, load_api_bank
from router.retrieval.catalog import capability_dense_text, server_dense_text
from router.retrieval.embeddings import LocalMiniLM
from router.retrieval.text import split_identifier
from router.values import Capability, Catalog

SOURCES = {
    "seal-tools": {"repo": "fairyshine/Seal-Tools", "commit": "ce753ecd60ed08dd376984035de531ab8421f1c6",
                   "licence": "Apache-2.0", "role": "train"},
    "bfcl": {"repo": "ShishirPatil/gorilla", "commit": "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8",
             "licence": "Apache-2.0", "role": "train"},
    "api-bank": APIBANK,
    "toolalpaca": {"repo": "tangqiaoyu/ToolAlpaca", "commit": "189069998d64a7baf1b4a1c3c4b2e75eb9d05532",
                   "licence": "Apache-2.0", "role": "held out"},
}
SEAL_QUERY_FILES = ("dev.jsonl", "test_in_domain.jsonl", "test_out_domain.jsonl")
BFCL_DIR = "berkeley-function-call-leaderboard/bfcl_eval/data/"
BFCL_FILES = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
              "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")


@dataclass
class Toolset:
    """Tools that compete for the same queries (a server, a field, one question's function list)."""

    server: str | None  # None: the source names no server, the document carries no server part
    description: str
    tools: dict[str, Capability] = field(default_factory=dict)


@dataclass
class Example:
    query: str
    toolset: str
    gold: list[str]  # tool names within the toolset
    also: tuple[str, ...] = ()  # other toolsets the same (multi-step) query needs: never its negatives


class Source:
    """A dataset's repository at its pinned commit; `meta` is an entry like those of SOURCES."""

    def __init__(self, mirror_root: Path, meta: dict) -> None:
        self.git_dir = mirror_root / meta["repo"].replace("/", "+") / "repo"
        self.commit = meta["commit"]

    def read(self, path: str) -> str:
        out = subprocess.run(["git", "-C", str(self.git_dir), "show", f"{self.commit}:{path}"],
                             capture_output=True, text=True, timeout=60)
        if out.returncode:
            raise SystemExit(f"cannot read {path} at {self.commit} in {self.git_dir}: {out.stderr.strip()}")
        return out.stdout

    def list(self, folder: str) -> list[str]:
        out = subprocess.run(["git", "-C", str(self.git_dir), "ls-tree", "-r", "--name-only", self.commit, folder],
                             capture_output=True, text=True, timeout=60)
        return sorted(out.stdout.split())


def write_routing_set(out: Path, catalog: list[dict], queries: list[dict], manifest: dict | None = None) -> dict:
    """A catalog and its labelled questions as routing_accuracy.py reads them (OUT/catalog.json and
    OUT/queries.jsonl, and OUT/manifest.json with the counts when `manifest` is given); returns the counts."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "catalog.json").write_text(json.dumps(catalog, indent=1, ensure_ascii=False), encoding="utf-8")
    (out / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries),
                                       encoding="utf-8")
    counts = {"servers": len(catalog), "tools": sum(len(c["tools"]) for c in catalog), "queries": len(queries)}
    if manifest is not None:
        (out / "manifest.json").write_text(json.dumps({**manifest, **counts}, indent=1), encoding="utf-8")
    print(f"{counts} -> {out}")
    return counts


def convert_command(doc: str, meta: dict, convert: Callable[[Source], tuple[list[dict], list[dict]]]) -> None:
    """The command line of a converter that reads one snapshot: OUT_DIR [--mirror-root DIR]."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--mirror-root", default="/work/.mirror")
    args = parser.parse_args()
    catalog, queries = convert(Source(Path(args.mirror_root), meta))
    write_routing_set(Path(args.out_dir), catalog, queries, {"source": meta})


def _schema(params: dict) -> dict:
    props = {str(k): {"description": str(v.get("description", "")) if isinstance(v, dict) else str(v)}
             for k, v in (params or {}).items()}
    return {"type": "object", "properties": props}


def load_seal_tools(src: Source) -> tuple[dict[str, Toolset], list[Example]]:
    """Seal-Tools: 4,076 generated tools grouped by field (our 'server'); queries call 1..n of them."""
    toolsets: dict[str, Toolset] = {}
    field_of: dict[str, str] = {}
    for line in src.read("Seal-Tools_Dataset/tool.jsonl").splitlines():
        t = json.loads(line)
        fld = t.get("field") or "General"
        parent, _, child = fld.partition("/")
        ts = toolsets.setdefault(fld, Toolset(child or parent, f"Tools for {parent}" + (f", {child}" if child else "")))
        ts.tools[t["api_name"]] = Capability(backend=ts.server or fld, name=t["api_name"],
                                             description=t.get("api_description") or "",
                                             input_schema=_schema(t.get("parameters") or {}))
        field_of[t["api_name"]] = fld
    examples = []
    for name in SEAL_QUERY_FILES:
        for line in src.read(f"Seal-Tools_Dataset/{name}").splitlines():
            q = json.loads(line)
            by_field: dict[str, list[str]] = defaultdict(list)
            for call in q.get("calling") or []:
                if call.get("api") in field_of:
                    by_field[field_of[call["api"]]].append(call["api"])
            for fld, gold in by_field.items():
                examples.append(Example(q["query"], fld, sorted(set(gold))))
    return toolsets, examples


def _user_text(question: list) -> str:
    turn = question[0] if question and isinstance(question[0], list) else question
    return " ".join(m.get("content", "") for m in turn if isinstance(m, dict) and m.get("role") == "user").strip()


def load_bfcl(src: Source) -> tuple[dict[str, Toolset], list[Example]]:
    """Berkeley Function Calling Leaderboard: each question comes with its candidate functions."""
    toolsets: dict[str, Toolset] = {}
    examples = []
    for name in BFCL_FILES:
        answers: dict[str, list[str]] = {}
        try:
            for line in src.read(f"{BFCL_DIR}possible_answer/BFCL_v4_{name}.json").splitlines():
                a = json.loads(line)
                answers[a["id"]] = [k for call in a.get("ground_truth") or [] for k in call]
        except SystemExit:
            pass
        for line in src.read(f"{BFCL_DIR}BFCL_v4_{name}.json").splitlines():
            q = json.loads(line)
            funcs = q.get("function") or []
            text = _user_text(q.get("question") or [])
            gold = answers.get(q["id"]) or ([funcs[0]["name"]] if len(funcs) == 1 else [])
            if not text or not gold:
                continue
            ts = Toolset(None, "")
            for f in funcs:
                props = (f.get("parameters") or {}).get("properties") or {}
                ts.tools[f["name"]] = Capability(backend="functions", name=f["name"],
                                                 description=f.get("description") or "", input_schema=_schema(props))
            gold = sorted({g for g in gold if g in ts.tools})
            if gold:
                toolsets[q["id"]] = ts
                examples.append(Example(text, q["id"], gold))
    return toolsets, examples


def _literal(value):
    return ast.literal_eval(value) if isinstance(value, str) else value


# ToolAlpaca writes each parameter as "Required. string. Two-character country code." or "integer. ": what a schema
# generated from the API's OpenAPI document says as `required` and `type`, as an MCP server in front of it would.
_DESCRIBED = re.compile(r"\s*(Required\.\s*)?(?i:(string|integer|number|boolean|object)|array\[(\w+)|(array))\b")


def _described_schema(params: dict) -> dict:
    schema = _schema({k: {"description": str(v)} for k, v in params.items()})
    required = []
    for name, spec in schema["properties"].items():
        if described := _DESCRIBED.match(spec["description"]):
            item = (described[3] or "").lower()
            spec["type"] = (described[2] or "array").lower()
            if item in ("string", "integer", "number", "boolean", "object"):
                spec["items"] = {"type": item}
            required += [name] if described[1] else []
    return {**schema, "required": required} if required else schema


def load_toolalpaca(src: Source) -> tuple[list[dict], list[dict]]:
    """ToolAlpaca's evaluation APIs (real and simulated) as a catalog of servers with functions."""
    catalog, queries = [], []
    for name in ("data/eval_real.json", "data/eval_simulated.json"):
        for api in json.loads(src.read(name)):
            tools = []
            for fname, doc in _literal(api["Function_Description"]).items():
                # "Parameters:" opens some descriptions: the function has parameters, and no sentence of its own.
                desc, _, rest = [*re.split(r"(?:^|\n)(Parameters:)", str(doc), maxsplit=1), "", ""][:3]
                try:
                    params = json.loads(rest.split("\nOutput:")[0].strip() or "{}")
                except json.JSONDecodeError:
                    params = {}
                tools.append({"name": fname, "description": desc.strip(), "input_schema": _described_schema(params)})
            catalog.append({"name": api["Name"], "description": api.get("Description") or "", "tools": tools})
            names = {t["name"] for t in tools}
            for text, answer in zip(_literal(api["Instructions"]), _literal(api["Golden_Answers"]), strict=False):
                gold = sorted({step["Action"] for step in answer if step.get("Action") in names})
                if gold:
                    queries.append({"query": text, "gold_tools": [{"tool": g, "servers": [api["Name"]]} for g in gold],
                                    "gold_servers": [api["Name"]]})
    return catalog, queries


def tool_document(ts: Toolset, cap: Capability) -> str:
    text = capability_dense_text(cap, ts.description)
    if ts.server is None:  # no server in the source: drop the empty server part rather than invent one
        text = text.split(f" Server {split_identifier(cap.backend)}:")[0]
    return text


def server_document(ts: Toolset) -> str:
    return server_dense_text(Catalog(backend=ts.server or "", version="1", description=ts.description,
                                     capabilities=tuple(ts.tools.values())))


def normalised(name: str) -> str:
    return split_identifier(name).lower().strip()


def livemcpbench_names(data_dir: Path) -> set[str]:
    raw = json.loads((data_dir / "catalog.json").read_text(encoding="utf-8"))
    return {normalised(t["name"]) for s in raw for t in s.get("tools") or []}


def build_triples(toolsets: dict[str, Toolset], examples: list[Example], model: LocalMiniLM,
                  rng: random.Random, with_servers: bool) -> list[dict]:
    """One triple per (query, gold tool); the negative is the untrained model's best wrong tool of the set.

    Toolsets with a single tool borrow their negatives from the whole source, ranked the same way.
    """
    docs = {(k, n): tool_document(ts, c) for k, ts in toolsets.items() for n, c in ts.tools.items()}
    keys = list(docs)
    doc_vecs = model.encode([docs[k] for k in keys])
    row = {k: i for i, k in enumerate(keys)}
    q_vecs = model.encode([e.query for e in examples])
    server_keys = [k for k, ts in toolsets.items() if ts.server] if with_servers else []
    server_vecs = model.encode([server_document(toolsets[k]) for k in server_keys]) if server_keys else None
    triples = []
    for qi, ex in enumerate(examples):
        ts = toolsets[ex.toolset]
        pool = [row[(ex.toolset, n)] for n in ts.tools if n not in ex.gold]
        if not pool:
            pool = [i for i in rng.sample(range(len(keys)), min(200, len(keys)))
                    if keys[i][1] not in ex.gold and keys[i][0] not in ex.also]
        scores = doc_vecs[pool] @ q_vecs[qi]
        neg = docs[keys[pool[int(np.argmax(scores))]]]
        for g in ex.gold:
            triples.append({"query": ex.query, "positive": docs[(ex.toolset, g)], "negative": neg, "kind": "tool"})
        if server_vecs is not None and ts.server:
            s_scores = server_vecs @ q_vecs[qi]
            order = [i for i in np.argsort(-s_scores) if server_keys[i] != ex.toolset and server_keys[i] not in ex.also]
            triples.append({"query": ex.query, "positive": server_document(ts),
                            "negative": server_document(toolsets[server_keys[order[0]]]), "kind": "server"})
    return triples


def drop_tools(toolsets: dict[str, Toolset], examples: list[Example], banned: set[str]) -> list[Example]:
    """The ablation: tools whose names appear in the evaluation catalog leave both the pool and the queries."""
    for ts in toolsets.values():
        ts.tools = {n: c for n, c in ts.tools.items() if normalised(n) not in banned}
    kept = []
    for ex in examples:
        if any(normalised(g) in banned for g in ex.gold) or not toolsets[ex.toolset].tools:
            continue
        kept.append(ex)
    return kept


LOADERS = {"seal-tools": load_seal_tools, "bfcl": load_bfcl,
           "api-bank": lambda src: load_api_bank(src, Toolset, Example, Capability, _schema)}
WITH_SERVERS = {"seal-tools", "api-bank"}  # sources that group tools into servers (BFCL does not)
# The mix, sized for one epoch of about 300 steps of 32: the generated Seal-Tools and BFCL requests are
# sampled down so that real dialogues (API-Bank) and multi-step requests make up a fair share of it.
SINGLE_CAP: dict[str, int | None] = {"seal-tools": 2400, "bfcl": 1100, "api-bank": None}
# Multi-step requests composed per source (a Seal-Tools request already calls several tools: fewer of them).
MULTISTEP = {"seal-tools": 200, "bfcl": 300, "api-bank": 500}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--mirror-root", default="/work/.mirror", help="bare git copies as owner+name/repo")
    parser.add_argument("--overlap-report", help="LiveMCPBench-format dir whose tool names to compare with")
    parser.add_argument("--drop-overlap-with", help="like --overlap-report, and remove the overlapping tools")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--heldout-only", action="store_true",
                        help="write only heldout/ (needs only the ToolAlpaca copy, loads no model)")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    root = Path(args.mirror_root)
    if args.heldout_only:
        write_heldout(root, out, {})
        return
    model = LocalMiniLM()

    manifest: dict = {"sources": SOURCES, "seed": args.seed, "counts": {}}
    triples = []
    train_names: dict[str, set[str]] = {}
    compare_dir = args.drop_overlap_with or args.overlap_report
    banned = livemcpbench_names(Path(compare_dir)) if compare_dir else set()
    for key, loader in LOADERS.items():
        toolsets, examples = loader(Source(root, SOURCES[key]))
        train_names[key] = {normalised(n) for ts in toolsets.values() for n in ts.tools}
        if args.drop_overlap_with:
            examples = drop_tools(toolsets, examples, banned)
        single = build_triples(toolsets, examples, model, rng, with_servers=key in WITH_SERVERS)
        cap = SINGLE_CAP[key]
        if cap is not None and len(single) > cap:
            single = rng.sample(single, cap)
        multi = compose_multistep(examples, MULTISTEP[key], rng, Example)
        multi_triples = build_triples(toolsets, multi, model, rng, with_servers=key in WITH_SERVERS)
        manifest["counts"][key] = {"toolsets": len(toolsets), "tools": sum(len(t.tools) for t in toolsets.values()),
                                   "queries": len({e.query for e in examples}), "triples": len(single),
                                   "multistep_queries": len({e.query for e in multi}),
                                   "multistep_triples": len(multi_triples)}
        for t in single + multi_triples:
            t["source"] = key
        triples += single + multi_triples
        print(f"{key}: {manifest['counts'][key]}")
    if compare_dir:
        every = set().union(*train_names.values())
        overlap = sorted(every & banned)
        manifest["overlap"] = {"catalog": compare_dir, "catalog_names": len(banned), "training_names": len(every),
                               "shared": len(overlap), "names": overlap,
                               "by_source": {k: len(v & banned) for k, v in train_names.items()},
                               "removed": bool(args.drop_overlap_with)}
        print(f"overlap with {compare_dir}: {len(overlap)} of {len(banned)} names: {', '.join(overlap)}")
    rng.shuffle(triples)
    with (out / "train.jsonl").open("w", encoding="utf-8") as fh:
        for t in triples:
            fh.write(json.dumps(t, ensure_ascii=False) + "\n")

    write_heldout(root, out, manifest["counts"])
    manifest["triples"] = len(triples)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    print(f"{len(triples)} triples; held out toolalpaca: {manifest['counts']['toolalpaca']}")


def write_heldout(root: Path, out: Path, counts: dict) -> None:
    catalog, queries = load_toolalpaca(Source(root, SOURCES["toolalpaca"]))
    counts["toolalpaca"] = write_routing_set(out / "heldout" / "toolalpaca", catalog, queries)

if __name__ == "__main__":
    main()
