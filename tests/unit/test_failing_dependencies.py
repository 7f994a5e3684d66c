"""A dependency that fails or answers nonsense is a router error naming it, never a bare 500: an LLM's 200 that
is no chat completion (502), the feedback store or performance tracker slow or gone (503), an unforeseen
exception in an MCP tool call (a tool error, audited as a failure, logged with its traceback)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx2
import openai
import pytest
import ray
from mcp.server.mcpserver.exceptions import ToolError

from actors.feedback import FeedbackView
from deployments.caller import CURRENT, Caller
from deployments.mcp import build_mcp_server
from deployments.service import RouterService
from router.errors import ComponentUnavailable, ErrorKind, LLMBadOutput
from router.llm.client import LLMClient
from router.models import FeedbackRequest
from router.security.identity import Principal
from router.security.policy import Access
from router.settings import LearningSettings, LLMSettings, Policy, RouterSettings

# -- the LLM -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "content_type"), [
    (json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": []}),
     "application/json"),
    ("<html><body>Bad gateway</body></html>", "text/html"),
    ("<html><body>Bad gateway</body></html>", "application/json"),
    (json.dumps({"choices": [{"message": None}]}), "application/json"),
])
@pytest.mark.parametrize("call", ["complete_json", "run_tool_loop"])
async def test_an_llm_answering_200_without_a_chat_completion_is_llm_bad_output(
        monkeypatch: pytest.MonkeyPatch, body: str, content_type: str, call: str) -> None:
    def handler(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, text=body, headers={"content-type": content_type})

    real = openai.AsyncOpenAI  # the SDK speaks httpx2
    monkeypatch.setattr(openai, "AsyncOpenAI", lambda **kw: real(
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)), **kw))
    llm = LLMClient(LLMSettings(model="m", base_url="http://llm.test/v1", max_retries=0))
    messages = [{"role": "user", "content": "hello"}]
    with pytest.raises(LLMBadOutput) as info:
        if call == "complete_json":
            await llm.complete_json(messages, "answer", {"type": "object"})
        else:
            await llm.run_tool_loop(messages, [], {}, None, None)  # type: ignore[arg-type]
    assert info.value.status_code == 502 and "the LLM (m) answered" in info.value.message
    await llm.close()


# -- the router's own actors --------------------------------------------------------------------------------


class Failing:
    """An actor handle whose every call fails with `error` (what awaiting a dead or slow actor raises)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        return self

    def remote(self, *args: Any) -> Any:
        async def fail() -> Any:
            raise self.error
        return fail()


class Backends:
    def visible_backends(self, access: Access) -> list[str]:
        return ["time"]


def service_over(actor: Failing) -> RouterService:
    return RouterService(settings=RouterSettings(), router=Backends(),  # type: ignore[arg-type]
                         learning=FeedbackView(LearningSettings(), actor), perf_actor=actor,
                         directory=None, selector=None, chat_service=None, limiter=None,  # type: ignore[arg-type]
                         metrics=None, query_embed=None)  # type: ignore[arg-type]


OPERATOR = Caller(Access(Principal("op", "ops", "api_key"), Policy(stats=True)))
ASKS = {
    "feedback store": [lambda s: s.feedback(FeedbackRequest(request_id="r1", correct=True), OPERATOR),
                       lambda s: s.decisions(10, OPERATOR), lambda s: s.delete_examples("time", OPERATOR)],
    "performance tracker": [lambda s: s.stats(OPERATOR), lambda s: s.loadtest(OPERATOR),
                            lambda s: s.loadtest(OPERATOR, {"report": 1})],
}


@pytest.mark.parametrize("error", [TimeoutError(), ray.exceptions.ActorDiedError()])
@pytest.mark.parametrize("component", list(ASKS))
async def test_an_actor_that_is_slow_or_gone_is_a_503_naming_the_component(error: Exception,
                                                                            component: str) -> None:
    service = service_over(Failing(error))
    for ask in ASKS[component]:
        with pytest.raises(ComponentUnavailable) as info:
            await ask(service)
        assert info.value.status_code == 503 and f"the router's {component} is unavailable" in info.value.message


# -- MCP tool calls ------------------------------------------------------------------------------------------


class Broken:
    settings = RouterSettings()

    async def backends(self, caller: Caller) -> Any:
        raise RuntimeError("db password=hunter2")


