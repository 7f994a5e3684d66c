"""The conversation behind POST /v1/chat: smart tool selection, then the LLM's tool-calling loop.

    service = ChatService(llm, selector, executor)
    response = await service.chat(ChatRequest(messages=[...], session_id="s1"), index)

A session keeps its selected servers across turns (the selector caches it); when the model says
the current servers cannot help, the session forgets them and the next turn re-routes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from router.errors import DeadlineExceeded, LimitExceeded, LLMNotConfigured, RouterError
from router.llm.client import LLMClient
from router.llm.selection import ToolSelector, conversation_text
from router.models import ChatRequest, ChatResponse
from router.retrieval.catalog import CatalogIndex
from router.strategies import Executor
from router.values import CallContext


class ChatService:
    def __init__(self, llm: LLMClient | None, selector: ToolSelector, executor: Executor,
                 not_configured: RouterError | None = None, max_turns: int = 8,
                 tool_timeouts: Mapping[str, float] | None = None) -> None:
        """`max_turns`: the model calls of one turn's tool loop (`llm.max_tool_turns`), and the most a
        request may ask for; `tool_timeouts`: each backend's call timeout (`backends[].timeout_s`)."""
        self.llm = llm
        self.max_turns = max_turns
        self.tool_timeouts = dict(tool_timeouts or {})
        self.selector = selector
        self.executor = executor
        self._not_configured = not_configured or LLMNotConfigured("no LLM is configured: set llm.model")

    async def chat(self, request: ChatRequest, index: CatalogIndex | None, *, deadline_s: float,
                   executor: Executor | None = None) -> ChatResponse:
        """One turn of the conversation, within `deadline_s` (every model and tool call included); tool
        calls go through `executor` (default: the service's), which may charge the caller for each."""
        if self.llm is None:
            raise self._not_configured
        most = self.max_turns
        if request.max_turns is not None and request.max_turns > most:
            raise LimitExceeded(f"max_turns {request.max_turns} is over the router's limit of {most} "
                                "(llm.max_tool_turns)", limit=most, setting="llm.max_tool_turns")
        deadline = asyncio.timeout(deadline_s)
        try:
            async with deadline:
                return await self._chat(request, index, executor or self.executor)
        except TimeoutError:
            if not deadline.expired():  # a timeout of its own inside the turn, not the deadline
                raise
            raise DeadlineExceeded(f"the conversation did not finish within its deadline of {deadline_s:g} s",
                                   deadline_s=deadline_s) from None

    async def _chat(self, request: ChatRequest, index: CatalogIndex | None, executor: Executor) -> ChatResponse:
        assert self.llm is not None
        messages = list(request.messages)
        selection_input = messages
        reused = request.session_id is not None and self.selector.has_session(request.session_id)
        if sum(m.get("role") == "user" for m in messages) > 1 and not reused:
            # A standalone query for routing, from the whole conversation (not when the session's selection will
            # be reused: its query would be asked of the model for nothing).
            rewritten = await self.llm.rewrite_query(messages)
            selection_input = [*messages, {"role": "user", "content": rewritten}]
        selection = await self.selector.select(index, selection_input, session_id=request.session_id,
                                               owner=request.principal or "")
        context = CallContext(question=conversation_text(messages).split("\n")[0], intent="general",
                              session_id=request.session_id, principal=request.principal)
        result = await self.llm.run_tool_loop(messages, selection.tools, selection.name_map, executor, context,
                                              request.max_turns or self.max_turns, tool_timeouts=self.tool_timeouts)
        if result.reroute and request.session_id:
            self.selector.forget(request.session_id)
        return ChatResponse(
            answer=result.answer, session_id=request.session_id, servers=selection.servers,
            tool_calls=[{"name": c.name, "backend": c.backend, "capability": c.capability, "arguments": c.arguments,
                         "ok": c.ok, "latency_ms": round(c.latency_ms, 2), "error": c.error}
                        for c in result.tool_calls],
            turns=result.turns, max_turns_reached=result.max_turns_reached, reroute=result.reroute,
            selection=selection.metrics, usage=dict(result.usage))
