"""Learning from feedback, end to end: feedback over HTTP changes the next decision for a similar
question, and the examples survive a restart of the feedback actor and of the whole application."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import ray
from ray import serve

from router.config import RouterSettings
from tests.conftest import EXAMPLES, running_app, stdio, wait_for

QUESTION = "What time is it in Tokyo?"
# Paraphrases; the test uses the first that routes like QUESTION before any feedback.
PARAPHRASES = ("What is the time in Tokyo?", "What time is it in Tokyo now?", "what time is it in tokyo?")
TIME_TOOLS = {"get_current_time", "convert_time"}


def settings_for(port: int, state_dir: Path) -> RouterSettings:
    return RouterSettings.model_validate({
        "backends": [
            stdio("calculator", EXAMPLES / "servers" / "calculator.py"),
            {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time",
             "description": "Current time in any IANA time zone, and conversion between zones."},
        ],
        "server": {"namespace": "mcp-router-test", "port": port, "app_name": "feedback-e2e"},
        "learning": {"refresh_s": 0.5},
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
        answer = httpx.post(f"{url}/v1/query", json={"question": QUESTION}, timeout=60).json()
        request_id, chosen = answer["routing"]["request_id"], answer["capability"]
        assert answer["backend"] == "time" and chosen in TIME_TOOLS and request_id
        similar = next(q for q in PARAPHRASES if top(url, q)["capability"] == chosen)
        other = next(iter(TIME_TOOLS - {chosen}))

        r = httpx.post(f"{url}/v1/feedback", json={"request_id": request_id, "correct": False,
                                                   "backend": "time", "tool": other}, timeout=30)
        assert r.status_code == 200, r.text
        assert [(e["name"], e["label"]) for e in r.json()["stored"]] == [(chosen, -1), (other, 1)]
        after = top(url, similar)
        assert (after["backend"], after["capability"]) == ("time", other)
        assert after["scores"]["examples"] == 1 and after["scores"]["learned"] > 0
        assert after["scores"]["nearest_example"] > 0.6

        # Bad input: 4xx naming the field.
        assert error(httpx.post(f"{url}/v1/feedback", json={"request_id": "nope", "correct": True}))[0] == 404
        status, message = error(httpx.post(f"{url}/v1/feedback", json={"request_id": request_id}))
        assert status == 400 and "correct" in message
        status, message = error(httpx.post(f"{url}/v1/feedback", json={"request_id": request_id, "correct": False,
                                                                        "backend": "nowhere"}))
        assert status == 404 and "backend" in message
        assert httpx.get(f"{url}/v1/backends/nowhere").status_code == 404

        # The owner restarts: it reopens the same file.
        pool = serve.get_deployment_handle("BackendPool", settings.server.app_name)
        owner = pool.feedback.remote(settings.state_dir, settings.learning).result(timeout_s=30)
        ray.kill(owner, no_restart=False)
        wait_for(lambda: _examples_or_none(url, "time") is not None, timeout=60)
        assert len(examples_of(url, "time")) == 2

    # The whole application restarts: the examples are still there and still steer the decision.
    with running_app(settings, ray_local["url"]) as url:
        assert [e["name"] for e in examples_of(url, "time")] == [chosen, other]
        wait_for(lambda: top(url, similar)["capability"] == other, timeout=30)
        deleted = httpx.delete(f"{url}/v1/backends/time/examples", timeout=30)
        assert deleted.status_code == 200 and deleted.json()["deleted"] == 2
        assert examples_of(url, "time") == []
        assert top(url, similar)["capability"] == chosen


def _examples_or_none(url: str, backend: str) -> list[dict[str, Any]] | None:
    r = httpx.get(f"{url}/v1/backends/{backend}", timeout=30)
    return r.json()["examples"] if r.status_code == 200 else None
