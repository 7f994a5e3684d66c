"""The optional LLM layer: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, ...).

    llm = LLMClient(settings.llm)                # LLMNotConfigured (503) naming the missing setting
    choice = await llm.choose_server(await llm.rewrite_query(messages), [(server, description, tools)])
    result = await llm.run_tool_loop(messages, openai_tools(name_map), name_map, executor, context)  # tool_loop

Structured answers (``response_format: json_schema``) are parsed and checked here: callers get a valid
value or an `LLMBadOutput`. Transport faults, after the SDK's own retries, are `LLMFailed`/`LLMTimeout`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from router.bounds import LONE_SURROGATE, is_unicode
from router.errors import (
    ArgumentsRequired,
    ConfigError,
    InvalidRequest,
    LLMBadOutput,
    LLMFailed,
    LLMNotConfigured,
    LLMTimeout,
)
from router.llm.tool_loop import LoopResult, input_schema, run_tool_loop
from router.schemas import schema_errors, with_defaults
from router.settings import LLMSettings
from router.strategies.base import Executor
from router.values import CallContext, Capability

if TYPE_CHECKING:
    import openai

Message = dict[str, Any]
ServerCandidate = tuple[str, str, Sequence[str]]  # (server name, description, its top tool names)
log = logging.getLogger("mcp_router.llm")
_MAX_BACKOFF_S = 8.0  # the openai SDK's longest wait between retries


@dataclass(frozen=True, slots=True)
class Choice:
    """`choose_server`'s answer: a server (and, when the model says, which of its listed tools), nothing
    relevant, or a question to ask the user."""

    kind: Literal["server", "none", "ambiguous"]
    server: str | None = None
    question: str | None = None
    reasoning: str = ""
    tool: str | None = None


_REWRITE = ("Rewrite the latest user request of this conversation as one standalone search query that "
            "needs no earlier turn: resolve every reference (it, that, there, the second one) from the "
            "conversation and keep names, numbers and places. Answer with JSON {\"query\": \"...\"}.")
_CHOOSE = ("Pick the server that should answer the user's question from the candidates below. decision "
           "'server': one candidate clearly fits (server = its name exactly as listed; tool = the one of its "
           "listed tools that does what the question asks, or null when none of them clearly does). 'none': "
           "no candidate can help. 'ambiguous': several fit and the question does not say which "
           "(clarifying_question = one short question for the user). Otherwise leave those fields null.")
_SELECT = ("List every server whose tools could help with the user's latest request, names exactly as "
           "listed. When unsure, include the server: a missing one cannot be used, an extra one costs "
           "little. Give a one-sentence reasoning.")
_FILL = ("Fill in the arguments of the tool below from the user's question, as JSON matching its input "
         "schema. Use only values the question states or clearly implies, in the form the schema asks "
         "for. Never invent a value: leave out any argument, required or not, that the question does "
         "not give.")
class LLMClient:
    """A chat-completions client built from `LLMSettings`, with the router's few structured prompts."""

    def __init__(self, settings: LLMSettings) -> None:
        if not settings.model:
            raise LLMNotConfigured("no LLM is configured: set llm.model (and llm.base_url or an API key)",
                                   missing="llm.model")
        key = settings.resolved_api_key()
        if not settings.base_url and not key:
            raise LLMNotConfigured(
                f"no LLM is configured: set llm.base_url, or an API key in the environment variable "
                f"{settings.api_key_env} (or llm.api_key)", missing=f"llm.base_url or {settings.api_key_env}")
        try:
            import openai
        except ImportError:
            raise ConfigError("llm is configured but the openai package is missing: "
                              "pip install 'mcp-router[llm]'") from None
        self._openai = openai
        self.settings = settings
        self.model: str = settings.model
        # A local server usually needs no key, but the SDK always sends one.
        self._client = openai.AsyncOpenAI(base_url=settings.base_url, api_key=key or "unused",
                                   timeout=settings.timeout_s, max_retries=settings.max_retries)

    async def close(self) -> None:
        await self._client.close()

    async def _chat(self, messages: Sequence[Message], **params: Any) -> Any:
        """One chat completion with at least one choice holding a message; SDK errors become router errors
        (the SDK has already retried), and an answer of any other shape is an `LLMBadOutput`."""
        s = self.settings
        try:
            # The SDK's timeout bounds each read, so a server trickling its answer would never time out: the
            # whole request, retries and their backoff included, is bounded here.
            async with asyncio.timeout(s.timeout_s * (s.max_retries + 1) + _MAX_BACKOFF_S * s.max_retries):
                resp = await self._client.chat.completions.create(model=self.model, messages=cast(Any, messages),
                                                                  **params)
        except (self._openai.APITimeoutError, TimeoutError) as exc:
            raise LLMTimeout(f"the LLM ({self.model}) did not answer within {s.timeout_s:g} s "
                             f"({s.max_retries} retries)", model=self.model) from exc
        except self._openai.APIConnectionError as exc:
            # Where the LLM is, and what the provider says, are the operator's: callers see the kind of failure.
            log.warning("cannot reach the LLM at %s: %s", self._client.base_url, exc)
            raise LLMFailed(f"cannot reach the LLM ({self.model}): {type(exc).__name__}; the router's log names "
                            "its address", model=self.model) from exc
        except self._openai.APIStatusError as exc:
            status = exc.status_code
            retried = s.max_retries if status in (408, 409, 429) or status >= 500 else 0
            after = f" after {retried} retries" if retried else ""
            log.warning("the LLM (%s) answered HTTP %s%s: %s", self.model, status, after, _api_message(exc))
            said = ("it refused the router's credentials (check llm.api_key_env)" if status in (401, 403)
                    else _redacted(_api_message(exc)))
            raise LLMFailed(f"the LLM ({self.model}) answered HTTP {status}{after}: {said}",
                            model=self.model, status=status) from exc
        except json.JSONDecodeError as exc:  # the SDK parsing a 200 whose body is not JSON
            raise LLMBadOutput(f"the LLM ({self.model}) answered with a body that is not JSON: {exc}",
                               model=self.model) from None
        # The SDK builds its response objects without validating them: a server's HTML page comes back as a
        # str, `choices: []` as an empty list.
        choices = getattr(resp, "choices", None)
        message = getattr(choices[0], "message", None) if isinstance(choices, list) and choices else None
        if not isinstance(message, self._openai.types.chat.ChatCompletionMessage) \
                or not isinstance(message.content, str | None):
            raise LLMBadOutput(f"the LLM ({self.model}) answered without a message in choices[0]: "
                               f"{str(resp)[:200]!r}", model=self.model)
        calls = message.tool_calls or []
        texts = [message.content or "", *(getattr(c, "id", "") or "" for c in calls),
                 *(getattr(getattr(c, "function", None), a, "") or "" for c in calls for a in ("name", "arguments"))]
        if not all(is_unicode(t) for t in texts if isinstance(t, str)):  # no answer or call could carry it on
            raise LLMBadOutput(f"the LLM ({self.model}) answered {LONE_SURROGATE.format('its message')}",
                               model=self.model)
        return resp

    async def complete_json(self, messages: Sequence[Message], schema_name: str, schema: dict[str, Any], *,
                            temperature: float = 0.0, max_tokens: int | None = None, strict: bool = True,
                            validate: bool = True) -> dict[str, Any]:
        """Ask for a JSON object matching `schema`; returns it parsed and checked, or raises LLMBadOutput."""
        params: dict[str, Any] = {"temperature": temperature, "response_format": {
            "type": "json_schema", "json_schema": {"name": schema_name, "schema": schema, "strict": strict}}}
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        resp = await self._chat(messages, **params)
        msg, finish = resp.choices[0].message, resp.choices[0].finish_reason
        if getattr(msg, "refusal", None):
            raise LLMBadOutput(f"the LLM refused {schema_name}: {msg.refusal}", schema=schema_name)
        text = re.sub(r"^```(?:json)?\s*|\s*```$", "", (msg.content or "").strip())
        try:
            value = json.loads(text)
        except ValueError as exc:
            cut = " (cut off at max_tokens)" if finish == "length" else ""
            raise LLMBadOutput(f"the LLM's answer for {schema_name} is not valid JSON{cut}: {exc}; "
                               f"got {text[:200]!r}", schema=schema_name) from None
        if not isinstance(value, dict):
            raise LLMBadOutput(f"the LLM's answer for {schema_name} is not a JSON object", schema=schema_name)
        if not is_unicode(json.dumps(value, ensure_ascii=False)):  # "\ud800" escaped in the JSON it wrote
            raise LLMBadOutput(f"the LLM's answer for {schema_name} holds {LONE_SURROGATE.format('a string')}",
                               schema=schema_name)
        if validate and (errors := schema_errors(value, schema)):
            raise LLMBadOutput(f"the LLM's answer for {schema_name} does not match its schema: "
                               + "; ".join(errors[:5]), schema=schema_name)
        return value

    async def rewrite_query(self, messages: Sequence[Message]) -> str:
        """A standalone routing query for the latest user turn; a lone user message is returned as it is."""
        turns = [m for m in messages if m.get("role") in ("user", "assistant")]
        if not any(m["role"] == "user" for m in turns):
            raise InvalidRequest("the conversation has no user message")
        if len(turns) == 1:
            return message_text(turns[0].get("content"))
        out = await self.complete_json(_ask(_REWRITE, _transcript(turns)), "routing_query",
                                       _object({"query": {"type": "string"}}), max_tokens=200)
        last = next(m for m in reversed(turns) if m["role"] == "user")
        return out["query"].strip() or message_text(last.get("content"))

    async def choose_server(self, question: str, candidates: Sequence[ServerCandidate]) -> Choice:
        """One of the candidate servers for `question`, "none relevant", or an ambiguity question."""
        names = [c[0] for c in candidates]
        if not names:
            return Choice("none", reasoning="no candidate servers")
        tools = {name: list(listed) for name, _, listed in candidates}
        tool_names = list(dict.fromkeys(t for listed in tools.values() for t in listed))
        schema = _object({
            "decision": {"type": "string", "enum": ["server", "none", "ambiguous"]},
            "server": {"type": ["string", "null"], "enum": [*names, None]},
            "tool": {"type": ["string", "null"], "enum": [*tool_names, None]},
            "clarifying_question": {"type": ["string", "null"]},
            "reasoning": {"type": "string"},
        })
        prompt = f"Question: {question}\n\nCandidates:\n{_describe(candidates)}"
        out = await self.complete_json(_ask(_CHOOSE, prompt), "server_choice", schema, max_tokens=300)
        kind = out["decision"]
        if kind == "server" and not out["server"]:
            raise LLMBadOutput("the LLM chose a server but did not name it", schema="server_choice")
        tool = out["tool"] if kind == "server" else None
        if tool is not None and tool not in tools[out["server"]]:
            raise LLMBadOutput(f"the LLM chose tool {tool!r}, which server {out['server']!r} does not list",
                               schema="server_choice")
        ask = out["clarifying_question"] or f"Which of these should answer: {', '.join(names)}?"
        return Choice(kind, server=out["server"] if kind == "server" else None,
                      question=ask if kind == "ambiguous" else None, reasoning=out["reasoning"], tool=tool)

    async def fill_arguments(self, question: str, capability: Capability) -> dict[str, Any]:
        """Arguments for `capability` from the question; ArgumentsRequired when required ones are missing."""
        schema = input_schema(capability)
        prompt = (f"Tool: {capability.name} (server {capability.backend})\n{capability.description}\n\n"
                  f"Input schema: {json.dumps(schema)}\n\nQuestion: {question}")
        out = await self.complete_json(_ask(_FILL, prompt), "tool_arguments", schema,
                                       strict=False, validate=False, max_tokens=500)
        required = [str(r) for r in schema.get("required", [])]
        args = with_defaults(schema, {k: v for k, v in out.items() if v is not None})
        missing = [r for r in required if args.get(r) is None]
        where = f"{capability.backend}/{capability.name}"
        if missing:
            raise ArgumentsRequired(f"tool {where} needs {', '.join(missing)}, which the question does not "
                                    "give", backend=capability.backend, tool=capability.name, missing=missing,
                                    input_schema=schema)
        if errors := schema_errors(args, schema):
            raise LLMBadOutput(f"the LLM's arguments for {where} do not match its schema: "
                               + "; ".join(errors[:5]), tool=capability.name)
        return args

    async def select_servers(self, conversation: Sequence[Message],
                             candidates: Sequence[ServerCandidate]) -> tuple[list[str], str]:
        """The servers the model finds relevant (erring towards more) and why; callers validate the names."""
        schema = _object({"relevant_servers": {"type": "array", "items": {"type": "string"}},
                          "reasoning": {"type": "string"}})
        turns = [m for m in conversation if m.get("role") in ("user", "assistant")]
        prompt = f"Conversation:\n{_transcript(turns)}\n\nServers:\n{_describe(candidates)}"
        out = await self.complete_json(_ask(_SELECT, prompt), "server_selection", schema,
                                       temperature=0.1, max_tokens=300)
        servers = list(dict.fromkeys(s.strip() for s in out["relevant_servers"] if s.strip()))
        return servers, out["reasoning"]

    async def run_tool_loop(self, messages: Sequence[Message], tools_openai_format: Sequence[dict[str, Any]],
                            name_map: Mapping[str, Capability], executor: Executor, context: CallContext,
                            max_turns: int | None = None, *, tool_timeout_s: float = 30.0,
                            tool_timeouts: Mapping[str, float] | None = None) -> LoopResult:
        """Let the model call tools through `executor` until it answers or `max_turns` model calls ran
        (router/llm/tool_loop.py)."""
        return await run_tool_loop(self._chat, self.settings, messages, tools_openai_format, name_map, executor,
                                   context, max_turns, tool_timeout_s=tool_timeout_s, tool_timeouts=tool_timeouts)

def _object(props: dict[str, Any]) -> dict[str, Any]:
    """A strict structured-output object schema: every property required, nothing else allowed."""
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _ask(system: str, user: str) -> list[Message]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def message_text(content: Any) -> str:
    """The text of a message's content: a string, or its text parts joined (images and other parts left out)."""
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)).strip()
    return content if isinstance(content, str) else ""


def _transcript(turns: Sequence[Message], limit: int = 8000) -> str:
    return "\n".join(f"{m['role']}: {message_text(m.get('content'))}" for m in turns)[-limit:]


def _describe(candidates: Sequence[ServerCandidate]) -> str:
    return "\n".join(f"- {name}: {desc or '(no description)'}" + (f" Tools: {', '.join(t)}." if t else "")
                     for name, desc, t in candidates)


# Key, organisation and project ids a provider's message may quote ("... in organization org-AbC123").
_IDS = re.compile(r"\b(?:sk|org|proj|key|user)-[\w*.-]{3,}", re.IGNORECASE)


def _redacted(message: str) -> str:
    return _IDS.sub("[redacted]", message)[:500]


def _api_message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    inner = body["error"] if isinstance(body.get("error"), dict) else body
    return str(inner.get("message") or exc.message)
