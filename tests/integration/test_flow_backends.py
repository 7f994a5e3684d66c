"""The Flowise and Langflow backends against protocol-faithful fake servers over real HTTP (no Ray).

The fakes (tests/fakes) follow the public API documentation and the behaviour observed on Flowise
3.1.2 and Langflow 1.13.0, quirks included; they are not the real products.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from actors.backends import BACKENDS, build_backend
from actors.backends.flowise import FlowiseBackend
from actors.backends.http_flow import FlowUnauthorized
from actors.backends.langflow import LangflowBackend
from router.config import FlowiseSpec, LangflowSpec
from router.errors import BackendFailed, BackendTimeout, BackendUnavailable, RouterError
from router.models import Capability, Parameters
from router.strategies import CallContext
from tests.fakes import serve_app
from tests.fakes.flowise import Chatflow, FakeFlowise
from tests.fakes.langflow import FakeLangflow, LangflowFlow

pytestmark = pytest.mark.timeout(30)

FLOWISE_KEY = "fw-admin-SECRET-4d2c9e71"
FLOW_KEY = "fw-flow-SECRET-8b1f0355"
WRONG_KEY = "fw-wrong-SECRET-00000000"
LANGFLOW_KEY = "sk-lf-SECRET-77aa01bc"
SECRETS = (FLOWISE_KEY, FLOW_KEY, WRONG_KEY, LANGFLOW_KEY)
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
DOCS_ID = "0b6f1c2e-1d6a-4c39-9a0b-5c1f2e3d4a01"
SUPPORT_ID = "a1b2c3d4-0000-4000-8000-000000000001"


def ctx(session_id: str | None = "sess-42", **params: Any) -> CallContext:
    return CallContext(question="How do I install it?", intent="document-qa", session_id=session_id,
                       parameters=Parameters(**params) if params else None,
                       trace={"traceparent": TRACEPARENT})


def assert_no_secret(*objects: Any) -> None:
    for obj in objects:
        text = repr(obj) + str(obj)
        if isinstance(obj, RouterError):
            text += obj.message + str(obj.payload())
        for secret in SECRETS:
            assert secret not in text


def flow_cap(backend: str, name: str, target: str) -> Capability:
    return Capability(backend=backend, name=name, kind="flow", target=target)


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_both_kinds_are_registered() -> None:
    assert BACKENDS["flowise"] is FlowiseBackend and BACKENDS["langflow"] is LangflowBackend


# ---------------------------------------------------------------------------------------------
# Flowise


@pytest.fixture(scope="module")
def flowise_server() -> Iterator[tuple[FakeFlowise, str]]:
    fake = FakeFlowise([
        Chatflow(id=DOCS_ID, name="Docs QA", category="Documentation;Support",
                 source_documents=[{"pageContent": "Run pip install.", "metadata": {"source": "manual.md"}}]),
        Chatflow(id="calc", name="Calculator Agent", type="AGENTFLOW",
                 used_tools=[{"tool": "calculator", "toolInput": {"input": "2+2"}, "toolOutput": "4"}]),
        Chatflow(id="locked", name="Locked Flow", api_key=FLOW_KEY),
        Chatflow(id="batch", name="Batch Flow", streamable=False),
        Chatflow(id="slow", name="Slow Flow", delay_s=3.0),
        Chatflow(id="broken", name="Broken Flow", malformed=True),
        Chatflow(id="failing", name="Failing Flow", error="model provider returned 429"),
        Chatflow(id="streamfail", name="Stream Fail", stream_error="the tool crashed"),
    ], api_key=FLOWISE_KEY)
    with serve_app(fake.app) as url:
        yield fake, url


def flowise_spec(url: str, **overrides: Any) -> FlowiseSpec:
    data: dict[str, Any] = {
        "name": "flowise", "url": url, "api_key": FLOWISE_KEY, "timeout_s": 5, "intents": ["document-qa"],
        "flows": [{"id": DOCS_ID, "description": "Answers questions from the product manual",
                   "intents": ["document-qa"], "tags": ["docs"]},
                  {"id": "locked", "api_key": FLOW_KEY, "intents": ["general"]}],
    }
    return FlowiseSpec.model_validate(data | overrides)


@pytest.fixture
async def flowise(flowise_server: tuple[FakeFlowise, str]) -> AsyncIterator[FlowiseBackend]:
    fake, url = flowise_server
    fake.requests.clear()
    backend = build_backend(flowise_spec(url))
    assert isinstance(backend, FlowiseBackend)
    await backend.connect()
    yield backend
    await backend.shutdown()


async def test_flowise_lists_chatflows_as_capabilities(flowise: FlowiseBackend, flowise_server: Any) -> None:
    fake, _ = flowise_server
    catalog = await flowise.list_capabilities()
    caps = {c.name: c for c in catalog.capabilities}
    assert len(caps) == 8 and all(c.kind == "flow" and c.backend == "flowise" for c in caps.values())
    docs = caps["Docs QA"]
    assert docs.target == DOCS_ID and docs.intents == ("document-qa",) and docs.tags == ("docs",)
    assert docs.description == "Answers questions from the product manual"
    assert caps["Calculator Agent"].description == "Flowise agentflow 'Calculator Agent'"
    assert caps["Locked Flow"].intents == ("general",)
    assert catalog.intents == ("document-qa",)
    assert fake.last("/chatflows").headers["authorization"] == f"Bearer {FLOWISE_KEY}"
    assert_no_secret(catalog, flowise)


async def test_flowise_category_describes_unconfigured_flows_and_only_listed_flows_filters(
        flowise_server: Any) -> None:
    _, url = flowise_server
    backend = FlowiseBackend(flowise_spec(url, flows=[], only_listed_flows=False))
    await backend.connect()
    caps = {c.name: c for c in (await backend.list_capabilities()).capabilities}
    assert caps["Docs QA"].description == "Flowise chatflow 'Docs QA' (category: Documentation, Support)"
    await backend.close()
    backend = FlowiseBackend(flowise_spec(url, only_listed_flows=True))
    await backend.connect()
    assert {c.target for c in (await backend.list_capabilities()).capabilities} == {DOCS_ID, "locked"}
    await backend.shutdown()


async def test_flowise_prediction_passes_session_parameters_and_trace(flowise: FlowiseBackend,
                                                                      flowise_server: Any) -> None:
    fake, _ = flowise_server
    outcome = await flowise.call(flow_cap("flowise", "Docs QA", DOCS_ID), {}, timeout_s=5,
                                 context=ctx(temperature=0.2, max_tokens=256))
    assert outcome.ok and outcome.text == "Docs QA answers: How do I install it?"
    assert outcome.session_id == "sess-42"
    assert outcome.extra["sourceDocuments"][0]["metadata"]["source"] == "manual.md"
    assert outcome.extra["chatId"] == "sess-42"
    sent = fake.last(f"/prediction/{DOCS_ID}")
    assert sent.body == {"question": "How do I install it?", "history": [], "streaming": False,
                         "overrideConfig": {"sessionId": "sess-42", "temperature": 0.2, "maxTokens": 256}}
    assert sent.headers["traceparent"] == TRACEPARENT
    assert sent.headers["authorization"] == f"Bearer {FLOWISE_KEY}"
    assert_no_secret(outcome)


async def test_flowise_without_session_reports_the_session_flowise_created(flowise: FlowiseBackend,
                                                                           flowise_server: Any) -> None:
    fake, _ = flowise_server
    outcome = await flowise.call(flow_cap("flowise", "Calculator Agent", "calc"), {"question": "2+2?"},
                                 timeout_s=5, context=ctx(session_id=None))
    assert outcome.text == "Calculator Agent answers: 2+2?"
    assert outcome.extra["usedTools"][0]["tool"] == "calculator"
    assert outcome.session_id and outcome.session_id == outcome.extra["chatId"]
    assert fake.last("/prediction/calc").body["overrideConfig"] == {}


async def test_flowise_forwards_history(flowise: FlowiseBackend, flowise_server: Any) -> None:
    fake, _ = flowise_server
    history = [{"role": "userMessage", "content": "Hi, I am Bob"},
               {"role": "apiMessage", "content": "Hello Bob"}]
    outcome = await flowise.call(flow_cap("flowise", "Docs QA", DOCS_ID), {"history": history}, timeout_s=5,
                                 context=ctx())
    assert fake.last(f"/prediction/{DOCS_ID}").body["history"] == history
    assert outcome.text.endswith("(with 2 earlier messages)")


async def test_flowise_streaming_accumulates_tokens(flowise: FlowiseBackend, flowise_server: Any) -> None:
    fake, _ = flowise_server
    outcome = await flowise.call(flow_cap("flowise", "Calculator Agent", "calc"), {}, timeout_s=5,
                                 context=ctx(stream=True))
    # The `start` event repeats the first token: it must not be counted twice.
    assert outcome.text == "Calculator Agent answers: How do I install it?"
    assert outcome.session_id == "sess-42" and outcome.extra["usedTools"][0]["toolOutput"] == "4"
    assert fake.last("/prediction/calc").body["streaming"] is True


async def test_flowise_flow_that_cannot_stream_answers_json(flowise: FlowiseBackend) -> None:
    outcome = await flowise.call(flow_cap("flowise", "Batch Flow", "batch"), {}, timeout_s=5,
                                 context=ctx(stream=True))
    assert outcome.text == "Batch Flow answers: How do I install it?" and outcome.session_id == "sess-42"


async def test_flowise_error_event_in_a_stream_fails_the_call(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendFailed, match="the tool crashed"):
        await flowise.call(flow_cap("flowise", "Stream Fail", "streamfail"), {}, timeout_s=5,
                           context=ctx(stream=True))


@pytest.mark.parametrize("key", [None, WRONG_KEY], ids=["no-key", "wrong-key"])
async def test_flowise_listing_without_a_valid_key_is_a_clear_auth_error(flowise_server: Any,
                                                                         key: str | None) -> None:
    _, url = flowise_server
    backend = FlowiseBackend(flowise_spec(url, api_key=key))
    await backend.connect()
    with pytest.raises(FlowUnauthorized) as err:
        await backend.list_capabilities()
    assert err.value.code == "backend_unauthorized" and "'flowise'" in err.value.message
    assert "HTTP 401" in err.value.message
    assert ("no API key is configured" in err.value.message) == (key is None)
    assert_no_secret(err.value, backend)
    await backend.shutdown()


async def test_flowise_wrong_per_flow_key_500_quirk_is_an_auth_error(flowise_server: Any,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    fake, url = flowise_server
    caplog.set_level(logging.DEBUG)
    wrong = FlowiseBackend(flowise_spec(url, flows=[{"id": "locked", "api_key": WRONG_KEY}]))
    await wrong.connect()
    with pytest.raises(FlowUnauthorized, match="unauthorized") as err:
        await wrong.call(flow_cap("flowise", "Locked Flow", "locked"), {}, timeout_s=5, context=ctx())
    assert "HTTP 500" in err.value.message and err.value.payload()["error"]["type"] == "backend_unauthorized"
    assert fake.last("/prediction/locked").headers["authorization"] == f"Bearer {WRONG_KEY}"
    assert_no_secret(err.value, wrong)
    assert all(s not in caplog.text for s in SECRETS)
    await wrong.shutdown()

    right = FlowiseBackend(flowise_spec(url))  # the per-flow key replaces the backend key
    await right.connect()
    outcome = await right.call(flow_cap("flowise", "Locked Flow", "locked"), {}, timeout_s=5, context=ctx())
    assert outcome.ok and fake.last("/prediction/locked").headers["authorization"] == f"Bearer {FLOW_KEY}"
    assert_no_secret(outcome)
    await right.shutdown()


async def test_flowise_unknown_flow_is_a_404_naming_the_flow(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendFailed, match=r"no flow 'Ghost' \(id 'no-such-id'\) \(HTTP 404\)") as err:
        await flowise.call(flow_cap("flowise", "Ghost", "no-such-id"), {}, timeout_s=5, context=ctx())
    assert type(err.value) is BackendFailed


async def test_flowise_server_error_is_reported_with_its_message(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendFailed, match="HTTP 500: Error: buildChatflow - model provider") as err:
        await flowise.call(flow_cap("flowise", "Failing Flow", "failing"), {}, timeout_s=5, context=ctx())
    assert type(err.value) is BackendFailed
    assert_no_secret(err.value)


async def test_flowise_timeout(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendTimeout, match=r"'flowise' \(flow 'Slow Flow'\): no answer within 0.3 s"):
        await flowise.call(flow_cap("flowise", "Slow Flow", "slow"), {}, timeout_s=0.3, context=ctx())


async def test_flowise_malformed_body(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendFailed, match="malformed response"):
        await flowise.call(flow_cap("flowise", "Broken Flow", "broken"), {}, timeout_s=5, context=ctx())


async def test_flowise_health_pings_and_a_dead_url_is_unavailable(flowise: FlowiseBackend,
                                                                  flowise_server: Any) -> None:
    fake, _ = flowise_server
    await flowise.health(2)
    assert fake.last().path == "/api/v1/ping"
    dead = FlowiseBackend(flowise_spec(dead_url(), connect_timeout_s=1))
    with pytest.raises(BackendUnavailable, match="'flowise' \\(connect\\): cannot reach"):
        await dead.connect()
    assert not dead.connected
    with pytest.raises(BackendUnavailable, match="not connected"):
        await dead.health(1)


async def test_flowise_key_from_the_environment(flowise_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake, url = flowise_server
    monkeypatch.setenv("TEST_FLOWISE_KEY", FLOWISE_KEY)
    backend = FlowiseBackend(flowise_spec(url, api_key=None, api_key_env="TEST_FLOWISE_KEY"))
    await backend.connect()
    assert len((await backend.list_capabilities()).capabilities) == 8
    assert fake.last("/chatflows").headers["authorization"] == f"Bearer {FLOWISE_KEY}"
    await backend.shutdown()


# ---------------------------------------------------------------------------------------------
# Langflow


@pytest.fixture(scope="module")
def langflow_server() -> Iterator[tuple[FakeLangflow, str]]:
    fake = FakeLangflow([
        LangflowFlow(id=SUPPORT_ID, name="Support Bot", description="Answers support tickets",
                     endpoint_name="support", tags=["support"]),
        LangflowFlow(id="flow-plain", name="Plain Flow"),
        LangflowFlow(id="flow-messages", name="Messages Flow", shape="messages"),
        LangflowFlow(id="flow-artifacts", name="Artifacts Flow", shape="artifacts"),
        LangflowFlow(id="flow-empty", name="Empty Flow", shape="empty"),
        LangflowFlow(id="flow-notokens", name="No Tokens", streams_tokens=False),
        LangflowFlow(id="flow-slow", name="Slow Flow", delay_s=3.0),
        LangflowFlow(id="flow-broken", name="Broken Flow", malformed=True),
        LangflowFlow(id="flow-failing", name="Failing Flow", error="component OpenAIModel failed"),
        LangflowFlow(id="flow-streamfail", name="Stream Fail", stream_error="the agent gave up"),
        LangflowFlow(id="comp-1", name="My Component", is_component=True),
    ], api_keys=(LANGFLOW_KEY,))
    with serve_app(fake.app) as url:
        yield fake, url


def langflow_spec(url: str, **overrides: Any) -> LangflowSpec:
    data: dict[str, Any] = {
        "name": "langflow", "url": url, "api_key": LANGFLOW_KEY, "timeout_s": 5,
        "flows": [{"id": "support", "intents": ["general"], "tags": ["tickets"]},
                  {"id": "flow-plain", "name": "plain", "description": "A plain chat flow",
                   "intents": ["document-qa"]}],
    }
    return LangflowSpec.model_validate(data | overrides)


@pytest.fixture
async def langflow(langflow_server: tuple[FakeLangflow, str]) -> AsyncIterator[LangflowBackend]:
    fake, url = langflow_server
    fake.requests.clear()
    fake.health = "ok"
    backend = build_backend(langflow_spec(url))
    assert isinstance(backend, LangflowBackend)
    await backend.connect()
    yield backend
    await backend.shutdown()


async def test_langflow_lists_flows_as_capabilities(langflow: LangflowBackend, langflow_server: Any) -> None:
    fake, _ = langflow_server
    catalog = await langflow.list_capabilities()
    caps = {c.name: c for c in catalog.capabilities}
    assert "My Component" not in caps and len(caps) == 10
    support = caps["Support Bot"]  # configured by endpoint name
    assert support.target == SUPPORT_ID and support.intents == ("general",)
    assert support.tags == ("tickets", "support")
    assert support.description == "Answers support tickets"
    assert caps["plain"].target == "flow-plain" and caps["plain"].description == "A plain chat flow"
    assert caps["Messages Flow"].description == "Langflow flow 'Messages Flow'"
    sent = fake.last("/api/v1/flows/")
    assert sent.query["get_all"] == "true" and sent.headers["x-api-key"] == LANGFLOW_KEY
    assert_no_secret(catalog, langflow)
    only = LangflowBackend(langflow_spec(langflow.spec.url, only_listed_flows=True))
    await only.connect()
    assert {c.target for c in (await only.list_capabilities()).capabilities} == {SUPPORT_ID, "flow-plain"}
    await only.shutdown()


async def test_langflow_run_passes_session_and_tweaks(langflow: LangflowBackend,
                                                      langflow_server: Any) -> None:
    fake, _ = langflow_server
    tweaks = {"ChatOutput-x7Kq2": {"should_store_message": False}}
    outcome = await langflow.call(flow_cap("langflow", "Support Bot", SUPPORT_ID), {"tweaks": tweaks},
                                  timeout_s=5, context=ctx(temperature=0.1, max_tokens=64))
    assert outcome.ok and outcome.text == "Support Bot says: How do I install it?"
    assert outcome.session_id == "sess-42"
    sent = fake.last(f"/run/{SUPPORT_ID}")
    assert sent.query == {"stream": "false"}
    assert sent.body == {"input_value": "How do I install it?", "input_type": "chat", "output_type": "chat",
                         "session_id": "sess-42", "tweaks": tweaks}  # temperature / max_tokens: not mapped
    assert sent.headers["x-api-key"] == LANGFLOW_KEY and sent.headers["traceparent"] == TRACEPARENT
    assert_no_secret(outcome)


async def test_langflow_flow_id_fallback_session_is_not_reported(langflow: LangflowBackend,
                                                                 langflow_server: Any) -> None:
    _, url = langflow_server
    async with httpx.AsyncClient() as client:  # what the server does: the flow id stands in as session id
        raw = await client.post(f"{url}/api/v1/run/flow-plain", params={"stream": "false"},
                                json={"input_value": "hi"}, headers={"x-api-key": LANGFLOW_KEY})
    assert raw.json()["session_id"] == "flow-plain"
    outcome = await langflow.call(flow_cap("langflow", "plain", "flow-plain"), {"question": "hi"},
                                  timeout_s=5, context=ctx(session_id=None))
    assert outcome.text == "Plain Flow says: hi" and outcome.session_id is None


@pytest.mark.parametrize(("flow", "name"), [("flow-messages", "Messages Flow"),
                                            ("flow-artifacts", "Artifacts Flow")])
async def test_langflow_answer_found_in_other_places(langflow: LangflowBackend, flow: str, name: str) -> None:
    outcome = await langflow.call(flow_cap("langflow", name, flow), {}, timeout_s=5, context=ctx())
    assert outcome.text == f"{name} says: How do I install it?"


async def test_langflow_output_without_a_message(langflow: LangflowBackend) -> None:
    with pytest.raises(BackendFailed, match="no message in the flow's output"):
        await langflow.call(flow_cap("langflow", "Empty Flow", "flow-empty"), {}, timeout_s=5, context=ctx())


@pytest.mark.parametrize("flow", ["flow-plain", "flow-notokens"])
async def test_langflow_streaming(langflow: LangflowBackend, langflow_server: Any, flow: str) -> None:
    fake, _ = langflow_server
    outcome = await langflow.call(flow_cap("langflow", "plain", flow), {}, timeout_s=5,
                                  context=ctx(stream=True))
    name = "Plain Flow" if flow == "flow-plain" else "No Tokens"
    assert outcome.text == f"{name} says: How do I install it?" and outcome.session_id == "sess-42"
    assert fake.last(f"/run/{flow}").query == {"stream": "true"}


async def test_langflow_stream_error_event(langflow: LangflowBackend) -> None:
    with pytest.raises(BackendFailed, match="the flow failed: the agent gave up"):
        await langflow.call(flow_cap("langflow", "Stream Fail", "flow-streamfail"), {}, timeout_s=5,
                            context=ctx(stream=True))


@pytest.mark.parametrize("key", [None, WRONG_KEY], ids=["no-key", "wrong-key"])
async def test_langflow_403_is_a_clear_auth_error(langflow_server: Any, key: str | None) -> None:
    _, url = langflow_server
    backend = LangflowBackend(langflow_spec(url, api_key=key))
    await backend.connect()  # /health_check needs no key
    with pytest.raises(FlowUnauthorized, match=r"'langflow' \(listing flows\): Langflow refused") as err:
        await backend.list_capabilities()
    assert "HTTP 403" in err.value.message
    with pytest.raises(FlowUnauthorized) as run_err:
        await backend.call(flow_cap("langflow", "plain", "flow-plain"), {}, timeout_s=5, context=ctx())
    assert_no_secret(err.value, run_err.value, backend)
    await backend.shutdown()


async def test_langflow_unknown_flow_and_server_error(langflow: LangflowBackend) -> None:
    with pytest.raises(BackendFailed, match=r"no flow 'Ghost' \(id 'nope'\) \(HTTP 404\)"):
        await langflow.call(flow_cap("langflow", "Ghost", "nope"), {}, timeout_s=5, context=ctx())
    with pytest.raises(BackendFailed, match="HTTP 500: Error running graph: component OpenAIModel") as err:
        await langflow.call(flow_cap("langflow", "Failing Flow", "flow-failing"), {}, timeout_s=5,
                            context=ctx())
    assert type(err.value) is BackendFailed


async def test_langflow_timeout_and_malformed_body(langflow: LangflowBackend) -> None:
    with pytest.raises(BackendTimeout, match=r"'langflow' \(flow 'Slow Flow'\): no answer within 0.3 s"):
        await langflow.call(flow_cap("langflow", "Slow Flow", "flow-slow"), {}, timeout_s=0.3, context=ctx())
    with pytest.raises(BackendFailed, match="malformed response"):
        await langflow.call(flow_cap("langflow", "Broken Flow", "flow-broken"), {}, timeout_s=5,
                            context=ctx())


async def test_langflow_health_check(langflow: LangflowBackend, langflow_server: Any) -> None:
    fake, _ = langflow_server
    await langflow.health(2)
    assert fake.last().path == "/health_check"
    fake.health = "error: database is locked"
    with pytest.raises(BackendUnavailable, match=r"HTTP 500.*database is locked"):
        await langflow.health(2)
    dead = LangflowBackend(langflow_spec(dead_url(), connect_timeout_s=1))
    with pytest.raises(BackendUnavailable, match="cannot reach"):
        await dead.connect()
