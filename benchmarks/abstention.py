"""Abstention: does the router answer in-scope questions and decline out-of-scope ones?

    python benchmarks/abstention.py ../shared/benchmarks/livemcpbench [--json OUT] [--write-model]
        [--toolalpaca --mirror-root /work/.mirror] [--also OTHER_DATA_DIR]

For each labelled question (LiveMCPBench format, loaded as benchmarks/routing_accuracy.py does) the
router decides on the whole catalog (in scope) and on the catalog without the question's gold servers
(out of scope: nothing there is right); with `--small N` (default 4) also on a small catalog (the gold
servers and N others; out of scope, N others only), the size of a typical deployment. The router's
choice is right when it belongs to one of the question's gold servers (the tool labels are partial,
the server labels are not).

The questions of each set are split in two halves with a fixed seed. On the fitting halves the
confidence model (router/stages/confidence.py) is fitted: a logistic regression on the features of the
router's choice in every case, then an isotonic map fitted on out-of-fold predictions. The default
threshold is chosen on the fitting half of DATA_DIR (whole and small catalogs) as the highest one that
still answers `--min-answered` (0.9) of the in-scope questions (with `--min-answered 0`, the one with
the highest in-scope answered plus out-of-scope abstained). Everything reported is on the other
halves, through the router's own `Decider` (CatalogIndex, score_candidates, the verdict), so it
measures what the router does. `--toolalpaca` adds ToolAlpaca (short single-API questions, read from
its bare git copy) to fitting and reporting; `--write-model` writes the fitted parameters to the file
the router ships (router/stages/confidence_model.json). The tool-level model (given the backend, which of its
tools: benchmarks/tool_confidence.py) is fitted and reported alongside, and written with it
(router/stages/tool_confidence_model.json).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.routing_accuracy import Query, load
from benchmarks.tool_confidence import (
    THRESHOLDS,
    choose_tool_threshold,
    fit_tool_model,
    tool_cases,
    tool_curve,
    tool_summary,
)
from router.request import Request
from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.retrieval.embeddings import CachedEmbedder, EmbeddingCache, LocalMiniLM
from router.retrieval.text import spelled
from router.settings import EmbeddingSettings, RouterSettings
from router.stages.confidence import (
    EVIDENCE,
    FEATURES,
    SHIPPED,
    SHIPPED_TOOL,
    TOOL_FEATURES,
    ConfidenceModel,
    candidate_features,
    expected_calibration_error,
    fit_calibrated,
)
from router.stages.decide import Decider, Live, View
from router.values import Analysis, Catalog, Decision


@dataclass(frozen=True)
class Case:
    """One decision on one catalog: `gold` is empty out of scope; `sizes` are that catalog's servers."""

    decision: Decision
    gold: frozenset[str]
    sizes: dict[str, int]

    @property
    def top_confidence(self) -> float:
        return self.decision.candidates[0].scores.confidence if self.decision.candidates else 0.0

    @property
    def top_right(self) -> bool:
        return bool(self.decision.candidates) and self.decision.candidates[0].capability.backend in self.gold


