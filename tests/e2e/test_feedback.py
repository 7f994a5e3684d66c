"""Learning from feedback, end to end: feedback over HTTP changes the next decision for a similar
question, and the examples survive a restart of the feedback actor and of the whole application."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import ray
from mcp import Client
from ray import serve

from router.settings import RouterSettings
from tests.conftest import EXAMPLES, running_app, stdio, wait_for

QUESTION = "What time is it in Tokyo?"
# Retrieval ranks convert_time first for this one; the user confirms get_current_time for QUESTION.
SIMILAR = "What hour is it in Tokyo?"


def settings_for(port: int, state_dir: Path) -> RouterSettings:
    return RouterSettings.model_validate({
        "backends": [
            stdio("calculator", EXAMPLES / "servers" / "calculator.py"),
            {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time",
             "description": "Current time in any IANA time zone, and conversion between zones."},
        ],
        "server": {"namespace": "mcp-router-test", "port": port, "app_name": "feedback-e2e"},
        # One example must visibly move this decision; the default weight is tuned for many examples.
        "learning": {"refresh_s": 0.5, "weight": 1.0},
        "state_dir": str(state_dir),
    })


def top(url: str, question: str) -> dict[str, Any]:
    r = httpx.post(f"{url}/v1/route", json={"question": question}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["candidates"][0]  # type: ignore[no-any-return]


def examples_of(url: str, backend: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{url}/v1/backends/{backend}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["examples"]  # type: ignore[no-any-return]


def error(r: httpx.Response) -> tuple[int, str]:
    return r.status_code, r.json()["error"]["message"]


def test_feedback_changes_the_next_decision_and_survives_restarts(ray_local: dict[str, Any], tmp_path: Path) -> None:
    settings = settings_for(ray_local["port"], tmp_path / "state")
    with running_app(settings, ray_local["url"]) as url:
        # Retrieval alone ranks convert_time higher; the question's values (one place, no time) put
        # get_current_time first.
        before = top(url, SIMILAR)
        assert (before["backend"], before["capability"]) == ("time", "get_current_time") and before.get("placed")
        answer = httpx.post(f"{url}/v1/query", json={"question": QUESTION}, timeout=60).json()
        request_id = answer["routing"]["request_id"]
        assert answer["capability"] == "get_current_time" and request_id

        r = httpx.post(f"{url}/v1/feedback", json={"request_id": request_id, "correct": True}, timeout=30)
        assert r.status_code == 200, r.text
        assert [(e["name"], e["label"]) for e in r.json()["stored"]] == [("get_current_time", 1)]
        after = top(url, SIMILAR)  # now first by its own score: the example lifted it
        assert (after["backend"], after["capability"]) == ("time", "get_current_time"), _candidates(url, SIMILAR)
        assert after.get("placed") is None, _candidates(url, SIMILAR)
        assert after["scores"]["examples"] == 1 and after["scores"]["learned"] > 0
        assert after["scores"]["nearest_example"] > 0.8

        # Bad input: 4xx naming the field.
        assert error(httpx.post(f"{url}/v1/feedback", json={"request_id": "nope", "correct": True}))[0] == 404
        status, message = error(httpx.post(f"{url}/v1/feedback", json={"request_id": request_id}))
        assert status == 400 and "correct" in message
        status, message = error(httpx.post(f"{url}/v1/feedback", json={"request_id": request_id, "correct": False,
                                                                        "backend": "nowhere"}))
        assert status == 404 and "backend" in message
        assert httpx.get(f"{url}/v1/backends/nowhere").status_code == 404

        # The same over MCP: the answer's routing info names its request id, the feedback tool takes it.
        answer_text, stored, unknown = asyncio.run(_mcp_feedback(url))
        assert "- request id: " in answer_text and stored == [("calculate", 1)]
        assert unknown.is_error and "request_id" in unknown.content[0].text
        assert [e["source"] for e in examples_of(url, "calculator")] == ["feedback"]

        # A declined question carries a request id too: feedback on it says what should have answered.
        declined = httpx.post(f"{url}/v1/query", json={"question": "Bake a sourdough bread recipe"}, timeout=60)
        assert declined.status_code == 404, declined.text
        r = httpx.post(f"{url}/v1/feedback", json={"request_id": declined.json()["error"]["details"]["request_id"],
                                                    "correct": False, "backend": "calculator",
                                                    "tool": "convert_units"}, timeout=30)
        assert r.status_code == 200, r.text
        stored_decline, *rejected_first = r.json()["stored"]
        assert (stored_decline["name"], stored_decline["label"]) == ("convert_units", 1)
        assert [e["label"] for e in rejected_first] in ([], [-1])  # and the candidate it put first was not it
        assert stored_decline["top_confidence"] < settings.routing.min_confidence  # retrieval was unsure

        # The owner restarts and reopens the same file: the example given before is still there.
        pool = serve.get_deployment_handle("BackendPool", settings.server.app_name)
        owner = pool.feedback.remote(settings.state_dir, settings.learning).result(timeout_s=30)
        ray.kill(owner, no_restart=False)
        wait_for(lambda: _examples_or_none(url, "time") is not None, timeout=60)
        again = httpx.post(f"{url}/v1/query", json={"question": QUESTION}, timeout=60).json()
        r = httpx.post(f"{url}/v1/feedback", json={"request_id": again["routing"]["request_id"], "correct": True})
        assert r.status_code == 200, r.text
        confirmed = [e["question"] for e in examples_of(url, "time") if e["label"] == 1]
        assert confirmed == [QUESTION, QUESTION]

    # The whole application restarts: the examples are still there and still steer the decision.
    with running_app(settings, ray_local["url"]) as url:
        kept = examples_of(url, "time")
        assert [(e["name"], e["label"]) for e in kept if e["label"] == 1] == [("get_current_time", 1)] * 2
        steered = top(url, SIMILAR)
        assert steered["capability"] == "get_current_time" and steered.get("placed") is None
        deleted = httpx.delete(f"{url}/v1/backends/time/examples", timeout=30)
        assert deleted.status_code == 200 and deleted.json()["deleted"] == len(kept)
        assert examples_of(url, "time") == []
        assert top(url, SIMILAR).get("placed")  # first again only by the question's values


def _examples_or_none(url: str, backend: str) -> list[dict[str, Any]] | None:
    r = httpx.get(f"{url}/v1/backends/{backend}", timeout=30)
    return r.json()["examples"] if r.status_code == 200 else None


def _candidates(url: str, question: str) -> list[tuple[str, dict[str, Any]]]:
    r = httpx.post(f"{url}/v1/route", json={"question": question}, timeout=60)
    return [(c["capability"], c["scores"]) for c in r.json()["candidates"]]


async def _mcp_feedback(url: str) -> tuple[str, list[tuple[str, int]], Any]:
    async with Client(f"{url}/mcp/") as client:
        answer = await client.call_tool("universal_query", {"question": "What is 6 times 7?"})
        request_id = answer.structured_content["routing"]["request_id"]
        ok = await client.call_tool("feedback", {"request_id": request_id, "correct": True})
        unknown = await client.call_tool("feedback", {"request_id": "nope", "correct": True})
    assert not ok.is_error, ok.content
    return (answer.content[0].text, [(e["name"], e["label"]) for e in ok.structured_content["stored"]], unknown)
