"""Flowise and Langflow behind the router under Serve: flows routed like tools, sessions that stick.

Both products are protocol-faithful servers on 127.0.0.1 (tests/fakes), not the real products.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from router.settings import RouterSettings
from tests.conftest import EXAMPLES, fresh_state, running_app, stdio
from tests.fakes import serve_app
from tests.fakes.flowise import Chatflow, FakeFlowise
from tests.fakes.langflow import FakeLangflow, LangflowFlow

FLOWISE_KEY, LANGFLOW_KEY = "flowise-secret-key", "langflow-secret-key"
RECIPES_ID = "5ec1be50-0000-4000-8000-00000000c00c"  # Flowise ids are UUIDs (it answers 400 to others)


@pytest.fixture(scope="module")
def products() -> Iterator[dict[str, Any]]:
    flowise = FakeFlowise([Chatflow(id=RECIPES_ID, name="Recipe Assistant", category="Cooking")],
                          api_key=FLOWISE_KEY)
    langflow = FakeLangflow([LangflowFlow(id="ticket-flow", name="Support Bot", endpoint_name="support",
                                          description="Answers customer support tickets about billing and refunds"),
                             LangflowFlow(id="order-flow", name="Order Desk", endpoint_name="orders",
                                          description="Places, changes and cancels customer orders")],
                            api_keys=(LANGFLOW_KEY,))
    with serve_app(flowise.app) as flowise_url, serve_app(langflow.app) as langflow_url:
        yield {"flowise": (flowise, flowise_url), "langflow": (langflow, langflow_url)}


@pytest.fixture(scope="module")
def app(ray_local: dict[str, Any], products: dict[str, Any]) -> Iterator[str]:
    settings = RouterSettings.model_validate({
        "backends": [
            stdio("calculator", EXAMPLES / "servers" / "calculator.py"),
            {"name": "cooking", "kind": "flowise", "url": products["flowise"][1], "api_key": FLOWISE_KEY,
             "flows": [{"id": RECIPES_ID, "description": "Cooking recipes, ingredients and baking instructions",
                        "tags": ["food"]}]},
            # A support bot that only answers says so: a flow otherwise counts as acting, and the router
            # asks before calling it on a match as likely as this one (the order desk, below).
            {"name": "support", "kind": "langflow", "url": products["langflow"][1], "api_key": LANGFLOW_KEY,
             "read_only": True, "only_listed_flows": True, "flows": [{"id": "ticket-flow"}]},
            {"name": "orders", "kind": "langflow", "url": products["langflow"][1], "api_key": LANGFLOW_KEY,
             "only_listed_flows": True, "flows": [{"id": "order-flow"}]},
        ],
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"]},
        "state_dir": fresh_state(),
    })
    with running_app(settings, ray_local["url"]) as url:
        yield url


def ask(url: str, question: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/query", json={"question": question, **body}, timeout=60)


def test_flows_are_listed_and_routed_like_tools(app: str, products: dict[str, Any]) -> None:
    backends = {b["name"]: b for b in httpx.get(f"{app}/v1/backends").json()}
    assert backends["cooking"]["flow_count"] == 1 and backends["support"]["flow_count"] == 1
    r = ask(app, "Give me a recipe for baking bread with simple ingredients")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["backend"], body["kind"], body["capability"]) == ("cooking", "flow", "Recipe Assistant")
    assert "Recipe Assistant answers" in body["answer"]
    sent = products["flowise"][0].last(f"/prediction/{RECIPES_ID}")
    assert sent.headers["authorization"] == f"Bearer {FLOWISE_KEY}"


def test_a_session_goes_through_to_the_flow_and_sticks_to_it(app: str, products: dict[str, Any]) -> None:
    first = ask(app, "I was charged twice, I need a refund for my billing ticket", session_id="s-42")
    assert first.status_code == 200, first.text
    assert first.json()["backend"] == "support" and first.json()["session_id"] == "s-42"
    assert products["langflow"][0].last("/run/ticket-flow").body["session_id"] == "s-42"
    follow = ask(app, "Any news on my refund ticket?", session_id="s-42")
    assert follow.json()["backend"] == "support" and follow.json()["routing"]["decision"] == "session"


def test_credentials_never_appear_in_responses(app: str) -> None:
    texts = [httpx.get(f"{app}/v1/backends").text, ask(app, "recipe for pancakes").text,
             httpx.post(f"{app}/v1/route", json={"question": "refund my billing ticket"}).text]
    assert not any(FLOWISE_KEY in t or LANGFLOW_KEY in t for t in texts)


def test_an_acting_flow_is_called_only_when_likely_enough_to_be_meant(app: str, products: dict[str, Any]) -> None:
    # The order desk may change something and does not say otherwise. On a question that only might be for it
    # the router asks rather than acting; named by the caller, or asked for plainly, it is called.
    def runs() -> int:
        return sum(r.path.endswith("/run/order-flow") for r in products["langflow"][0].requests)

    asked = ask(app, "I have a problem with an order")
    assert asked.status_code == 409, asked.text
    error = asked.json()["error"]
    assert "may change something" in error["message"] and error["details"]["candidates"][0]["backend"] == "orders"
    assert runs() == 0
    named = ask(app, "I have a problem with an order", backend="orders")
    assert named.status_code == 200 and named.json()["backend"] == "orders" and runs() == 1
    plain = ask(app, "Please cancel my customer order")
    assert plain.status_code == 200 and plain.json()["backend"] == "orders" and runs() == 2