class Bench:
    """Indexes over a catalog and its subsets, reusing one set of vectors (embedded once)."""

    def __init__(self, catalogs: list[Catalog], vectors: dict[str, np.ndarray], settings: RouterSettings) -> None:
        self.catalogs = catalogs
        self.vectors = vectors
        self.settings = settings
        self._indexes: dict[frozenset[str], CatalogIndex] = {}

    def index(self, servers: frozenset[str]) -> CatalogIndex:
        if servers not in self._indexes:
            texts = CatalogTexts.build([c for c in self.catalogs if c.backend in servers])
            self._indexes[servers] = CatalogIndex(
                texts, np.stack([self.vectors[t] for t in texts.tool_dense]),
                np.stack([self.vectors[t] for t in texts.server_dense]), self.settings.routing)
        return self._indexes[servers]

    def case(self, decider: Decider, q: Query, vector: np.ndarray, servers: frozenset[str]) -> Case:
        analysis = Analysis(question=q.text, vector=vector, intent="general", intent_source="default")
        index = self.index(servers)
        d = decider.decide(analysis, View(index, {}), Live(), Request(question=q.text))
        return Case(d, frozenset(q.gold_servers & servers),
                    {c.backend: len(c.capabilities) for c in index.texts.catalogs})

    def cases(self, decider: Decider, queries: list[Query], vectors: dict[str, np.ndarray], small: int,
              seed: int) -> tuple[list[Case], list[Case]]:
        """In-scope and out-of-scope cases: on the whole catalog, and with `small`, also on a small
        catalog per question (its gold servers and `small` others; out of scope, `small` others only),
        so that the model also sees catalogs the size of a typical deployment."""
        everything = frozenset(c.backend for c in self.catalogs)
        rng = np.random.default_rng(seed)
        inside, outside = [], []
        for q in queries:
            rest = sorted(everything - q.gold_servers)
            inside.append(self.case(decider, q, vectors[q.text], everything))
            outside.append(self.case(decider, q, vectors[q.text], frozenset(rest)))
            if small:
                others = frozenset(rng.choice(rest, size=small, replace=False).tolist())
                inside.append(self.case(decider, q, vectors[q.text], others | q.gold_servers))
                outside.append(self.case(decider, q, vectors[q.text], others))
        return inside, outside


