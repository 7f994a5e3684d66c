"""Flowise streaming as the product does it, against the double over real HTTP (no Ray).

Flowise 3.1.2 writes no response at all for an error of a request that asked for streaming before the
stream opened; these tests show the double does the same, and that the backend still reports such
errors with their cause at once: it asks for streaming only for flows that say they can stream, and
bounds the wait for the response to start.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

import actors.backends.flowise as flowise_module
from actors.backends.flowise import FlowiseBackend
from router.errors import BackendFailed, BackendTimeout, FlowNotFound, FlowUnauthorized
from router.settings import FlowiseSpec
from tests.fakes import serve_app
from tests.fakes.flowise import Chatflow, FakeFlowise
from tests.integration.flow_cases import FLOW_KEY, FLOWISE_KEY, WRONG_KEY, assert_no_secret, ctx, flow_cap

pytestmark = pytest.mark.timeout(30)

AGENT = "a9e00000-0000-4000-8000-000000000011"
QUIET_AGENT = "a9e00000-0000-4000-8000-000000000012"
BATCH_FAILING = "ba7c0000-0000-4000-8000-000000000013"
LOCKED_BATCH = "10c6ed00-0000-4000-8000-000000000014"
LOCKED_STREAM = "10c6ed00-0000-4000-8000-000000000015"
FLIPS = "f1195000-0000-4000-8000-000000000016"
UNKNOWN = "0000dead-0000-4000-8000-000000000000"
LONG_TIMEOUT_S = 20.0  # what a caller would wait if the backend hung; the tests must finish far sooner


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeFlowise, str]]:
    fake = FakeFlowise([
        Chatflow(id=AGENT, name="Support Agent", type="AGENTFLOW"),
        Chatflow(id=QUIET_AGENT, name="Quiet Agent", type="AGENTFLOW", streams_tokens=False),
        Chatflow(id=BATCH_FAILING, name="Batch Failing", streamable=False, error="no model configured"),
        Chatflow(id=LOCKED_BATCH, name="Locked Batch", streamable=False, api_key=FLOW_KEY),
        Chatflow(id=LOCKED_STREAM, name="Locked Stream", api_key=FLOW_KEY),
        Chatflow(id=FLIPS, name="Flips"),
    ], api_key=FLOWISE_KEY)
    with serve_app(fake.app) as url:
        yield fake, url


@pytest.fixture
async def backend(server: tuple[FakeFlowise, str]) -> AsyncIterator[FlowiseBackend]:
    fake, url = server
    fake.requests.clear()
    spec = FlowiseSpec.model_validate({"name": "flowise", "url": url, "api_key": FLOWISE_KEY,
                                       "timeout_s": LONG_TIMEOUT_S,
                                       "flows": [{"id": LOCKED_BATCH, "api_key": WRONG_KEY},
                                                 {"id": LOCKED_STREAM, "api_key": WRONG_KEY}]})
    backend = FlowiseBackend(spec)
    await backend.connect()
    yield backend
    await backend.shutdown()


@pytest.mark.parametrize("flow_id", [BATCH_FAILING, UNKNOWN, "not-a-uuid"])
async def test_the_double_like_flowise_sends_nothing_for_an_error_of_a_streaming_request(
        server: tuple[FakeFlowise, str], flow_id: str) -> None:
    fake, url = server
    before = fake.unanswered
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(f"{url}/api/v1/prediction/{flow_id}", json={"question": "hi", "streaming": True},
                              timeout=httpx.Timeout(10.0, read=0.5))  # a busy host may be slow to accept
        plain = await client.post(f"{url}/api/v1/prediction/{flow_id}", json={"question": "hi"})
    assert fake.unanswered == before + 1 and plain.status_code in (400, 404, 500)


async def test_the_streaming_check_answers_as_flowise_does(server: tuple[FakeFlowise, str]) -> None:
    _, url = server
    async with httpx.AsyncClient() as client:  # no key needed, as on Flowise
        agent = await client.get(f"{url}/api/v1/chatflows-streaming/{AGENT}")
        batch = await client.get(f"{url}/api/v1/chatflows-streaming/{BATCH_FAILING}")
        unknown = await client.get(f"{url}/api/v1/chatflows-streaming/{UNKNOWN}")
    assert agent.json() == {"isStreaming": True} and batch.json() == {"isStreaming": False}
    assert unknown.status_code == 500 and unknown.json()["message"].endswith(f"Chatflow {UNKNOWN} not found")


async def test_a_flow_that_cannot_stream_reports_its_error_at_once(backend: FlowiseBackend,
                                                                   server: tuple[FakeFlowise, str]) -> None:
    fake, _ = server
    started = time.monotonic()
    with pytest.raises(BackendFailed) as err:
        await backend.call(flow_cap("flowise", "Batch Failing", BATCH_FAILING), {}, timeout_s=LONG_TIMEOUT_S,
                           context=ctx(stream=True))
    assert time.monotonic() - started < 2
    assert err.value.message == "backend 'flowise' (flow 'Batch Failing'): HTTP 500: no model configured"
    assert fake.last(f"/prediction/{BATCH_FAILING}").body["streaming"] is False


@pytest.mark.parametrize("flow_id", [UNKNOWN, "not-a-uuid"])
async def test_an_unknown_flow_streamed_is_no_such_flow_at_once(backend: FlowiseBackend, flow_id: str) -> None:
    started = time.monotonic()
    with pytest.raises(FlowNotFound, match=r"Flowise has no flow 'Ghost'"):
        await backend.call(flow_cap("flowise", "Ghost", flow_id), {}, timeout_s=LONG_TIMEOUT_S,
                           context=ctx(stream=True))
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(("flow_id", "how"), [(LOCKED_BATCH, "HTTP 500"), (LOCKED_STREAM, "stream error event")])
async def test_a_rejected_per_flow_key_streamed_is_an_auth_error_at_once(
        backend: FlowiseBackend, server: tuple[FakeFlowise, str], flow_id: str, how: str) -> None:
    fake, _ = server
    started = time.monotonic()
    with pytest.raises(FlowUnauthorized, match=how) as err:
        await backend.call(flow_cap("flowise", "Locked", flow_id), {}, timeout_s=LONG_TIMEOUT_S,
                           context=ctx(stream=True))
    assert time.monotonic() - started < 2
    # A flow that can stream gets `streaming: true`; Flowise then opens the stream before checking the key.
    assert fake.last(f"/prediction/{flow_id}").body["streaming"] is (flow_id == LOCKED_STREAM)
    assert_no_secret(err.value)


async def test_the_streaming_verdict_is_remembered(backend: FlowiseBackend, server: tuple[FakeFlowise, str]) -> None:
    fake, _ = server
    for _ in range(3):
        await backend.call(flow_cap("flowise", "Support Agent", AGENT), {}, timeout_s=5, context=ctx(stream=True))
    assert sum(r.path.endswith(f"/chatflows-streaming/{AGENT}") for r in fake.requests) == 1
    await backend.call(flow_cap("flowise", "Support Agent", AGENT), {}, timeout_s=5, context=ctx())
    assert sum("/chatflows-streaming/" in r.path for r in fake.requests) == 1  # not asked without streaming


async def test_a_stream_that_does_not_start_is_bounded_apart_from_the_answer(
        backend: FlowiseBackend, server: tuple[FakeFlowise, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fake, _ = server
    flow = fake.flows[FLIPS]
    cap = flow_cap("flowise", "Flips", FLIPS)
    await backend.call(cap, {}, timeout_s=5, context=ctx(stream=True))  # it streams: remembered
    monkeypatch.setattr(flow, "streamable", False)  # edited meanwhile: it can no longer stream, and fails
    monkeypatch.setattr(flow, "error", "the flow was edited")
    monkeypatch.setattr(flowise_module, "FIRST_BYTE_S", 0.5)
    started = time.monotonic()
    with pytest.raises(BackendTimeout, match=r"started no response within 0.5 s to a streaming request") as err:
        await backend.call(cap, {}, timeout_s=LONG_TIMEOUT_S, context=ctx(stream=True))
    assert time.monotonic() - started < 2 and err.value.code == "backend_timeout"
    with pytest.raises(BackendFailed, match=r"HTTP 500: the flow was edited$"):  # asked again: the real cause
        await backend.call(cap, {}, timeout_s=LONG_TIMEOUT_S, context=ctx(stream=True))


async def test_an_agentflow_stream_has_its_own_events(backend: FlowiseBackend, server: tuple[FakeFlowise, str]) -> None:
    _, url = server
    async with httpx.AsyncClient() as client:
        raw = await client.post(f"{url}/api/v1/prediction/{AGENT}", json={"question": "hi", "streaming": True})
    events = [line.split('"event": "')[1].split('"')[0] for line in raw.text.splitlines() if line.startswith("data:")]
    assert "start" not in events and events[0] == "agentFlowEvent" and events[-2:] == ["metadata", "end"]
    assert {"nextAgentFlow", "agentFlowExecutedData", "token"} <= set(events)
    outcome = await backend.call(flow_cap("flowise", "Support Agent", AGENT), {}, timeout_s=5,
                                 context=ctx(stream=True))
    assert outcome.text == "Support Agent answers: How do I install it?" and outcome.session_id == "sess-42"


async def test_an_agentflow_without_tokens_answers_with_its_last_node(backend: FlowiseBackend) -> None:
    outcome = await backend.call(flow_cap("flowise", "Quiet Agent", QUIET_AGENT), {"question": "2+2?"},
                                 timeout_s=5, context=ctx(stream=True))
    assert outcome.text == "Quiet Agent answers: 2+2?"


async def test_a_run_stopped_part_way_is_a_failure_not_its_first_tokens_as_the_answer(
        backend: FlowiseBackend, server: tuple[FakeFlowise, str]) -> None:
    fake, _ = server
    fake.flows[FLIPS].stopped = True
    try:
        with pytest.raises(BackendFailed, match="the run was stopped before it finished"):
            await backend.call(flow_cap("flowise", "Flips", FLIPS), {}, timeout_s=5, context=ctx(stream=True))
    finally:
        fake.flows[FLIPS].stopped = False


async def test_flows_are_described_by_config_then_category_then_name(server: tuple[FakeFlowise, str],
                                                                     backend: FlowiseBackend) -> None:
    _, url = server
    async with httpx.AsyncClient() as client:  # Flowise's listing has no description at all
        listed = await client.get(f"{url}/api/v1/chatflows", headers={"Authorization": f"Bearer {FLOWISE_KEY}"})
    assert all("description" not in flow for flow in listed.json())
    caps = {c.target: c for c in (await backend.list_capabilities()).capabilities}
    assert caps[AGENT].description == "Flowise agentflow 'Support Agent'"

