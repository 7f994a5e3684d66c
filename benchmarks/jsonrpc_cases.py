"""Malformed JSON-RPC for the router's `/mcp/` endpoint, and what counts as a correct answer to it.

Used by `benchmarks/fuzz.py` (the long run) and `tests/e2e/test_fuzz.py` (a short one):

    cases = crafted_cases(max_body_bytes) + generated_cases(200, seed=1)
    for case in cases:
        verdict = judge(case, await send(client, url, case, api_key=None))

A malformed message must get a 4xx or a JSON-RPC error object; a notification or a response (no
request id) may get 202, as the streamable HTTP transport answers those; `tools/call` with arguments
that do not fit the tool may also come back as a tool result with `isError: true`, which is how MCP
reports a tool's input errors. Anything else (a 5xx, a timeout, a 2xx that treats the message as
valid) is a failure.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

ACCEPT = "application/json, text/event-stream"
JSON_HEADERS = {"content-type": "application/json", "accept": ACCEPT}


@dataclass(frozen=True, slots=True, kw_only=True)
class McpCase:
    name: str
    body: bytes
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON_HEADERS))
    may_be_accepted: bool = False  # a notification or response: 202 with no body is a correct answer
    tool_error_ok: bool = False  # tools/call with bad arguments: a result with isError is a correct answer


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    status: int | None  # None: no answer (timeout or connection error)
    reason: str


def _msg(**fields: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


def _call(name: str, arguments: Any, rid: Any = 1) -> bytes:
    return _msg(id=rid, method="tools/call", params={"name": name, "arguments": arguments})


_VALID = _msg(id=1, method="tools/list")


def crafted_cases(max_body_bytes: int) -> list[McpCase]:
    """One case per kind of malformed input the endpoint must refuse cleanly."""
    c: list[McpCase] = []
    add = c.append
    # Ids the protocol does not allow (MCP: a string or an integer, never null).
    for label, raw in [("null", b"null"), ("true", b"true"), ("float", b"1.5"), ("huge float", b"1e400"),
                       ("object", b'{"a": 1}'), ("array", b"[1]"), ("negative huge float", b"-1e999")]:
        add(McpCase(name=f"id is {label}", body=b'{"jsonrpc":"2.0","id":' + raw + b',"method":"ping"}'))
    # Wrong types in the envelope.
    add(McpCase(name="method is a number", body=_msg(id=1, method=5)))
    add(McpCase(name="method is null", body=_msg(id=1, method=None)))
    add(McpCase(name="params is a number", body=_msg(id=1, method="tools/list", params=5)))
    add(McpCase(name="params is a string", body=_msg(id=1, method="tools/call", params="universal_query")))
    add(McpCase(name="params is an array", body=_msg(id=1, method="ping", params=[1, 2])))
    add(McpCase(name="jsonrpc 1.0", body=json.dumps({"jsonrpc": "1.0", "id": 1, "method": "ping"}).encode()))
    add(McpCase(name="no jsonrpc member", body=json.dumps({"id": 1, "method": "ping"}).encode()))
    add(McpCase(name="jsonrpc is a number", body=json.dumps({"jsonrpc": 2.0, "id": 1, "method": "ping"}).encode()))
    add(McpCase(name="no method", body=_msg(id=1)))
    for label, raw in [("a string", b'"tools/list"'), ("null", b"null"), ("a number", b"42"), ("true", b"true")]:
        add(McpCase(name=f"body is {label}", body=raw))
    # Unknown methods.
    add(McpCase(name="unknown method", body=_msg(id=1, method="tools/destroy")))
    add(McpCase(name="empty method", body=_msg(id=1, method="")))
    add(McpCase(name="rpc. method", body=_msg(id=1, method="rpc.discover")))
    add(McpCase(name="unknown notification", body=_msg(method="notifications/nonsense"), may_be_accepted=True))
    add(McpCase(name="a response nobody asked for", body=_msg(id=99, result={}), may_be_accepted=True))
    # Huge ids that are legal must be echoed; a huge string id too.
    add(McpCase(name="id is a 40-digit integer", body=b'{"jsonrpc":"2.0","id":' + b"9" * 40 + b',"method":"x/y"}'))
    add(McpCase(name="id is a 100 kB string", body=_msg(id="i" * 100_000, method="x/y")))
    # Batches (removed from MCP in 2025-06-18).
    add(McpCase(name="empty batch", body=b"[]"))
    add(McpCase(name="batch of one", body=b"[" + _VALID + b"]"))
    add(McpCase(name="batch of three", body=b"[" + b",".join([_VALID] * 3) + b"]"))
    add(McpCase(name="batch of junk", body=b"[1, 2, 3]"))
    add(McpCase(name="nested batch", body=b"[[" + _VALID + b"]]"))
    # Truncated and broken bodies.
    for cut in (1, 10, len(_VALID) // 2, len(_VALID) - 1):
        add(McpCase(name=f"truncated at {cut} bytes", body=_VALID[:cut]))
    add(McpCase(name="empty body", body=b""))
    add(McpCase(name="not JSON", body=b"hello"))
    add(McpCase(name="invalid UTF-8", body=b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}'))
    add(McpCase(name="NaN id", body=b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}'))
    add(McpCase(name="trailing garbage", body=_VALID + b"}}"))
    add(McpCase(name="deeply nested params", body=b'{"jsonrpc":"2.0","id":1,"method":"ping","params":'
                + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}"))
    add(McpCase(name="deeply nested array", body=b"[" * 100_000 + b"]" * 100_000))
    # Content types and Accept headers.
    add(McpCase(name="text/plain", body=_VALID, headers={"content-type": "text/plain", "accept": ACCEPT}))
    add(McpCase(name="form encoded", body=b"jsonrpc=2.0&id=1&method=ping",
                headers={"content-type": "application/x-www-form-urlencoded", "accept": ACCEPT}))
    add(McpCase(name="no content type", body=_VALID, headers={"accept": ACCEPT}))
    add(McpCase(name="no Accept header", body=_VALID, headers={"content-type": "application/json"}))
    add(McpCase(name="Accept text/html", body=_VALID, headers={"content-type": "application/json",
                                                                "accept": "text/html"}))
    add(McpCase(name="bogus protocol version", body=_VALID,
                headers={**JSON_HEADERS, "mcp-protocol-version": "1999-01-01"}))
    add(McpCase(name="bogus session id", body=_VALID, headers={**JSON_HEADERS, "mcp-session-id": "\x7f" * 10}))
    add(McpCase(name="PUT", body=_VALID, method="PUT"))
    add(McpCase(name="DELETE", body=b"", method="DELETE"))
    add(McpCase(name="PATCH", body=_VALID, method="PATCH"))
    # Huge bodies: over the limit, and just under it.
    add(McpCase(name="body over the limit", body=_msg(id=1, method="ping", params={"x": "a" * max_body_bytes})))
    add(McpCase(name="question just under the limit", tool_error_ok=True,
                body=_call("universal_query", {"question": "q" * (max_body_bytes - 200)})))
    # Tool calls with arguments that do not fit.
    add(McpCase(name="tools/call without params", body=_msg(id=1, method="tools/call")))
    add(McpCase(name="tools/call unknown tool", body=_call("no_such_tool", {}), tool_error_ok=True))
    add(McpCase(name="tools/call name is a number", body=_call(7, {})))  # type: ignore[arg-type]
    add(McpCase(name="tools/call arguments is a list", body=_call("universal_query", ["q"])))
    for label, args in [("question is a number", {"question": 5}), ("question missing", {}),
                        ("question is blank", {"question": "   "}), ("unknown mode", {"question": "q", "mode": "x"}),
                        ("unknown backend", {"question": "q", "backend": "zzz"}),
                        ("parameters is a string", {"question": "q", "parameters": "hot"}),
                        ("session id too long", {"question": "q", "session_id": "s" * 10_000})]:
        add(McpCase(name=f"universal_query {label}", body=_call("universal_query", args), tool_error_ok=True))
    add(McpCase(name="explain_route question is a list", body=_call("explain_route", {"question": ["a"]}),
                tool_error_ok=True))
    add(McpCase(name="select_tools messages is empty", body=_call("select_tools", {"messages": []}),
                tool_error_ok=True))
    add(McpCase(name="select_tools role is wrong", tool_error_ok=True,
                body=_call("select_tools", {"messages": [{"role": "robot", "content": "hi"}]})))
    return c


_SCALARS: list[Any] = [None, True, False, 0, -1, 2**63, 1.5, -0.0, "", "x" * 300, "\u0000", "\ud7ff", [], {}]


def _junk(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth > 3 or pick < 0.6:
        return rng.choice(_SCALARS)
    if pick < 0.8:
        return [_junk(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "id", "method", "params", "name", "arguments", "question"]): _junk(rng, depth + 1)
            for _ in range(rng.randint(0, 3))}


# (tool, its required argument, values of the wrong type for it)
_NOT_STR: list[Any] = [None, True, 0, -1, 2**63, 1.5, [], {}, ["q"], {"question": "q"}]
_NOT_MESSAGES: list[Any] = [None, True, 0, "hi", {}, [], [1], ["hi"], [{"role": "robot", "content": "x"}], [[]]]
_REQUIRED = [("universal_query", "question", _NOT_STR), ("explain_route", "question", _NOT_STR),
             ("select_tools", "messages", _NOT_MESSAGES), ("no_such_tool", "question", _NOT_STR)]


def generated_cases(n: int, seed: int = 0) -> list[McpCase]:
    """`n` random malformed messages: bad ids, methods, params and arguments, and truncated bodies."""
    rng = random.Random(seed)
    methods = ["tools/call", "tools/list", "ping", "initialize", "resources/read", "prompts/get", "nope/x", ""]
    tools = ["universal_query", "explain_route", "select_tools"]
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:  # an id the protocol forbids
            rid = rng.choice([None, True, False, 1.25, [], {}, [1], {"id": 1}, 1e300])
            out.append(McpCase(name=f"random bad id {i}", body=json.dumps(
                {"jsonrpc": "2.0", "id": rid, "method": rng.choice(methods), "params": _junk(rng)}).encode()))
        elif kind == 1:  # junk params or method
            body = {"jsonrpc": "2.0", "id": rng.randint(-(2**40), 2**40),
                    "method": rng.choice([*methods, 5, None, [], {}]), "params": rng.choice([5, "x", [], True, -1.5])}
            out.append(McpCase(name=f"random bad params {i}", body=json.dumps(body).encode()))
        elif kind == 2:  # a tool call whose required argument has the wrong type, plus random others
            tool, required, wrong = rng.choice(_REQUIRED)
            args = {k: _junk(rng) for k in rng.sample(["mode", "backend", "intent", "parameters", "session_id",
                                                       "max_servers", "k"], rng.randint(0, 3))}
            args[required] = rng.choice(wrong)
            out.append(McpCase(name=f"random tool arguments {i}", tool_error_ok=True,
                               body=_call(tool, args, rid=rng.randint(1, 10**6))))
        else:  # a valid message cut short
            whole = _call(rng.choice(tools), {"question": "What time is it in Tokyo?"}, rid=i)
            out.append(McpCase(name=f"random truncation {i}", body=whole[:rng.randint(0, len(whole) - 1)]))
    return out


def _tool_error(payload: Any) -> bool:
    return isinstance(payload, dict) and isinstance(payload.get("result"), dict) and \
        payload["result"].get("isError") is True


def _json_rpc_error(payload: Any) -> bool:
    if isinstance(payload, list):
        return bool(payload) and all(_json_rpc_error(p) for p in payload)
    return isinstance(payload, dict) and isinstance(payload.get("error"), dict) and \
        isinstance(payload["error"].get("code"), int)


def judge(case: McpCase, status: int | None, body: bytes, elapsed_s: float) -> Verdict:
    """Whether the endpoint answered a malformed message correctly (see the module docstring)."""
    if status is None:
        return Verdict(False, None, f"no answer after {elapsed_s:.1f} s")
    if status >= 500:
        return Verdict(False, status, "server error")
    if 400 <= status < 500:
        return Verdict(True, status, "4xx")
    if status == 202 and not body.strip():
        return Verdict(case.may_be_accepted, status, "accepted without an answer")
    try:
        payload = json.loads(body)
    except ValueError:
        return Verdict(False, status, f"{status} without a JSON body")
    if _json_rpc_error(payload):
        return Verdict(True, status, "JSON-RPC error")
    if case.tool_error_ok and _tool_error(payload):
        return Verdict(True, status, "tool error")
    return Verdict(False, status, f"{status} treated as valid")


async def send(client: httpx.AsyncClient, url: str, case: McpCase, *, api_key: str | None = None,
               timeout_s: float = 30.0) -> tuple[Verdict, dict[str, Any]]:
    """Send one case to `url` (the `/mcp/` address); the verdict and a short record of the exchange."""
    headers = dict(case.headers)
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    started = time.monotonic()
    status, body = None, b""
    try:
        request = client.build_request(case.method, url, content=case.body, headers=headers, timeout=timeout_s)
        if "accept" not in headers:  # really none, not the client's default `*/*`
            del request.headers["accept"]
        r = await client.send(request)
        status, body = r.status_code, r.content
    except httpx.TimeoutException:
        pass
    except httpx.TransportError as exc:  # a dropped connection is a failure too, reported as such
        body = repr(exc).encode()
    elapsed = time.monotonic() - started
    verdict = judge(case, status, body, elapsed)
    record = {"case": case.name, "method": case.method, "status": status, "reason": verdict.reason,
              "request": case.body[:200].decode("utf-8", "replace"), "answer": body[:300].decode("utf-8", "replace")}
    return verdict, record
