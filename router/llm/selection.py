"""Smart tool selection: narrow a large tool set to the relevant servers' tools before an LLM call.

    selector = ToolSelector(settings.tool_selection, embed)
    selection = await selector.select(index, messages, session_id="abc")
    selection.tools        # OpenAI function format, names unique across servers
    selection.name_map     # unique name -> Capability, to map a model's tool call back

Below the thresholds (by default 30 tools and 4 servers) every tool is returned. Above them,
retrieval ranks servers for the whole conversation and for each step of the latest request, merges
those rankings, and keeps whole servers, best first, until they hold `max_tool_share` of all tools
(a server too big for what is left is passed over for smaller ones below it). With an LLM
configured, one small call chooses among retrieval's best servers (erring towards more); if it
fails or names unknown servers, retrieval's choice stands; if retrieval fails, every tool is
returned. A conversation's selection is made once per session and reused on its later turns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from router.cache import LRU
from router.errors import InvalidRequest, PayloadTooLarge, RouterError
from router.literals import EmbedFn
from router.llm.client import message_text
from router.llm.tool_loop import openai_tools, unique_tool_names
from router.retrieval.catalog import CatalogIndex
from router.retrieval.text import clauses
from router.settings import ToolSelectionSettings
from router.telemetry import event
from router.values import Capability

_SESSION_TTL_S = 24 * 3600


class ServerChooser(Protocol):
    async def select_servers(self, conversation: list[dict[str, Any]],
                             candidates: list[tuple[str, str, list[str]]]) -> tuple[list[str], str]: ...


def conversation_text(messages: Sequence[dict[str, Any]]) -> str:
    """Every user message, latest first (so the embedding model's truncation keeps the newest)."""
    texts = []
    for m in reversed(messages):
        if m.get("role") == "user" and (text := message_text(m.get("content")).strip()):
            texts.append(text)
    if not texts:
        raise InvalidRequest("messages: the conversation has no user message with text")
    return "\n".join(texts)


@dataclass(kw_only=True)
class Selection:
    tools: list[dict[str, Any]]
    name_map: dict[str, Capability]
    servers: list[str]
    reasoning: str
    path: str  # below_threshold | retrieval | llm | llm_fallback | all_tools_fallback | session_cache
    total_tools: int
    selection_ms: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)

    def finish(self, started: float) -> Selection:
        self.selection_ms = round((time.perf_counter() - started) * 1000, 3)
        selected = len(self.tools)
        self.metrics = {"total_tools": self.total_tools, "selected_tools": selected,
                        "reduction_ratio": round(1 - selected / self.total_tools, 4) if self.total_tools else 0.0,
                        "selection_ms": self.selection_ms, "path": self.path, "servers": len(self.servers)}
        return self


