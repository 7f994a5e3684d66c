"""What the bundled example answers: a new user's questions, asked of the router as `make demo` runs it.

    python benchmarks/example_questions.py [--project-docs] [--show] [--json OUT]

The router runs in-process (no Ray) with the example's real servers (the knowledge base on stdio rather
than on its fixed port, with a fresh store), the shipped model and confidence model, every backend
healthy. Three sets of questions, written as a user would ask them: about the documentation the
knowledge base holds, for the other servers' tools, and for things nothing configured does. Each is
counted by what it got: an answer from the backend that should answer, an answer from another, a
refusal (404, 409 or 422), or a call that failed; and whether the dry run (`/v1/route`) said beforehand what
the question would get. `--show` prints every question with what it got.
`--project-docs` gives the knowledge base the project's own documentation instead of the example's (about
150 sections nothing was tuned on), with questions about it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.backend import BackendSupervisor  # noqa: E402
from benchmarks.plan_outcomes import Healthy  # noqa: E402
from mcp_router.servers.knowledge_base.server import build_engine, parse_args  # noqa: E402
from router.core import Router  # noqa: E402
from router.errors import ErrorKind, RouterError  # noqa: E402
from router.models import QueryRequest, RouteRequest  # noqa: E402
from router.request import Request  # noqa: E402
from router.retrieval.catalog import CatalogIndex, CatalogTexts  # noqa: E402
from router.retrieval.embeddings import LocalMiniLM  # noqa: E402
from router.settings import McpHttpSpec, McpStdioSpec, ResilienceSettings, RouterSettings  # noqa: E402
from router.settings.file import load_settings  # noqa: E402
from router.values import CallContext, CallOutcome, Capability  # noqa: E402

EXAMPLES = ROOT / "examples"
NOTHING = None  # the backend of a question nothing configured can answer

# Questions about the project's own documentation (docs/), for `--project-docs`.
PROJECT_DOCUMENTATION = [(q, "knowledge-base") for q in (
    "How does hedging work?", "How do I connect Claude Desktop to the router?", "What is the default min_confidence?",
    "How are API keys created?", "What does the console show?", "How do I run the load test?",
    "How is the confidence model fitted?", "What is smart tool selection?", "How do I add a Flowise backend?",
    "What happens when a replica is killed?", "How does the router learn from feedback?",
    "Which ports does the router use?", "How do I run the router on a cluster?", "What is the trained retrieval model?",
    "How are tool definitions pinned?")]

QUESTIONS: dict[str, list[tuple[str, str | None]]] = {
    "documentation": [(q, "knowledge-base") for q in (
        "How does hedging work?", "What ports does the router use?", "How do I configure a backend?",
        "What happens when a backend fails?", "How are backends ejected?", "What is the default request deadline?",
        "How does the router pick a backend?", "What is the composite score?", "Which intents are there?",
        "How do I run the router on a cluster?", "Do I need an API key?", "Where is state stored between restarts?",
        "How are documents chunked?", "Can I filter chunks by metadata?", "Which embedding model is used?",
        "Can I use remote embeddings?", "What backend kinds are supported?",
        "What does the health endpoint report when a backend is down?", "What is the consensus mode?",
        "How does the embedding cache work?", "Can I use my Claude Desktop config?",
        "How do I see why a question went to a backend?")],
    "tools": [
        *[(q, "calculator") for q in (
            "What is 6 times 7?", "add 2 and 40", "What is 12 times (3 + 4)?", "Convert 5 km to miles",
            "What is 15 percent of 80?", "Divide 100 by 4", "What's 3 squared?", "How many minutes in a day?",
            "Convert 30 celsius to fahrenheit", "How many grams in a pound?", "What is the square root of 144?",
            "Subtract 17 from 50", "Add 2, 3 and 4")],
        *[(q, "time") for q in (
            "What time is it in Tokyo?", "What time is it in London right now?",
            "What time is it in New York when it is 9am in London?", "Convert 3pm Paris time to Tokyo time")],
        *[(q, "everything") for q in (
            "Echo back the message hello router", "Echo hello world", "Give me a sample image",
            "What resources do you have?", "Print all environment variables", "Sum 5 and 9")],
        *[(q, "memory") for q in ("What's in memory?", "What is in the knowledge graph?")]],
    "nothing fits": [(q, NOTHING) for q in (
        "What is the capital of France?", "Bake a sourdough bread recipe", "What is the weather in Paris tomorrow?",
        "Tell me a joke", "Who won the world cup in 2018?", "Translate hello into French", "Book a flight to Berlin",
        "What is the stock price of Apple?", "Write a poem about the sea", "How do I cook rice?")],
}


def on_stdio(spec: McpHttpSpec, store: Path, docs: Path | None = None) -> McpStdioSpec:
    """The example's knowledge base as the demo launches it, but on stdio: the same server and documents (or
    `docs`), without the fixed port the demo gives it."""
    assert spec.launch is not None
    args = list(spec.launch.args)
    args = args[:args.index("--http")]  # then only the port
    args[args.index("--store") + 1] = str(store)
    if docs is not None:
        args[args.index("--docs") + 1] = str(docs.resolve())
    return McpStdioSpec(name=spec.name, intents=spec.intents, command=sys.executable, args=args, cwd=spec.launch.cwd)


class _Direct:
    """Calls each backend's supervisor in this process (what the backend hosts do under Ray)."""

    def __init__(self, supervisors: dict[str, BackendSupervisor]) -> None:
        self.supervisors = supervisors

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        return await self.supervisors[capability.backend].call(capability, arguments, timeout_s, context, force)


