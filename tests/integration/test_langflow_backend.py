"""The Langflow backend against a protocol-faithful fake server over real HTTP (no Ray).

The fake (tests/fakes) follows the public API documentation and the behaviour observed on Langflow 1.13.0, quirks
included; it is not the real product.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from actors.backends import BACKENDS, build_backend
from actors.backends.flowise import FlowiseBackend
from actors.backends.langflow import LangflowBackend
from router.errors import (
    AnswerTooLarge,
    BackendFailed,
    BackendTimeout,
    BackendUnavailable,
    BackendUnreachable,
    FlowNotFound,
    FlowUnauthorized,
    InvalidRequest,
)
from router.settings import LangflowSpec
from tests.fakes import serve_app
from tests.fakes.langflow import FakeLangflow, LangflowFlow
from tests.integration.flow_cases import (
    LANGFLOW_KEY,
    SUPPORT_ID,
    TRACEPARENT,
    WRONG_KEY,
    assert_no_secret,
    ctx,
    dead_url,
    flow_cap,
)

pytestmark = pytest.mark.timeout(30)


def test_both_kinds_are_registered() -> None:
    assert BACKENDS["flowise"] is FlowiseBackend and BACKENDS["langflow"] is LangflowBackend


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


async def test_an_answer_over_the_limit_is_refused_while_it_is_read(langflow: LangflowBackend) -> None:
    langflow.max_answer_bytes = 64  # the fake's answers are a few hundred bytes, streamed or not
    for stream in (False, True):
        with pytest.raises(AnswerTooLarge, match="max_answer_bytes"):
            await langflow.call(flow_cap("langflow", "plain", "flow-plain"), {"question": "hi"}, timeout_s=5,
                                context=ctx(stream=stream))


async def test_calls_without_a_session_never_share_the_flows_memory(langflow: LangflowBackend,
                                                                    langflow_server: Any) -> None:
    # Langflow keeps a call without a session under the flow's id: one memory for every caller.
    fake, _ = langflow_server
    sent = []
    for _ in range(2):
        await langflow.call(flow_cap("langflow", "plain", "flow-plain"), {"question": "hi"}, timeout_s=5,
                            context=ctx(session_id=None))
        sent.append(fake.last("/run/flow-plain").body["session_id"])
    assert len(set(sent)) == 2 and "flow-plain" not in sent
    # Nor may a tweak point a component at a session, which could be another caller's.
    for tweaks in ({"Memory-1": {"session_id": "alice/s1"}}, {"session_id": "alice/s1"}):  # one, or every one
        with pytest.raises(InvalidRequest, match="session_id"):
            await langflow.call(flow_cap("langflow", "plain", "flow-plain"), {"tweaks": tweaks}, timeout_s=5,
                                context=ctx())


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
    with pytest.raises(BackendFailed, match=r"the flow failed: Error running graph: the agent gave up$"):
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
    with pytest.raises(FlowNotFound, match=r"no flow 'Ghost' \(id 'nope'\) \(HTTP 404: Flow identifier nope not"):
        await langflow.call(flow_cap("langflow", "Ghost", "nope"), {}, timeout_s=5, context=ctx())
    with pytest.raises(BackendFailed) as err:
        await langflow.call(flow_cap("langflow", "Failing Flow", "flow-failing"), {}, timeout_s=5,
                            context=ctx())
    assert type(err.value) is BackendFailed
    # Langflow's detail is a JSON object in a string: only its message reaches the caller.
    assert err.value.message == ("backend 'langflow' (flow 'Failing Flow'): HTTP 500: Error running graph: "
                                 "component OpenAIModel failed")


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


async def test_a_flow_run_the_platform_never_received_is_unreachable_not_a_call_that_may_have_acted() -> None:
    # Once connected, the platform's process died: the run is refused at connecting, so nothing ran.
    gone = LangflowBackend(langflow_spec(dead_url(), connect_timeout_s=1))
    gone._client = httpx.AsyncClient(base_url=gone.spec.url)
    with pytest.raises(BackendUnreachable, match="cannot reach"):
        await gone.call(flow_cap("langflow", "Support", SUPPORT_ID), {}, timeout_s=5, context=ctx())
    await gone.close()
    with pytest.raises(BackendUnreachable, match="not connected"):
        await gone.call(flow_cap("langflow", "Support", SUPPORT_ID), {}, timeout_s=5, context=ctx())