def rows(cases: Sequence[Case]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best candidate's features in each case, whether it is right (its server is a gold one), and the
    case's number. Only the best: the probability wanted is that of the router's choice being right, and
    runners-up (mostly wrong, and many) would pull it towards their own base rate; the features say
    how a runner-up differs (its lead is negative), so the same model still ranks them."""
    xs, ys, groups = [], [], []
    for i, case in enumerate(cases):
        cands = case.decision.candidates
        if not cands:
            continue
        xs.append(candidate_features([c.scores for c in cands], [c.capability.backend for c in cands],
                                     case.sizes)[:1])
        ys.append(float(case.top_right))
        groups.append(i)
    return np.vstack(xs), np.array(ys), np.array(groups)


def fit(x: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int) -> ConfidenceModel:
    """Logistic regression on all rows; the isotonic map on out-of-fold predictions (two folds by
    case, so that a case's candidates never inform their own calibration)."""
    rng = np.random.default_rng(seed)
    ids = np.unique(groups)
    fold_of = dict(zip(ids, rng.permutation(len(ids)) % 2, strict=True))
    return fit_calibrated(x, y, np.array([fold_of[g] for g in groups]), EVIDENCE)


def first_confident(case: Case, t: float) -> str | None:
    """The server the router calls at threshold `t`: that of the first candidate (in the router's order)
    whose confidence reaches it; None when it abstains."""
    return next((c.capability.backend for c in case.decision.candidates if c.scores.confidence >= t), None)


def curve(inside: list[Case], outside: list[Case]) -> list[dict]:
    """Per threshold, as the router decides at it: in-scope answered and the accuracy of those
    answered, out-of-scope abstained."""
    out = []
    for t in THRESHOLDS:
        chosen = [(first_confident(c, t), c.gold) for c in inside]
        answered = [server in gold for server, gold in chosen if server is not None]
        out.append({"threshold": t, "in_scope_answered": len(answered) / len(inside),
                    "in_scope_accuracy": sum(answered) / len(answered) if answered else 1.0,
                    "out_of_scope_abstained": sum(first_confident(c, t) is None for c in outside) / len(outside)})
    return out


def choose_threshold(points: list[dict], min_answered: float | None) -> float:
    """The highest threshold that still answers `min_answered` of the in-scope questions (so the most
    out-of-scope ones declined at that price), or without it the one that best separates answering from
    abstaining (the highest in-scope answered plus out-of-scope abstained; the lower on a tie)."""
    if min_answered is not None:
        ok = [c for c in points if c["in_scope_answered"] >= min_answered]
        return max(c["threshold"] for c in ok) if ok else 0.0
    best = max(points, key=lambda c: (round(c["in_scope_answered"] + c["out_of_scope_abstained"], 9),
                                      -c["threshold"]))
    return float(best["threshold"])


def summary(inside: list[Case], outside: list[Case]) -> dict:
    """What the router did at its threshold (the verdicts), and the calibration of its top confidence.
    A decision that names a backend but asks which of its tools (409) answers at the backend level, and so
    does one that asks before calling a tool that may act (the catalogs here carry no read-only
    annotations): `out_of_scope_acted` and `in_scope_acted` count the decisions that would call a tool."""
    answered = [c for c in inside if c.decision.verdict != "no_match"]
    # The router goes to the first candidate whose backend is likely enough (confidence at or above the
    # threshold): it calls it, or asks which of that backend's tools was meant.
    called = [next(x.capability.backend for x in c.decision.candidates if x.contending) for c in answered]
    tops = inside + outside
    return {
        "out_of_scope_abstained": sum(c.decision.verdict == "no_match" for c in outside) / len(outside),
        "in_scope_answered": len(answered) / len(inside),
        "in_scope_accuracy": (sum(s in c.gold for s, c in zip(called, answered, strict=True)) / len(answered)
                              if answered else 0.0),
        "out_of_scope_acted": sum(c.decision.verdict == "route" for c in outside) / len(outside),
        "in_scope_acted": sum(c.decision.verdict == "route" for c in inside) / len(inside),
        "in_scope_top1_accuracy": sum(c.top_right for c in inside) / len(inside),
        "ece": expected_calibration_error(np.array([c.top_confidence for c in tops]),
                                          np.array([float(c.top_right) for c in tops])),
        "curve": curve(inside, outside),
    }


@dataclass
class Dataset:
    name: str
    bench: Bench
    vectors: dict[str, np.ndarray]  # question vectors
    fit: list[Query]
    test: list[Query]


def toolalpaca(mirror_root: Path, into: Path) -> Path:
    """ToolAlpaca's questions and APIs in the LiveMCPBench format, read from its bare git copy at the
    commit benchmarks/retriever_data.py pins (nothing of it enters this repository)."""
    from benchmarks.retriever_data import SOURCES, Source, load_toolalpaca

    catalog, queries = load_toolalpaca(Source(mirror_root, SOURCES["toolalpaca"]))
    out = into / "toolalpaca"
    out.mkdir(parents=True, exist_ok=True)
    (out / "catalog.json").write_text(json.dumps(catalog, ensure_ascii=False), encoding="utf-8")
    (out / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries),
                                       encoding="utf-8")
    return out


async def dataset(data_dir: Path, model: LocalMiniLM, embedder: CachedEmbedder, settings: RouterSettings,
                  seed: int) -> Dataset:
    """A labelled set, embedded once and split in halves with a fixed seed."""
    catalogs, queries = load(data_dir)
    queries = [q for q in queries if q.gold_servers]
    full = CatalogTexts.build(catalogs)
    texts = sorted(set(full.tool_dense) | set(full.server_dense))
    vectors = dict(zip(texts, await embedder.embed(texts), strict=True))
    qvecs = dict(zip([q.text for q in queries], model.encode([spelled(q.text) for q in queries]), strict=True))
    order = np.random.default_rng(seed).permutation(len(queries))
    half = len(queries) // 2
    return Dataset(data_dir.name, Bench(catalogs, vectors, settings), qvecs, [queries[i] for i in order[:half]],
                   [queries[i] for i in order[half:]])


def report_on(ds: Dataset, decider: Decider, small: int, seed: int) -> dict:
    inside, outside = ds.bench.cases(decider, ds.test, ds.vectors, small, seed + 1)
    tools = tool_cases(ds.bench, decider, ds.test, ds.vectors, small, seed + 1)

    def tool(small_catalogs: bool) -> dict:
        return tool_summary(decider.scorer.tool_confidence, [c for c in tools if c.small == small_catalogs],
                            decider.settings.routing.min_tool_confidence)

    step = 2 if small else 1
    out = {"report_questions": len(ds.test), **summary(inside[::step], outside[::step]), "tool": tool(False)}
    if small:
        out["small_catalogs"] = {"servers": f"gold + {small} others (out of scope: {small} others)",
                                 **summary(inside[1::2], outside[1::2]), "tool": tool(True)}
    return out


async def run(args: argparse.Namespace) -> dict:
    model = LocalMiniLM(model=args.model or EmbeddingSettings().model, compute=args.compute)
    embedder = CachedEmbedder(model, EmbeddingCache(Path(args.cache_dir).expanduser()))
    settings = RouterSettings()
    dirs = [Path(d) for d in [args.data_dir, *args.also]]
    with tempfile.TemporaryDirectory() as tmp:
        if args.toolalpaca:
            dirs.append(toolalpaca(Path(args.mirror_root), Path(tmp)))
        sets = [await dataset(d, model, embedder, settings, args.seed) for d in dirs]
    main_set = sets[0]

    # The features do not depend on the model: any model gives the same rows.
    k = len(FEATURES)
    probe = Decider(settings, confidence=ConfidenceModel(np.zeros(k), np.ones(k), np.zeros(k), 0.0, np.zeros(0),
                                                         np.zeros(0), 0.5, {}))
    fit_cases: list[Case] = []
    for ds in sets:
        inside, outside = ds.bench.cases(probe, ds.fit, ds.vectors, args.small, args.seed)
        fit_cases += inside + outside
    fitted = fit(*rows(fit_cases), args.seed)
    tool_fit = [c for ds in sets for c in tool_cases(ds.bench, probe, ds.fit, ds.vectors, args.small, args.seed)]
    tool_model = fit_tool_model(tool_fit, args.seed)
    tool_threshold = (args.tool_threshold if args.tool_threshold is not None
                      else choose_tool_threshold(tool_curve(tool_model, tool_fit), args.min_tool_answered))

    decider = Decider(settings, confidence=fitted)
    # Chosen over the whole catalog and the small ones alike: a deployment is more often a handful of servers.
    fit_curve = curve(*main_set.bench.cases(decider, main_set.fit, main_set.vectors, args.small, args.seed))
    threshold = (args.threshold if args.threshold is not None
                 else choose_threshold(fit_curve, args.min_answered or None))
    meta = {"data": [ds.name for ds in sets], "fit_questions": {ds.name: len(ds.fit) for ds in sets},
            "seed": args.seed, "small_catalogs": args.small, "embedding_model": model.model_id,
            "label": "the candidate's server is one of the question's gold servers",
            "threshold_rule": (f"highest answering >= {args.min_answered:.0%} of in-scope questions"
                               if args.min_answered else "best in-scope answered + out-of-scope "
                               "abstained") + f" on the fitting half of {main_set.name}, whole and small catalogs"}
    fitted = ConfidenceModel(fitted.mean, fitted.scale, fitted.coef, fitted.intercept, fitted.iso_x, fitted.iso_y,
                             threshold, meta)

    tool_model = dataclasses.replace(tool_model, threshold=tool_threshold, meta={
        "data": [ds.name for ds in sets], "seed": args.seed, "small_catalogs": args.small,
        "embedding_model": model.model_id, "fit_decisions": len(tool_fit),
        "label": "the best candidate's tool is a gold tool, on decisions whose best backend is a gold server",
        "threshold_rule": f"highest letting >= {args.min_tool_answered:.0%} of those decisions call their tool, "
                          "fitting halves of every set"})
    decider = Decider(RouterSettings.model_validate({"routing": {"min_confidence": threshold,
                                                                 "min_tool_confidence": tool_threshold}}),
                      confidence=fitted, tool_confidence=tool_model)
    report = {"data_dir": str(args.data_dir), "questions": len(main_set.fit) + len(main_set.test),
              "fit_questions": len(main_set.fit), "seed": args.seed, "threshold": threshold,
              **report_on(main_set, decider, args.small, args.seed), "fit_curve": fit_curve,
              "also": {ds.name: report_on(ds, decider, args.small, args.seed) for ds in sets[1:]},
              "model": {"features": list(FEATURES), "coef": fitted.coef.round(4).tolist()},
              "tool_threshold": tool_threshold,
              "tool_model": {"features": list(TOOL_FEATURES), "coef": tool_model.coef.round(4).tolist()}}
    if args.write_model:
        SHIPPED.write_text(json.dumps(fitted.to_json(), indent=1) + "\n", encoding="utf-8")
        SHIPPED_TOOL.write_text(json.dumps(tool_model.to_json(), indent=1) + "\n", encoding="utf-8")
        report["wrote"] = [str(SHIPPED), str(SHIPPED_TOOL)]
    return report


def table(report: dict) -> str:
    lines = [f"default min_confidence {report['threshold']:.2f} (chosen on the fitting half of "
             f"{Path(report['data_dir']).name}, {report['fit_questions']} questions)"]
    sets = [(Path(report["data_dir"]).name, report), *report["also"].items()]
    for name, r in sets:
        parts = [("whole catalog", r)]
        if "small_catalogs" in r:
            parts.append((f"small catalogs ({r['small_catalogs']['servers']})", r["small_catalogs"]))
        for title, p in parts:
            lines += [f"\n{name}, {r['report_questions']} report questions, {title}",
                      f"{'min_confidence':>15}{'in answered':>13}{'in accuracy':>13}{'out abstained':>15}"]
            for c in p["curve"]:
                if round(c["threshold"] * 100) % 10 and abs(c["threshold"] - report["threshold"]) > 1e-9:
                    continue  # every 0.1, and the default (the JSON has every 0.01)
                mark = "  <- default" if abs(c["threshold"] - report["threshold"]) < 1e-9 else ""
                lines.append(f"{c['threshold']:>15.2f}{c['in_scope_answered']:>13.3f}"
                             f"{c['in_scope_accuracy']:>13.3f}{c['out_of_scope_abstained']:>15.3f}{mark}")
            lines.append(f"router at the default: out_of_scope_abstained {p['out_of_scope_abstained']:.3f}  "
                         f"in_scope_answered {p['in_scope_answered']:.3f}  in_scope_accuracy "
                         f"{p['in_scope_accuracy']:.3f}  (top-1 accuracy, nothing declined: "
                         f"{p['in_scope_top1_accuracy']:.3f})  ece {p['ece']:.3f}; a tool called: in scope "
                         f"{p['in_scope_acted']:.3f}, out of scope {p['out_of_scope_acted']:.3f}")
            t = p["tool"]
            if t.get("decisions"):
                lines.append(f"tools, {t['decisions']} decisions with the right backend: tool right "
                             f"{t['tool_right_nothing_held_back']:.3f} when always called; at min_tool_confidence "
                             f"{report['tool_threshold']:.2f}: called {t['called']:.3f}, right of called "
                             f"{t['right_of_called']:.3f}, wrong calls {t['wrong_called']:.3f}, right ones asked "
                             f"about {t['right_held_back']:.3f}, ece {t['ece']:.3f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--also", action="append", default=[], help="another labelled set (same format) to fit on "
                        "(its fitting half) and report on (its other half); repeatable")
    parser.add_argument("--toolalpaca", action="store_true", help="also fit on (and report) ToolAlpaca, read "
                        "from its bare git copy under --mirror-root")
    parser.add_argument("--mirror-root", default="/work/.mirror", help="bare git copies as owner+name/repo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small", type=int, default=4, help="other servers in each question's small catalog "
                        "(fitted on and reported separately; 0: whole catalog only)")
    parser.add_argument("--min-answered", type=float, default=0.9,
                        help="choose the highest threshold answering this in-scope share on the fitting half "
                        "(default 0.9; 0: the threshold with the best answered + abstained sum)")
    parser.add_argument("--threshold", type=float, help="report at this threshold instead of choosing one")
    parser.add_argument("--min-tool-answered", type=float, default=0.9,
                        help="choose the highest min_tool_confidence that lets this share of right-backend decisions "
                        "call their tool on the fitting halves (default 0.9)")
    parser.add_argument("--tool-threshold", type=float, help="report at this min_tool_confidence instead")
    parser.add_argument("--write-model", action="store_true",
                        help="write router/stages/confidence_model.json and router/stages/tool_confidence_model.json")
    parser.add_argument("--model", help="local embedding model in models/ (default: embeddings.model)")
    parser.add_argument("--compute", choices=["auto", "int8", "float"], default="auto",
                        help="embeddings.compute: how the local model multiplies (auto: by processor)")
    parser.add_argument("--cache-dir", default=str(Path(__file__).resolve().parents[1] / ".state" / "bench"))
    args = parser.parse_args()
    report = asyncio.run(run(args))
    print(table(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"wrote {args.json_out}")


if __name__ == "__main__":
    main()