class ToolSelector:
    def __init__(self, settings: ToolSelectionSettings, embed: EmbedFn | None,
                 chooser: ServerChooser | None = None) -> None:
        self.settings = settings
        self._embed = embed
        self._chooser = chooser
        # A conversation's choice: its servers and the capabilities they offered (the tools are rebuilt from
        # these), a day at most, and one caller's many sessions push out only its own.
        self._sessions: LRU[str, Selection] = LRU(settings.session_cache_size, ttl_s=_SESSION_TTL_S, fair=True)

    def has_session(self, session_id: str) -> bool:
        """Whether a selection is kept for the session (its next turn reuses it while its tools are unchanged)."""
        return self._sessions.get(session_id) is not None

    def forget(self, session_id: str) -> None:
        """The conversation moved on: its next turn selects again."""
        self._sessions.pop(session_id)

    async def select(self, index: CatalogIndex | None, messages: list[dict[str, Any]], *,
                     session_id: str | None = None, max_servers: int | None = None, owner: str = "") -> Selection:
        """`max_servers`: fewer than `tool_selection.max_servers`, never more; `owner`: whose session it is."""
        started = time.perf_counter()
        size = len(conversation_text(messages).encode("utf-8", "surrogatepass"))
        if size > self.settings.max_conversation_bytes:
            raise PayloadTooLarge(f"the conversation's user messages are {size} bytes; the limit is "
                                  f"{self.settings.max_conversation_bytes} (tool_selection.max_conversation_bytes)",
                                  limit=self.settings.max_conversation_bytes)
        # A backend known only by its description has a stand-in, not a tool: nothing a model could call.
        tools = [c for c in (index.texts.capabilities if index else ())
                 if c.kind == "tool" and not c.held and not c.server_level]
        servers = sorted({c.backend for c in tools})
        event("smart_routing_start", total_tools=len(tools), servers=len(servers), session_id=session_id,
              messages=len(messages))
        try:
            limit = min(max_servers or self.settings.max_servers, self.settings.max_servers)
            selection = await self._select(index, tools, servers, messages, session_id, limit, owner)
        except RouterError as exc:
            event("smart_routing_end", success=False, error=exc.message,
                  duration_ms=round((time.perf_counter() - started) * 1000, 3))
            raise
        selection.finish(started)
        event("smart_routing_end", success=True, path=selection.path, total_tools=selection.total_tools,
              selected_tools=len(selection.tools), servers=",".join(selection.servers),
              reasoning=selection.reasoning[:500], duration_ms=selection.selection_ms)
        return selection

    async def _select(self, index: CatalogIndex | None, tools: list[Capability], servers: list[str],
                      messages: list[dict[str, Any]], session_id: str | None, max_servers: int,
                      owner: str) -> Selection:
        cached = self._sessions.get(session_id) if session_id else None
        # Kept only while every tool it offers is still the caller's to use (a narrower policy, a tool gone) as
        # it was (a tool that no longer claims to be read-only, a new schema), and within the servers allowed.
        current = {c.key: c for c in tools}
        if (cached is not None and all(current.get(c.key) == c for c in cached.name_map.values())
                and len(cached.servers) <= max_servers):
            return Selection(tools=openai_tools(cached.name_map), name_map=cached.name_map, servers=cached.servers,
                             reasoning=cached.reasoning, path="session_cache", total_tools=len(tools))
        text = conversation_text(messages)
        s = self.settings
        if index is None or len(tools) <= s.min_tools or len(servers) <= s.min_servers:
            few = (f"{len(tools)} tools, no more than tool_selection.min_tools ({s.min_tools})"
                   if len(tools) <= s.min_tools else
                   f"{len(servers)} servers, no more than tool_selection.min_servers ({s.min_servers})")
            return self._build(tools, servers, "below_threshold", len(tools),
                               f"{len(tools)} tools on {len(servers)} servers: {few}, so every tool is offered")
        try:
            ranked = await self._rank(index, text, messages)
        except (ValueError, RuntimeError, OSError) as exc:
            return self._build(tools, servers, "all_tools_fallback", len(tools), f"retrieval failed ({exc})")
        # Servers are ranked by all they list (flows, prompts, resources, held tools): only those with a tool to
        # offer may take one of the `max_servers` places.
        offering = set(servers)
        ranked = [b for b in ranked if b in offering]
        chosen = self._budget(ranked, tools, max_servers)
        path, reasoning = "retrieval", "servers ranked by hybrid retrieval over the conversation and its steps"
        if self._chooser is not None:
            candidates = [(b, index.texts.catalogs[self._catalog_pos(index, b)].description,
                           [c.name for c in tools if c.backend == b][:20]) for b in ranked[: s.llm_candidates]]
            try:
                picked, why = await self._chooser.select_servers(messages, candidates)
                known = [p for p in picked if p in ranked[: s.llm_candidates]]
                if known and len(known) == len(picked):  # held to the same servers and share of tools as retrieval
                    chosen, path, reasoning = self._budget(known, tools, max_servers), "llm", why
                else:
                    path, reasoning = "llm_fallback", f"the model named unknown servers {picked}; retrieval kept"
            except RouterError as exc:
                path, reasoning = "llm_fallback", f"the model call failed ({exc.message}); retrieval kept"
        selection = self._build([c for c in tools if c.backend in set(chosen)], chosen, path, len(tools), reasoning)
        if session_id:
            self._sessions.put(session_id, replace(selection, tools=[]), owner=owner)
        return selection

    async def _rank(self, index: CatalogIndex, text: str, messages: list[dict[str, Any]]) -> list[str]:
        latest = next(m for m in reversed(messages) if m.get("role") == "user")
        # At most `max_steps` steps are ranked on their own: the work a request makes is bounded.
        steps = clauses(message_text(latest.get("content")))[: self.settings.max_steps]
        queries = [text, *(steps if len(steps) > 1 else [])]
        vectors = await self._embed(queries) if self._embed is not None and index.tools.dense else None

        def rank_each() -> list[list[str]]:
            return [[r.backend for r in index.rank_servers(q, None if vectors is None else vectors[i],
                                                          len(index.texts.catalogs))]
                    for i, q in enumerate(queries)]

        lists = await asyncio.to_thread(rank_each)  # the replica's event loop keeps answering meanwhile
        order: list[str] = []
        for rank in range(max(len(x) for x in lists)):
            for lst in lists:  # round robin: each step's best servers come early
                if rank < len(lst) and lst[rank] not in order:
                    order.append(lst[rank])
        return order

    def _budget(self, ranked: list[str], tools: list[Capability], max_servers: int) -> list[str]:
        sizes: dict[str, int] = {}
        for c in tools:
            sizes[c.backend] = sizes.get(c.backend, 0) + 1
        budget = self.settings.max_tool_share * len(tools)
        chosen: list[str] = []
        held = 0
        for b in ranked:
            if chosen and len(chosen) >= max_servers:
                break
            if chosen and held + sizes.get(b, 0) > budget:
                continue  # too big for what is left: a smaller server further down may still fit
            chosen.append(b)
            held += sizes.get(b, 0)
        return chosen

    @staticmethod
    def _catalog_pos(index: CatalogIndex, backend: str) -> int:
        return next(i for i, c in enumerate(index.texts.catalogs) if c.backend == backend)

    @staticmethod
    def _build(tools: list[Capability], servers: list[str], path: str, total: int, reasoning: str) -> Selection:
        names = unique_tool_names(tools)
        return Selection(tools=openai_tools(names), name_map=names, servers=servers,
                         reasoning=reasoning, path=path, total_tools=total)
