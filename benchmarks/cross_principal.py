"""Two principals against one router, for `fuzz.py`: what the first sends never reaches the second, and the
first's calls never knock a backend out for the second.

    sent = await provoke(url, demo_key)            # canaries on every surface, and calls that fail on purpose
    answers, refused, bob_sent = await probe(url, bob_key)   # every shared surface, as the other principal
    leaks(sent | demo_fuzz_strings, bob_sent, answers, await public_text(url, operator_key))

`provoke` is what a careless or hostile caller does: questions, arguments, session ids and conversations
carrying a unique canary, tool calls whose errors echo them, a dozen calls that fail on purpose (more than
the failures in a row that eject a backend), feedback. `probe` reads as the second principal what every
caller shares (health, backends, a backend's detail, routes, answers over HTTP and MCP) and calls the same
backend. A leak is an answer to the second principal that holds a distinctive string only the first sent
(not one the router tells anyone about itself, such as a tool's name).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

# The backend both principals may use, and the tool the second may not (the bundled example's time server).
SHARED_BACKEND, SHARED_TOOL, DENIED_TOOL = "time", "get_current_time", "convert_time"
# Calls failing on purpose: more than the consecutive failures that eject a backend (5 by default).
BAD_CALLS = 12


def strings_in(value: Any) -> set[str]:
    """Every string value in a JSON-like value (keys are field names: public)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {s for v in value.values() for s in strings_in(v)}
    if isinstance(value, list | tuple):
        return {s for v in value for s in strings_in(v)}
    return set()


def distinctive(text: str) -> bool:
    """Long and varied enough that finding it in another answer is no coincidence."""
    return len(text) >= 10 and len(set(text)) >= 5


def leaks(first_sent: Iterable[str], second_sent: Iterable[str], answers: Iterable[str], public: str) -> list[str]:
    """The answers to the second principal holding a distinctive string only the first sent (shortened).
    `public`: what the router tells anyone about itself (its catalog, its API): a tool name the first
    principal sent is not its own."""
    only_first = {s for s in first_sent if distinctive(s) and s not in public} - set(second_sent)
    return [a[:300] for a in answers if any(s in a for s in only_first)]


async def public_text(url: str, operator_key: str | None) -> str:
    """What the router says of itself to an operator: the backends and their catalogs, the API, the MCP tools."""
    async with httpx.AsyncClient(headers=_auth(operator_key), timeout=60) as http:
        parts = [(await http.get(f"{url}{path}")).text for path in ("/v1/backends", "/openapi.json")]
        for question in ("What time is it in Tokyo?", "Convert 9am London time to Tokyo time"):
            parts.append((await http.post(f"{url}/v1/route", json={"question": question, "k": 100})).text)
    async with httpx2.AsyncClient(headers=_auth(operator_key), timeout=60) as http, \
            Client(streamable_http_client(f"{url}/mcp/", http_client=http)) as client:
        parts.append(json.dumps((await client.list_tools()).model_dump(mode="json")))
    return "\n".join(parts)


def _auth(key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"} if key else {}


async def provoke(url: str, key: str | None) -> set[str]:
    """The first principal's requests, each carrying a fresh canary; returns every string sent."""
    canary = f"canary{secrets.token_hex(6)}"
    sent: set[str] = set()
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("/v1/query", {"question": f"What time is it in {canary}-city?", "session_id": f"{canary}-session"}),
        ("/v1/query", {"question": f"convert 9am {canary}", "backend": SHARED_BACKEND, "tool": DENIED_TOOL,
                       "arguments": {"source_timezone": f"{canary}-tz", "time": "09:00",
                                     "target_timezone": "Asia/Tokyo"}}),
        ("/v1/route", {"question": f"Where should {canary}-route go?"}),
        ("/v1/tools/select", {"messages": [{"role": "user", "content": f"find {canary}-tools for me"}],
                              "session_id": f"{canary}-select"}),
    ]
    bodies += [("/v1/query", {"question": f"what time is it ({canary}-{i})", "backend": SHARED_BACKEND,
                              "tool": SHARED_TOOL, "arguments": {"timezone": f"No/Such-{canary}-{i}"}})
               for i in range(BAD_CALLS)]
    async with httpx.AsyncClient(headers=_auth(key), timeout=60) as http:
        for path, body in bodies:
            sent |= strings_in(body)
            answer = await http.post(f"{url}{path}", json=body)
            request_id = (answer.json().get("routing") or {}).get("request_id") if answer.status_code == 200 else None
            if request_id:
                feedback = {"request_id": request_id, "correct": False, "backend": SHARED_BACKEND,
                            "tool": DENIED_TOOL}
                await http.post(f"{url}/v1/feedback", json=feedback)
    async with httpx2.AsyncClient(headers=_auth(key), timeout=60) as http, \
            Client(streamable_http_client(f"{url}/mcp/", http_client=http)) as client:
        for name, arguments in (("universal_query", {"question": f"What time is it in {canary}-mcp?"}),
                                ("explain_route", {"question": f"route {canary}-explain"})):
            sent |= strings_in(arguments)
            await client.call_tool(name, arguments)
    return sent


async def probe(url: str, key: str | None) -> tuple[list[str], int, set[str]]:
    """The second principal's answers on every shared surface, how many of its calls to the shared
    backend were refused as ejected, and what it sent."""
    answers: list[str] = []
    ejected = 0
    sent = {"What time is it in Tokyo?", SHARED_BACKEND, SHARED_TOOL, "Asia/Tokyo"}
    async with httpx.AsyncClient(headers=_auth(key), timeout=60) as http:
        backends = await http.get(f"{url}/v1/backends")
        answers += [(await http.get(f"{url}/health")).text, backends.text, (await http.get(f"{url}/v1/stats")).text]
        for b in backends.json() if backends.status_code == 200 else []:
            answers.append((await http.get(f"{url}/v1/backends/{b['name']}")).text)
        answers.append((await http.post(f"{url}/v1/route", json={"question": "What time is it in Tokyo?"})).text)
        for _ in range(3):
            r = await http.post(f"{url}/v1/query", json={
                "question": "What time is it in Tokyo?", "backend": SHARED_BACKEND, "tool": SHARED_TOOL,
                "arguments": {"timezone": "Asia/Tokyo"}})
            answers.append(r.text)
            ejected += r.status_code == 503 and "ejected" in r.text
    async with httpx2.AsyncClient(headers=_auth(key), timeout=60) as http, \
            Client(streamable_http_client(f"{url}/mcp/", http_client=http)) as client:
        for name, arguments in (("list_backends", {}), ("explain_route", {"question": "What time is it in Tokyo?"}),
                                ("universal_query", {"question": "What time is it in Tokyo?"})):
            result = await client.call_tool(name, arguments)
            answers.append(json.dumps(result.model_dump(mode="json")))
    return answers, ejected, sent
