"""The Flowise backend against a protocol-faithful fake server over real HTTP (no Ray).

The fake (tests/fakes) follows the public API documentation and the behaviour observed on Flowise 3.1.2, quirks
included; it is not the real product.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from actors.backends import build_backend
from actors.backends.flowise import FlowiseBackend
from router.errors import (
    BackendBusy,
    BackendFailed,
    BackendTimeout,
    BackendUnavailable,
    FlowNotFound,
    FlowUnauthorized,
)
from router.settings import FlowiseSpec
from tests.fakes import serve_app
from tests.fakes.flowise import Chatflow, FakeFlowise
from tests.integration.flow_cases import (
    DOCS_ID,
    FLOW_KEY,
    FLOWISE_KEY,
    SECRETS,
    TRACEPARENT,
    WRONG_KEY,
    assert_no_secret,
    ctx,
    dead_url,
    flow_cap,
)

pytestmark = pytest.mark.timeout(30)

CALC = "c41c0000-0000-4000-8000-000000000002"
LOCKED = "10c6ed00-0000-4000-8000-000000000003"
BATCH = "ba7c0000-0000-4000-8000-000000000004"
SLOW = "510e0000-0000-4000-8000-000000000005"
BROKEN = "b20e0000-0000-4000-8000-000000000006"
FAILING = "fa110000-0000-4000-8000-000000000007"
STREAMFAIL = "5f0a0000-0000-4000-8000-000000000008"
NO_ANSWER = "0a0a0000-0000-4000-8000-000000000009"


# ---------------------------------------------------------------------------------------------
# Flowise


@pytest.fixture(scope="module")
def flowise_server() -> Iterator[tuple[FakeFlowise, str]]:
    fake = FakeFlowise([
        Chatflow(id=DOCS_ID, name="Docs QA", category="Documentation;Support",
                 source_documents=[{"pageContent": "Run pip install.", "metadata": {"source": "manual.md"}}]),
        Chatflow(id=CALC, name="Calculator Agent", type="AGENTFLOW",
                 used_tools=[{"tool": "calculator", "toolInput": {"input": "2+2"}, "toolOutput": "4"}]),
        Chatflow(id=LOCKED, name="Locked Flow", api_key=FLOW_KEY),
        Chatflow(id=BATCH, name="Batch Flow", streamable=False),
        Chatflow(id=SLOW, name="Slow Flow", delay_s=3.0),
        Chatflow(id=BROKEN, name="Broken Flow", malformed=True),
        Chatflow(id=FAILING, name="Failing Flow", error="model provider returned 429"),
        Chatflow(id=STREAMFAIL, name="Stream Fail", stream_error="the tool crashed"),
        Chatflow(id=NO_ANSWER, name="No Answer", body={"error": "quota exceeded"}),
    ], api_key=FLOWISE_KEY)
    with serve_app(fake.app) as url:
        yield fake, url


def flowise_spec(url: str, **overrides: Any) -> FlowiseSpec:
    data: dict[str, Any] = {
        "name": "flowise", "url": url, "api_key": FLOWISE_KEY, "timeout_s": 5, "intents": ["document-qa"],
        "flows": [{"id": DOCS_ID, "description": "Answers questions from the product manual",
                   "intents": ["document-qa"], "tags": ["docs"]},
                  {"id": LOCKED, "api_key": FLOW_KEY, "intents": ["general"]}],
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
    assert len(caps) == 9 and all(c.kind == "flow" and c.backend == "flowise" for c in caps.values())
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
    assert {c.target for c in (await backend.list_capabilities()).capabilities} == {DOCS_ID, LOCKED}
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


async def test_flowise_without_session_reports_none(flowise: FlowiseBackend, flowise_server: Any) -> None:
    """The chatId Flowise made is no session a caller could continue: the router scopes every session it is
    given to its caller, so that id would name another, empty memory."""
    fake, _ = flowise_server
    outcome = await flowise.call(flow_cap("flowise", "Calculator Agent", CALC), {"question": "2+2?"},
                                 timeout_s=5, context=ctx(session_id=None))
    assert outcome.text == "Calculator Agent answers: 2+2?"
    assert outcome.extra["usedTools"][0]["tool"] == "calculator"
    assert outcome.session_id is None and outcome.extra["chatId"]
    assert fake.last(f"/prediction/{CALC}").body["overrideConfig"] == {}


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
    outcome = await flowise.call(flow_cap("flowise", "Docs QA", DOCS_ID), {}, timeout_s=5,
                                 context=ctx(stream=True))
    # The `start` event repeats the first token: it must not be counted twice.
    assert outcome.text == "Docs QA answers: How do I install it?"
    assert outcome.session_id == "sess-42" and outcome.extra["sourceDocuments"][0]["pageContent"]
    assert fake.last(f"/prediction/{DOCS_ID}").body["streaming"] is True
    assert fake.last(f"/chatflows-streaming/{DOCS_ID}").method == "GET"


async def test_flowise_flow_that_cannot_stream_is_asked_for_json(flowise: FlowiseBackend,
                                                                 flowise_server: Any) -> None:
    fake, _ = flowise_server
    outcome = await flowise.call(flow_cap("flowise", "Batch Flow", BATCH), {}, timeout_s=5,
                                 context=ctx(stream=True))
    assert outcome.text == "Batch Flow answers: How do I install it?" and outcome.session_id == "sess-42"
    assert fake.last(f"/prediction/{BATCH}").body["streaming"] is False


async def test_flowise_error_event_in_a_stream_fails_the_call(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendFailed, match="the tool crashed"):
        await flowise.call(flow_cap("flowise", "Stream Fail", STREAMFAIL), {}, timeout_s=5,
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
    wrong = FlowiseBackend(flowise_spec(url, flows=[{"id": LOCKED, "api_key": WRONG_KEY}]))
    await wrong.connect()
    with pytest.raises(FlowUnauthorized, match="unauthorized") as err:
        await wrong.call(flow_cap("flowise", "Locked Flow", LOCKED), {}, timeout_s=5, context=ctx())
    assert "HTTP 500" in err.value.message and err.value.payload()["error"]["type"] == "backend_unauthorized"
    assert fake.last(f"/prediction/{LOCKED}").headers["authorization"] == f"Bearer {WRONG_KEY}"
    assert_no_secret(err.value, wrong)
    assert all(s not in caplog.text for s in SECRETS)
    await wrong.shutdown()

    right = FlowiseBackend(flowise_spec(url))  # the per-flow key replaces the backend key
    await right.connect()
    outcome = await right.call(flow_cap("flowise", "Locked Flow", LOCKED), {}, timeout_s=5, context=ctx())
    assert outcome.ok and fake.last(f"/prediction/{LOCKED}").headers["authorization"] == f"Bearer {FLOW_KEY}"
    assert_no_secret(outcome)
    await right.shutdown()


@pytest.mark.parametrize(("target", "answer"), [
    ("no-such-id", "HTTP 400: Invalid Chatflow ID"),  # Flowise checks the id is a UUID first
    ("0000dead-0000-4000-8000-000000000000",
     "HTTP 404: Chatflow 0000dead-0000-4000-8000-000000000000 not found in the database!"),
], ids=["not-a-uuid", "unknown-uuid"])
async def test_flowise_unknown_flow_is_no_such_flow(flowise: FlowiseBackend, target: str, answer: str) -> None:
    with pytest.raises(FlowNotFound) as err:
        await flowise.call(flow_cap("flowise", "Ghost", target), {}, timeout_s=5, context=ctx())
    assert err.value.message == (f"backend 'flowise' (flow 'Ghost'): Flowise has no flow 'Ghost' (id {target!r}) "
                                 f"({answer})")
    assert err.value.payload()["error"]["type"] == "flow_not_found" and err.value.status_code == 502


async def test_flowise_server_error_is_reported_with_its_message(flowise: FlowiseBackend,
                                                                 flowise_server: Any) -> None:
    _, url = flowise_server
    async with httpx.AsyncClient() as client:  # what the server says: Flowise's call site comes first
        raw = await client.post(f"{url}/api/v1/prediction/{FAILING}", json={"question": "hi"})
    assert raw.status_code == 500
    assert raw.json()["message"] == "Error: predictionsServices.buildChatflow - model provider returned 429"
    with pytest.raises(BackendFailed) as err:
        await flowise.call(flow_cap("flowise", "Failing Flow", FAILING), {}, timeout_s=5, context=ctx())
    assert type(err.value) is BackendFailed
    assert err.value.message == "backend 'flowise' (flow 'Failing Flow'): HTTP 500: model provider returned 429"
    assert_no_secret(err.value)


async def test_flowise_rate_limit_is_busy_not_a_run_that_failed(flowise: FlowiseBackend, flowise_server: Any) -> None:
    """Flowise refuses a run over the chatflow's rate limit before it starts: nothing ran, nothing is down."""
    fake, _ = flowise_server
    fake.flows[BATCH].quota = 0
    try:
        with pytest.raises(BackendBusy, match=r"did not start the run \(HTTP 429: You have reached the quota"):
            await flowise.call(flow_cap("flowise", "Batch Flow", BATCH), {}, timeout_s=5, context=ctx())
    finally:
        fake.flows[BATCH].quota = None


async def test_flowise_timeout(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendTimeout, match=r"'flowise' \(flow 'Slow Flow'\): no answer within 0.3 s"):
        await flowise.call(flow_cap("flowise", "Slow Flow", SLOW), {}, timeout_s=0.3, context=ctx())


async def test_flowise_prediction_without_an_answer_is_a_failure_not_an_empty_answer(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendFailed, match=r"no `text` or `json` \(keys: error\)"):
        await flowise.call(flow_cap("flowise", "No Answer", NO_ANSWER), {}, timeout_s=5, context=ctx())


async def test_flowise_malformed_body(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendFailed, match="malformed response"):
        await flowise.call(flow_cap("flowise", "Broken Flow", BROKEN), {}, timeout_s=5, context=ctx())


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
    assert len((await backend.list_capabilities()).capabilities) == 9
    assert fake.last("/chatflows").headers["authorization"] == f"Bearer {FLOWISE_KEY}"
    await backend.shutdown()