@asynccontextmanager
async def example_router(store: Path, docs: Path | None = None) -> AsyncIterator[Router]:
    """The bundled example's router with its real servers connected; `store` holds the knowledge base's chunks (of
    `docs`, when given, instead of the example's documents)."""
    settings = load_settings(EXAMPLES / "router.yaml")
    kb = [on_stdio(b, store, docs) for b in settings.backends if isinstance(b, McpHttpSpec)]
    if docs is not None:  # ingested first: a large folder takes longer than the server's handshake may
        engine = build_engine(parse_args(kb[0].args[2:]))
        await engine.ingest(docs)
        engine.store.close()
    settings = settings.model_copy(update={"backends": [kb[0] if isinstance(b, McpHttpSpec) else b
                                                        for b in settings.backends]})
    async with connected_router(settings) as router:
        yield router


@asynccontextmanager
async def connected_router(settings: RouterSettings) -> AsyncIterator[Router]:
    """A router in this process over `settings`' backends, connected and indexed with the local model `make demo`
    runs; each backend served by its supervisor as a host serves it (its catalog reviewed, its settings applied),
    each call going straight to it (no Ray)."""
    backends = {spec.name: BackendSupervisor(spec, settings.resilience, settings.security)
                for spec in settings.backends}
    try:
        started = await asyncio.gather(*(b.start(wait_s=60) for b in backends.values()))
        down = [f"{s.name}: {s.last_error}" for s in started if s.health != "healthy"]
        if down:
            raise RuntimeError(f"backends not connected: {down}")
        catalogs = [catalog for b in backends.values() if (catalog := await b.catalog()) is not None]
        model = LocalMiniLM(model=settings.embeddings.model)

        async def embed(texts: list[str]) -> Any:
            return model.encode(list(texts))

        router = Router(settings, executor=_Direct(backends), embed=embed, stats=Healthy(list(backends)))
        texts = CatalogTexts.build(catalogs)
        router.set_catalogs(catalogs, CatalogIndex(texts, model.encode(list(texts.tool_dense)),
                                                   model.encode(list(texts.server_dense)), settings.routing))
        yield router
    finally:
        for b in backends.values():
            await b.shutdown()


async def ask(router: Router, question: str, expected: str | None) -> dict[str, Any]:
    """What the question got, and whether the dry run (`/v1/route`) said so beforehand: the same status and, for
    an answer, the same first call."""
    shown = await router.route(Request.dry_run(RouteRequest(question=question)))
    row: dict[str, Any] = {"question": question, "expected": expected}
    try:
        resp = await router.query(Request.of(QueryRequest(question=question), ResilienceSettings()))
    except RouterError as exc:
        refused = exc.kind in (ErrorKind.NO_RELEVANT_BACKEND, ErrorKind.AMBIGUOUS_ROUTE, ErrorKind.ARGUMENTS_REQUIRED)
        return {**row, "outcome": f"refused ({exc.status_code})" if refused else "call failed",
                "detail": f"{exc.code}: {exc.message[:120]}", "dry_run_agrees": shown.status == exc.status_code}
    right = resp.backend == expected
    return {**row, "outcome": "answered, right backend" if right else "answered, other backend",
            "detail": f"{resp.backend}/{resp.capability}: {resp.answer[:80]!r}",
            "dry_run_agrees": shown.calls[:1] == [f"{resp.backend}/{resp.capability}"]}


async def run(show: bool, docs: Path | None = None) -> dict[str, Any]:
    sets = QUESTIONS if docs is None else {**QUESTIONS, "documentation": PROJECT_DOCUMENTATION}
    with tempfile.TemporaryDirectory() as store:
        async with example_router(Path(store), docs) as router:
            rows = {name: [await ask(router, q, expected) for q, expected in questions]
                    for name, questions in sets.items()}
    if show:
        for name, answered in rows.items():
            print(f"\n{name}")
            for r in answered:
                print(f"  {r['question'][:60]:<62}{r['outcome']:<26}{r['detail']}")
    return {name: {"questions": len(answered), **Counter(r["outcome"] for r in answered),
                   "dry run agrees": sum(r["dry_run_agrees"] for r in answered), "rows": answered}
            for name, answered in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project-docs", action="store_true", help="the knowledge base holds the project's own "
                        "documentation (docs/) instead of the example's, with questions about it")
    parser.add_argument("--show", action="store_true", help="print every question with what it got")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    report = asyncio.run(run(args.show, ROOT / "docs" if args.project_docs else None))
    columns = ("answered, right backend", "answered, other backend", "refused (404)", "refused (409)",
               "refused (422)", "call failed", "dry run agrees")
    print(f"\n{'set':<16}{'questions':>10}" + "".join(f"{c:>26}" for c in columns))
    for name, counts in report.items():
        print(f"{name:<16}{counts['questions']:>10}" + "".join(f"{counts.get(c, 0):>26}" for c in columns))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