async def test_an_unexpected_error_in_a_tool_call_is_a_tool_error_audited_as_a_failure_and_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    server = build_mcp_server(Broken(), RouterSettings())  # type: ignore[arg-type]
    caller = Caller(Access(Principal("p", "default", "api_key"), Policy()))
    token = CURRENT.set(caller)
    try:
        with caplog.at_level(logging.ERROR, logger="mcp_router.mcp"), pytest.raises(ToolError) as info:
            await server.call_tool("list_backends", {})
    finally:
        CURRENT.reset(token)
    assert f"internal_error: internal error; the router's log has the details under request id " \
           f"{caller.request_id}" in str(info.value) and "hunter2" not in str(info.value)
    assert caller.error is not None and caller.error.kind is ErrorKind.INTERNAL and caller.error.status_code == 500
    [logged] = [r for r in caplog.records if caller.request_id in r.getMessage()]
    assert logged.exc_info is not None and "hunter2" in str(logged.exc_info[1])


async def test_universal_query_without_a_mode_leaves_it_to_the_configured_default() -> None:
    """As `/v1/query` does: a policy that allows only hedged requests must not see a mode nobody asked for."""
    asked: list[Any] = []

    class Recording(Broken):
        async def query(self, request: Any, caller: Caller) -> Any:
            asked.append(request.mode)
            raise ComponentUnavailable("stop here")

    server = build_mcp_server(Recording(), RouterSettings())  # type: ignore[arg-type]
    token = CURRENT.set(Caller(Access(Principal("p", "default", "api_key"), Policy())))
    try:
        for arguments in ({"question": "hi"}, {"question": "hi", "mode": "hedged"}):
            with pytest.raises(ToolError):
                await server.call_tool("universal_query", arguments)
    finally:
        CURRENT.reset(token)
    assert asked == [None, "hedged"]


async def test_a_content_part_whose_text_is_not_a_string_is_refused_by_the_select_tools_tool() -> None:
    server = build_mcp_server(Broken(), RouterSettings())  # type: ignore[arg-type]
    caller = Caller(Access(Principal("p", "default", "api_key"), Policy()))
    token = CURRENT.set(caller)
    try:
        with pytest.raises(ToolError, match=r"messages\[0\]\.content\[0\]\.text must be a string"):
            part = {"type": "text", "text": 5}
            await server.call_tool("select_tools", {"messages": [{"role": "user", "content": [part]}]})
    finally:
        CURRENT.reset(token)
    assert caller.error is not None and caller.error.status_code == 400


async def test_a_retired_backend_whose_host_does_not_answer_leaves_the_hosts_other_backends_running(
        monkeypatch: Any) -> None:
    from actors import pool
    from actors.host import BackendRef

    killed: list[Any] = []
    monkeypatch.setattr(ray, "kill", lambda actor, no_restart=True: killed.append(actor))

    class Host:
        class retire:  # as a Ray actor's method is reached
            @staticmethod
            async def remote(member: str) -> int:
                raise ray.exceptions.ActorUnavailableError("the host is restarting", b"x" * 16)

    host = Host()
    await pool._retire(BackendRef(host, "a@1"))
    assert killed == []


async def test_a_launched_server_behind_a_wrapper_is_ended_with_it(tmp_path: Any) -> None:
    import os
    import socket
    import sys

    from actors.backends.mcp_http import McpHttpBackend
    from router.settings import RouterSettings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pid_file = tmp_path / "server.pid"
    server = f"{sys.executable} -c 'import os,http.server as h; open(\"{pid_file}\",\"w\").write(str(os.getpid())); " \
             f"h.HTTPServer((\"127.0.0.1\",{port}),h.BaseHTTPRequestHandler).serve_forever()'"
    spec = RouterSettings.model_validate({"backends": [{
        "name": "wrapped", "kind": "mcp_http", "url": f"http://127.0.0.1:{port}/mcp",
        "launch": {"command": "sh", "args": ["-c", f"{server} & wait"], "startup_timeout_s": 20}}]}).backends[0]
    backend = McpHttpBackend(spec)  # type: ignore[arg-type]
    await backend._ensure_process()  # the server, a child of the shell, listens
    pid = int(pid_file.read_text())
    await backend.shutdown()
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.1)
    else:
        os.kill(pid, 9)
        raise AssertionError("the server outlived its wrapper's shutdown")


async def test_a_port_another_process_holds_is_not_taken_for_the_launched_servers() -> None:
    # the previous deployment's server, still draining, answered in its place: the new one could not bind
    import socket
    import sys

    from actors.backends.mcp_http import McpHttpBackend
    from router.errors import BackendUnavailable
    from router.settings import RouterSettings

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        spec = RouterSettings.model_validate({"backends": [{
            "name": "kb", "kind": "mcp_http", "url": f"http://127.0.0.1:{port}/mcp",
            "launch": {"command": sys.executable, "args": ["-c", "import time; time.sleep(30)"]}}]}).backends[0]
        backend = McpHttpBackend(spec)  # type: ignore[arg-type]
        with pytest.raises(BackendUnavailable, match="already in use by another process"):
            await backend._ensure_process()
        assert backend._process is None  # nothing launched to fail on the port
