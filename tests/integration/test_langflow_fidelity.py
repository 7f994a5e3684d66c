"""Langflow 1.13.0 behaviours the backend must handle, against the double over real HTTP (no Ray):
starter templates in the listing, errors wrapped in JSON strings, failing streams, refused tweaks, and
the flow id standing in as session id.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from actors.backends.langflow import LangflowBackend
from router.errors import BackendFailed, BackendRejectedArguments
from router.settings import LangflowSpec
from tests.fakes import serve_app
from tests.fakes.langflow import FakeLangflow, LangflowFlow
from tests.integration.flow_cases import LANGFLOW_KEY, SUPPORT_ID, assert_no_secret, ctx, flow_cap

pytestmark = pytest.mark.timeout(30)

TEMPLATES = ["Basic Prompting", "Vector Store RAG", "Simple Agent"]
REFUSED_TWEAK = {"ChatInput-Ab3xY": {"input_value": "something else"}}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeLangflow, str]]:
    fake = FakeLangflow([
        LangflowFlow(id=SUPPORT_ID, name="Support Bot", description="Answers support tickets",
                     endpoint_name="support"),
        LangflowFlow(id="flow-nomodel", name="No Model", stream_error="A model selection is required"),
        *(LangflowFlow(id=f"template-{i}", name=name, description=f"Starter project: {name}", example=True)
          for i, name in enumerate(TEMPLATES)),
    ], api_keys=(LANGFLOW_KEY,))
    with serve_app(fake.app) as url:
        yield fake, url


@pytest.fixture
async def backend(server: tuple[FakeLangflow, str]) -> AsyncIterator[LangflowBackend]:
    fake, url = server
    fake.requests.clear()
    backend = LangflowBackend(LangflowSpec.model_validate({"name": "langflow", "url": url, "api_key": LANGFLOW_KEY,
                                                           "timeout_s": 20}))
    await backend.connect()
    yield backend
    await backend.shutdown()


async def test_starter_templates_are_left_out_of_the_catalog(backend: LangflowBackend,
                                                             server: tuple[FakeLangflow, str]) -> None:
    fake, url = server
    async with httpx.AsyncClient(headers={"x-api-key": LANGFLOW_KEY}) as client:
        listed = await client.get(f"{url}/api/v1/flows/", params={"get_all": "true"})
        run = await client.post(f"{url}/api/v1/run/template-0", json={"input_value": "hi"})
    assert {f["name"] for f in listed.json()} >= set(TEMPLATES)  # Langflow lists them by default
    assert run.status_code == 404  # and cannot run them
    names = {c.name for c in (await backend.list_capabilities()).capabilities}
    assert names == {"Support Bot", "No Model"}
    assert fake.last("/api/v1/flows/").query["remove_example_flows"] == "true"


async def test_a_failing_stream_reports_the_graph_error_at_once(backend: LangflowBackend,
                                                                server: tuple[FakeLangflow, str]) -> None:
    _, url = server
    async with httpx.AsyncClient(headers={"x-api-key": LANGFLOW_KEY}) as client:
        raw = await client.post(f"{url}/api/v1/run/flow-nomodel", params={"stream": "true"},
                                json={"input_value": "hi"})
    events = [json.loads(chunk) for chunk in raw.text.split("\n\n") if chunk.strip()]
    assert [e["event"] for e in events] == ["add_message", "error", "error"]  # two errors, no `end`
    assert events[1]["data"]["error"] is True and events[2]["data"]["error"].startswith("500: {")
    started = time.monotonic()
    with pytest.raises(BackendFailed) as err:
        await backend.call(flow_cap("langflow", "No Model", "flow-nomodel"), {}, timeout_s=20,
                           context=ctx(stream=True))
    assert time.monotonic() - started < 1
    assert err.value.message == ("backend 'langflow' (flow 'No Model'): the flow failed: Error running graph: "
                                 "A model selection is required")


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_a_refused_chat_input_tweak_is_a_4xx_naming_it(backend: LangflowBackend,
                                                             server: tuple[FakeLangflow, str], stream: bool) -> None:
    _, url = server
    async with httpx.AsyncClient(headers={"x-api-key": LANGFLOW_KEY}) as client:
        raw = await client.post(f"{url}/api/v1/run/{SUPPORT_ID}", json={"input_value": "hi", "tweaks": REFUSED_TWEAK})
    assert raw.status_code == 400 and "cannot pass a tweak" in raw.json()["detail"]
    with pytest.raises(BackendRejectedArguments) as err:
        await backend.call(flow_cap("langflow", "Support Bot", SUPPORT_ID), {"tweaks": REFUSED_TWEAK}, timeout_s=20,
                           context=ctx(stream=stream))
    assert err.value.status_code == 422 and err.value.payload()["error"]["type"] == "backend_rejected_arguments"
    assert "refused tweak: ChatInput-Ab3xY.input_value" in err.value.message
    assert "cannot pass a tweak with the same name" in err.value.message
    assert_no_secret(err.value)


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_an_endpoint_name_target_does_not_leak_the_flow_id_as_session(
        backend: LangflowBackend, server: tuple[FakeLangflow, str], stream: bool) -> None:
    _, url = server
    async with httpx.AsyncClient(headers={"x-api-key": LANGFLOW_KEY}) as client:
        raw = await client.post(f"{url}/api/v1/run/support", json={"input_value": "hi"})
    assert raw.json()["session_id"] == SUPPORT_ID  # the flow's UUID, not the endpoint name
    cap = flow_cap("langflow", "Support Bot", "support")
    outcome = await backend.call(cap, {}, timeout_s=5, context=ctx(session_id=None, stream=stream))
    assert outcome.text == "Support Bot says: How do I install it?" and outcome.session_id is None
    outcome = await backend.call(cap, {}, timeout_s=5, context=ctx(session_id="sess-7", stream=stream))
    assert outcome.session_id == "sess-7"
