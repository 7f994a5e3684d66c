"""A Router wired to scripted fakes, shared by the router tests: catalog, stats, executor."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from router.core import Router
from router.literals import ChargeFn
from router.models import QueryRequest, QueryResponse, RouteRequest, RouteResponse
from router.request import Request
from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.security.policy import Access
from router.settings import RouterSettings
from router.stages.scoring import PerfSnapshot
from router.values import BackendStatus, CallOutcome, Catalog
from tests.unit.fake_executor import Behaviour, ScriptedExecutor, ok
from tests.unit.helpers import embed_texts, small_catalogs

BACKENDS = ("time", "clock", "calc", "echo")
# The questions below are defined by which candidates are relevant to them. The hashed bag-of-words
# embedder gives other cosines than the real model, so the world sets the threshold that keeps them so
# (with the shipped confidence model: world_clock scores 0.08 for ONLY_TIME and 0.39 for BOTH_CLOCKS).
MIN_CONFIDENCE = 0.1
# Both time tools are relevant to this one; only `time/get_current_time` to the next.
BOTH_CLOCKS = "What is the current local time in Tokyo?"
ONLY_TIME = "What time is it in Tokyo?"
UNRELATED = "bake a sourdough bread recipe"


@dataclass
class Stats:
    """A StatsView over plain dicts; every backend starts healthy."""

    health: dict[str, str] = field(default_factory=lambda: dict.fromkeys(BACKENDS, "healthy"))
    snapshots: dict[tuple[str, str], PerfSnapshot] = field(default_factory=dict)
    recorded: list[tuple[str, str, CallOutcome]] = field(default_factory=list)
    callers: list[str | None] = field(default_factory=list)  # whose each recorded outcome was
    lone: dict[str, str] = field(default_factory=dict)  # backend -> the principal whose failures alone ejected it

    def statuses(self) -> Mapping[str, BackendStatus]:
        return {
            name: BackendStatus(
                name=name,
                kind="mcp_stdio",
                transport="stdio",
                health="ejected" if name in self.lone else h,  # type: ignore[arg-type]
                last_error="connection refused" if h == "down" else None,
                ejected_until=time.time() + 60 if name in self.lone else None,
                ejected_by=self.lone.get(name),
            )
            for name, h in self.health.items()
        }

    def perf(self) -> Mapping[tuple[str, str], PerfSnapshot]:
        return self.snapshots

    def record(self, backend: str, intent: str, outcome: CallOutcome, caller: str | None = None) -> None:
        self.recorded.append((backend, intent, outcome))
        self.callers.append(caller)


@dataclass
class World:
    router: Router
    executor: ScriptedExecutor
    stats: Stats
    embedded: list[list[str]]


def answers(**overrides: Behaviour) -> dict[str, Behaviour]:
    script: dict[str, Behaviour] = {name: ok(f"answer from {name}") for name in BACKENDS}
    script.update(overrides)
    return script


def world(
    script: dict[str, Behaviour] | None = None,
    *,
    settings: dict[str, Any] | None = None,
    backend_options: dict[str, dict[str, Any]] | None = None,
    catalogs: list[Catalog] | None = None,
) -> World:
    opts = backend_options or {}
    config = {
        "backends": [{"name": n, "kind": "mcp_stdio", "command": "srv", **opts.get(n, {})} for n in BACKENDS]
    }
    config.update(settings or {})
    config["routing"] = {"min_confidence": MIN_CONFIDENCE, **(settings or {}).get("routing", {})}
    s = RouterSettings.model_validate(config)
    embedded: list[list[str]] = []

    async def embed(texts: list[str]) -> np.ndarray:
        embedded.append(list(texts))
        return embed_texts(texts)

    executor = ScriptedExecutor(script or answers())
    stats = Stats()
    router = Router(s, executor=executor, embed=embed, stats=stats)
    catalogs = catalogs or small_catalogs()
    texts = CatalogTexts.build(catalogs)
    router.set_catalogs(
        catalogs,
        CatalogIndex(texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense), s.routing),
    )
    return World(router, executor, stats, embedded)


async def query(router: Router, q: QueryRequest, access: Access | None = None,
                charge: ChargeFn | None = None) -> QueryResponse:
    """Ask the router as the edge does: the query resolved with the router's own defaults."""
    return await router.query(Request.of(q, router.settings.resilience, access=access, charge=charge))


async def route(router: Router, r: RouteRequest, access: Access | None = None) -> RouteResponse:
    return await router.route(Request.dry_run(r, access=access))
