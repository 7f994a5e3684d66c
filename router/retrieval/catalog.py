"""CatalogIndex: the hybrid index over every backend's capabilities, flat or two-level.

    texts = CatalogTexts.build(catalogs)
    index = CatalogIndex(texts, tool_vectors=await embed(texts.tool_dense),
                         server_vectors=await embed(texts.server_dense), settings=routing)
    ranked = index.search("what time is it in Tokyo", query_vector, k=5)

Documents: one per capability (server name and description, capability name and description,
parameter names and descriptions) and one per server (its description and a summary of its tools).
`flat` ranks capabilities directly; `two_level` (MCP-Zero) ranks servers first and then the
capabilities inside the best servers, combining both scores. `await index.tune_alpha(embed)` sets each
level's fusion weight from the catalog's own pseudo-queries (`router.retrieval.hybrid.self_tuned_alpha`).

A backend that lists no capabilities but has a description (a flow platform whose flows are not
listed, an MCP server whose tools are not known yet, a catalog of agents) is ranked by its own
document: it gets one server-level stand-in capability whose documents are the server's. When
chosen, a stand-in with a `target` (a flow backend with a configured flow) takes the question as free
text; one without is refused by name (`BackendNotCallable`), since there is no tool to call. So is a
tool held until an operator approves its changed definition: it is indexed as last approved
(`Catalog.held`), so that a question meant for it is not sent to the next best tool instead.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import re
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from router.retrieval.hybrid import Hit, HybridIndex, Probe, self_tuned_alpha
from router.retrieval.text import question_tokens, split_identifier, tokenize
from router.settings import RoutingSettings
from router.values import Capability, Catalog


def _params(schema: dict[str, Any]) -> list[tuple[str, str]]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return []
    out = []
    for name, spec in props.items():
        desc = spec.get("description", "") if isinstance(spec, dict) else ""
        out.append((str(name), str(desc or "")))
    return out


def capability_dense_text(cap: Capability, server_description: str) -> str:
    """What the embedding model sees: name words first (they survive truncation), then descriptions."""
    params = ", ".join(split_identifier(n) for n, _ in _params(cap.input_schema))
    parts = [f"{split_identifier(cap.name)}: {cap.description or cap.title or ''}".strip()]
    if params:
        parts.append(f"Parameters: {params}.")
    parts.append(f"Server {split_identifier(cap.backend)}: {server_description}".strip())
    if cap.tags:
        parts.append("Tags: " + ", ".join(cap.tags))
    return " ".join(parts)[:2000]


# A parameter's example values ("IANA timezone name (e.g., 'Asia/Tokyo')") name instances, not what the tool
# does: to BM25 a rare example word would make a question that names it about this tool.
_EXAMPLE_VALUES = re.compile(r"\((?:e\.g\.|eg\.|for example|such as)[^)]*\)|\b(?:e\.g\.|for example),?[^.;]*", re.I)


def capability_sparse_text(cap: Capability, server_description: str) -> str:
    """What BM25 sees; the capability name is repeated so that it weighs more than prose (field weighting)."""
    name = split_identifier(cap.name)
    params = " ".join(f"{split_identifier(n)} {_EXAMPLE_VALUES.sub(' ', d)}" for n, d in _params(cap.input_schema))
    return " ".join([name, name, name, cap.title or "", cap.description, params, split_identifier(cap.backend),
                     server_description, " ".join(cap.tags)])


def _offered(catalog: Catalog) -> tuple[Capability, ...]:
    """What a server is for: its capabilities, and those held until approved (as approved)."""
    return (*catalog.capabilities, *catalog.held)


def server_dense_text(catalog: Catalog) -> str:
    if not _offered(catalog):
        return f"{split_identifier(catalog.backend)}: {catalog.description}"[:2000]
    names = ", ".join(split_identifier(c.name) for c in _offered(catalog)[:40])
    return f"{split_identifier(catalog.backend)}: {catalog.description}. Tools: {names}."[:2000]


def server_sparse_text(catalog: Catalog) -> str:
    body = " ".join(f"{split_identifier(c.name)} {c.description}" for c in _offered(catalog))
    name = split_identifier(catalog.backend)
    return f"{name} {name} {catalog.description} {catalog.description} {body}"


FREE_TEXT_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["question"],
    "properties": {"question": {"type": "string", "description": "The request, in plain words."}},
}


def server_level_capability(catalog: Catalog, target: str | None = None) -> Capability | None:
    """The stand-in that makes a backend without capabilities routable by its description; None when the
    backend has capabilities, or nothing to be routed on. `target`: the flow a flow backend runs when
    chosen (then the stand-in is a flow, taking the question as free text)."""
    if catalog.capabilities or catalog.held or not catalog.description.strip():
        return None
    return Capability(backend=catalog.backend, name=catalog.backend, kind="flow" if target else "tool",
                      description=catalog.description, input_schema=FREE_TEXT_SCHEMA, target=target,
                      intents=catalog.intents, server_level=True, read_only=catalog.read_only)


def is_server_level(cap: Capability) -> bool:
    return cap.server_level


@dataclass(frozen=True, slots=True)
class CatalogTexts:
    catalogs: tuple[Catalog, ...]
    capabilities: tuple[Capability, ...]
    owner: tuple[int, ...]  # capability index -> catalog index
    tool_dense: tuple[str, ...]
    tool_sparse: tuple[str, ...]
    server_dense: tuple[str, ...]
    server_sparse: tuple[str, ...]

    @classmethod
    def build(cls, catalogs: Sequence[Catalog], flow_targets: Mapping[str, str] | None = None) -> CatalogTexts:
        """`flow_targets`: backend -> the flow its server-level stand-in runs (see the module docstring)."""
        caps: list[Capability] = []
        owner: list[int] = []
        dense: list[str] = []
        sparse: list[str] = []
        for ci, cat in enumerate(catalogs):
            stand_in = server_level_capability(cat, (flow_targets or {}).get(cat.backend))
            if stand_in is not None:
                caps.append(stand_in)
                owner.append(ci)
                dense.append(server_dense_text(cat))
                sparse.append(server_sparse_text(cat))
            for cap in _offered(cat):  # a held one as approved: refused by name if chosen
                caps.append(cap)
                owner.append(ci)
                dense.append(capability_dense_text(cap, cat.description))
                sparse.append(capability_sparse_text(cap, cat.description))
        return cls(tuple(catalogs), tuple(caps), tuple(owner), tuple(dense), tuple(sparse),
                   tuple(server_dense_text(c) for c in catalogs), tuple(server_sparse_text(c) for c in catalogs))


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_PROBES = 200  # pseudo-queries per level: bounds the embedding work of tuning a large catalog


def _cloze(description: str) -> tuple[str, str] | None:
    """The first sentence of a description with some content, and the description without it."""
    parts = [p.strip() for p in _SENTENCE.split(description or "") if p.strip()]
    for i, part in enumerate(parts):
        if len(tokenize(part)) >= 3:
            return part, " ".join(parts[:i] + parts[i + 1:])
    return None


def pseudo_queries(texts: CatalogTexts) -> dict[str, list[tuple[int, str, str, str]]]:
    """Per level ("tools", "servers"): (document id, pseudo-query, dense text and sparse text of the
    document without it), at most `MAX_PROBES` spread evenly over the catalog."""
    tools, servers = [], []
    for i, cap in enumerate(texts.capabilities):
        cat = texts.catalogs[texts.owner[i]]
        if cap.server_level:  # a stand-in's documents are its server's
            cut = _cloze(cat.description)
            if cut:
                rest = replace(cat, description=cut[1])
                tools.append((i, cut[0], server_dense_text(rest), server_sparse_text(rest)))
        elif (cut := _cloze(cap.description)) is not None:
            rest_cap = replace(cap, description=cut[1])
            tools.append((i, cut[0], capability_dense_text(rest_cap, cat.description),
                          capability_sparse_text(rest_cap, cat.description)))
    for j, cat in enumerate(texts.catalogs):
        if (cut := _cloze(cat.description)) is not None:
            rest = replace(cat, description=cut[1])
            servers.append((j, cut[0], server_dense_text(rest), server_sparse_text(rest)))

    def spread(items: list) -> list:
        step = len(items) / MAX_PROBES
        return items if len(items) <= MAX_PROBES else [items[int(k * step)] for k in range(MAX_PROBES)]

    return {"tools": spread(tools), "servers": spread(servers)}


@dataclass(frozen=True, slots=True)
class Ranked:
    """A capability with its retrieval scores; `score` is what the ranking used."""

    capability: Capability
    hit: Hit
    score: float
    server_score: float | None = None


@dataclass(frozen=True, slots=True)
class RankedServer:
    backend: str
    score: float
    hit: Hit | None


class CatalogIndex:
    def __init__(
        self,
        texts: CatalogTexts,
        tool_vectors: np.ndarray | None,
        server_vectors: np.ndarray | None,
        settings: RoutingSettings,
        alphas: tuple[float, float] | None = None,
    ) -> None:
        """`alphas`: the (tools, servers) fusion weights when already tuned (a restricted view keeps its
        catalog's); otherwise `settings.alpha` until `tune_alpha`."""
        self.texts = texts
        self.settings = settings
        tool_alpha, server_alpha = alphas or (settings.alpha, settings.alpha)
        self.tools = HybridIndex(texts.tool_sparse, tool_vectors, alpha=tool_alpha,
                                 dense_top_n=settings.dense_top_n)
        self.servers = HybridIndex(texts.server_sparse, server_vectors, alpha=server_alpha,
                                   dense_top_n=settings.dense_top_n)
        self._server_of = np.array(texts.owner, dtype=np.int64)
        # Each server's rows, in one pass (one scan per server is 20 million steps at a thousand servers).
        order = np.argsort(self._server_of, kind="stable")
        bounds = np.searchsorted(self._server_of[order], np.arange(len(texts.catalogs) + 1))
        self._by_server: list[np.ndarray] = [order[bounds[ci]:bounds[ci + 1]] for ci in range(len(texts.catalogs))]

    def __len__(self) -> int:
        return len(self.texts.capabilities)

    @functools.cached_property
    def _row_of(self) -> dict[str, int]:
        return {c.key: i for i, c in enumerate(self.texts.capabilities)}

    def restricted(self, keep: Callable[[Capability], bool], backends: Collection[str]) -> CatalogIndex:
        """The index of a subset (one principal's allowed capabilities), reusing the texts and vectors row
        by row, so a stand-in keeps its flow and a left-out one leaves no row behind. A backend of which
        nothing is kept leaves too."""
        t = self.texts
        rows = [i for i, cap in enumerate(t.capabilities) if t.catalogs[t.owner[i]].backend in backends and keep(cap)]
        cat_ids = sorted({t.owner[i] for i in rows})
        position = {ci: j for j, ci in enumerate(cat_ids)}
        kept: dict[int, list[Capability]] = {}  # each catalog's rows, in one pass over them
        for i in rows:
            if not t.capabilities[i].server_level:
                kept.setdefault(t.owner[i], []).append(t.capabilities[i])
        catalogs = tuple(replace(t.catalogs[ci], capabilities=tuple(c for c in kept.get(ci, ()) if not c.held),
                                 held=tuple(c for c in kept.get(ci, ()) if c.held)) for ci in cat_ids)
        texts = CatalogTexts(
            catalogs=catalogs, capabilities=tuple(t.capabilities[i] for i in rows),
            owner=tuple(position[t.owner[i]] for i in rows), tool_dense=tuple(t.tool_dense[i] for i in rows),
            tool_sparse=tuple(t.tool_sparse[i] for i in rows),
            server_dense=tuple(t.server_dense[ci] for ci in cat_ids),  # as embedded
            server_sparse=tuple(server_sparse_text(c) for c in catalogs))  # only what the principal may see
        return CatalogIndex(texts, self.tools.vectors(rows), self.servers.vectors(cat_ids), self.settings,
                            alphas=(self.tools.alpha, self.servers.alpha))

    def with_alphas(self, tools: float, servers: float) -> CatalogIndex:
        """The same index (its texts, vectors and BM25 shared) with other fusion weights."""
        twin = copy.copy(self)
        twin.tools, twin.servers = copy.copy(self.tools), copy.copy(self.servers)
        twin.tools.alpha, twin.servers.alpha = tools, servers
        return twin

    async def tune_alpha(self, embed: Callable[[list[str]], Awaitable[np.ndarray]]) -> tuple[float, float]:
        """Set each level's fusion weight from the catalog's own pseudo-queries (`self_tuned_alpha`, with
        `settings.alpha` as its floor); returns (tools, servers). Without vectors nothing changes. A level
        with too few descriptions to make pseudo-queries of keeps the floor."""
        if not self.settings.self_tune_alpha or not self.tools.dense:
            return self.tools.alpha, self.servers.alpha
        levels = pseudo_queries(self.texts)
        texts = [t for items in levels.values() for _, query, dense, _ in items for t in (query, dense)]
        if not texts:
            return self.tools.alpha, self.servers.alpha
        vectors = await embed(texts)  # each pseudo-query, then its document without it
        at = 0
        for name, index in (("tools", self.tools), ("servers", self.servers)):
            probes = []
            for doc, query, _, sparse in levels[name]:
                probes.append(Probe(doc, question_tokens(query), vectors[at], tokenize(sparse) or ["<empty>"],
                                    vectors[at + 1]))
                at += 2
            if index.dense:  # a search per probe and weight: off the event loop
                index.alpha = await asyncio.to_thread(self_tuned_alpha, index, probes, self.settings.alpha)
        return self.tools.alpha, self.servers.alpha

    def search(self, query: str, query_vector: np.ndarray | None, k: int, *, method: str | None = None,
               alpha: float | None = None, backends: set[str] | None = None,
               keys: Collection[str] | None = None) -> list[Ranked]:
        """`keys`: only these capabilities, looked for wherever they rank (every capability of `backends` is
        scored, not only those the dense half recalls): a named or learned capability."""
        method = method or self.settings.method
        whole = keys is not None
        wanted = None if keys is None else np.array([self._row_of[k] for k in keys if k in self._row_of],
                                                    dtype=np.int64)
        within = self._restrict(backends)
        if within is not None and within.size == 0:
            return []
        tokens = question_tokens(query)
        if method == "two_level" and backends is None and not whole:
            return self._two_level(query, tokens, query_vector, k, alpha)
        recall = len(self) if whole else None
        w = self.settings.server_weight
        if w <= 0 or len(self.texts.catalogs) < 2:
            hits = self.tools.search(query, query_vector, k, alpha=alpha, within=within, tokens=tokens, recall=recall,
                                     wanted=wanted)
            return [Ranked(self.texts.capabilities[h.doc], h, h.hybrid) for h in hits]
        # Each tool's score takes in its server's own document: what a server is for tells which of two
        # similar tools belongs to the task, and keeps a task's tools on its server.
        server_score = self._server_scores(query, tokens, query_vector, alpha)
        hits = self.tools.search(query, query_vector, k, alpha=alpha, within=within, tokens=tokens,
                                 prior=server_score[self._server_of], prior_weight=w, recall=recall, wanted=wanted)
        out = []
        for h in hits:
            server = float(server_score[self._server_of[h.doc]])
            out.append(Ranked(self.texts.capabilities[h.doc], h, (1 - w) * h.hybrid + w * server, server))
        return out

    def _server_scores(self, query: str, tokens: list[str], query_vector: np.ndarray | None,
                       alpha: float | None) -> np.ndarray:
        scores = np.zeros(len(self.texts.catalogs))
        for h in self.servers.search(query, query_vector, len(self.texts.catalogs), alpha=alpha, tokens=tokens):
            scores[h.doc] = h.hybrid
        return scores

    def rank_servers(self, query: str, query_vector: np.ndarray | None, k: int, *, method: str | None = None,
                     alpha: float | None = None) -> list[RankedServer]:
        """Servers by the best of their capabilities (flat) or by the combined two-level score."""
        ranked = self.search(query, query_vector, max(k * 20, 50), method=method, alpha=alpha)
        seen: dict[str, RankedServer] = {}
        for r in ranked:
            if r.capability.backend not in seen:
                seen[r.capability.backend] = RankedServer(r.capability.backend, r.score, r.hit)
        return list(seen.values())[:k]

    def _restrict(self, backends: set[str] | None) -> np.ndarray | None:
        if backends is None:
            return None
        ids = [self._by_server[ci] for ci, c in enumerate(self.texts.catalogs) if c.backend in backends]
        return np.concatenate(ids) if ids else np.empty(0, dtype=np.int64)

    def _two_level(self, query: str, tokens: list[str], qvec: np.ndarray | None, k: int,
                   alpha: float | None) -> list[Ranked]:
        servers = self.servers.search(query, qvec, self.settings.top_servers, alpha=alpha, tokens=tokens)
        if not servers:
            return []
        within = np.concatenate([self._by_server[h.doc] for h in servers])
        server_score = {h.doc: h.hybrid for h in servers}
        hits = self.tools.search(query, qvec, max(k * 4, 20), alpha=alpha, within=within, tokens=tokens)
        out = []
        for h in hits:
            s = server_score[int(self._server_of[h.doc])]
            # MCP-Zero's combination: rewards a tool only when both it and its server match.
            combined = (s * h.hybrid) * max(s, h.hybrid)
            out.append(Ranked(self.texts.capabilities[h.doc], h, combined, s))
        out.sort(key=lambda r: -r.score)
        return out[:k]
