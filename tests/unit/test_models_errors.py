from __future__ import annotations

import json
import pickle

import pytest
from pydantic import ValidationError

from router.bounds import json_nests_deeper
from router.errors import (
    AllBackendsFailed,
    ArgumentsRequired,
    BackendTimeout,
    BackendUnavailable,
    DeadlineExceeded,
    NoRelevantBackend,
    RouterError,
    ToolFailed,
    UnknownIntent,
)
from router.models import QueryRequest, RouteRequest
from router.values import BackendStatus, Capability


@pytest.mark.parametrize(
    ("cls", "status", "code"),
    [
        (UnknownIntent, 400, "unknown_intent"),
        (NoRelevantBackend, 404, "no_relevant_backend"),
        (ArgumentsRequired, 422, "arguments_required"),
        (ToolFailed, 502, "tool_failed"),
        (AllBackendsFailed, 502, "all_backends_failed"),
        (BackendUnavailable, 503, "backend_unavailable"),
        (BackendTimeout, 504, "backend_timeout"),
        (DeadlineExceeded, 504, "deadline_exceeded"),
    ],
)
def test_errors_carry_http_status_and_code(cls: type[RouterError], status: int, code: str) -> None:
    err = cls("boom")
    assert (err.status_code, err.code) == (status, code)
    assert err.payload() == {"error": {"type": code, "message": "boom"}}


def test_payload_includes_details_but_drops_none_values() -> None:
    err = BackendTimeout("slow", backend="time", tool=None)
    assert err.payload() == {
        "error": {"type": "backend_timeout", "message": "slow", "details": {"backend": "time"}}
    }


def test_errors_keep_type_and_details_across_pickling() -> None:
    err = ArgumentsRequired("need args", tool="add", input_schema={"type": "object"})
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ArgumentsRequired
    assert back.message == "need args"
    assert back.details == {"tool": "add", "input_schema": {"type": "object"}}


def test_capability_key_names_backend_kind_and_name() -> None:
    assert Capability(backend="time", name="now", kind="prompt").key == "time/prompt/now"


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_blank_questions_are_rejected(question: str) -> None:
    with pytest.raises(ValidationError):
        QueryRequest(question=question)
    with pytest.raises(ValidationError):
        RouteRequest(question=question)


@pytest.mark.parametrize("backend", [None, "", "auto"])
def test_backend_auto_means_route(backend: str | None) -> None:
    assert QueryRequest(question="q", backend=backend).backend is None


def test_unknown_request_fields_are_rejected() -> None:
    with pytest.raises(ValidationError):
        QueryRequest.model_validate({"question": "q", "bakend": "time"})


@pytest.mark.parametrize(
    ("health", "available"),
    [("healthy", True), ("degraded", True), ("starting", False), ("down", False), ("ejected", False)],
)
def test_only_healthy_and_degraded_backends_are_available(health: str, available: bool) -> None:
    status = BackendStatus(name="a", kind="mcp_stdio", transport="stdio", health=health)  # type: ignore[arg-type]
    assert status.available is available


def test_backend_info_copies_the_public_fields_of_a_status() -> None:
    status = BackendStatus(
        name="a",
        kind="mcp_http",
        transport="http",
        health="down",
        last_error="refused",
        tool_count=3,
        inflight=7,
    )
    info = status.info()
    assert (info.name, info.health, info.last_error, info.tool_count) == ("a", "down", "refused", 3)
    assert "inflight" not in info.model_dump()


def test_an_ejection_that_is_over_makes_the_backend_available_for_its_probe() -> None:
    import time

    from router.values import BackendStatus

    over = BackendStatus(name="a", kind="mcp_stdio", transport="stdio", health="ejected",
                         ejected_until=time.time() - 0.1)
    running = BackendStatus(name="a", kind="mcp_stdio", transport="stdio", health="ejected",
                            ejected_until=time.time() + 60)
    assert over.available and not running.available


def test_json_nesting_is_measured_without_parsing_and_brackets_in_strings_do_not_count() -> None:
    assert json_nests_deeper("[" * 5000 + "]" * 5000) and json_nests_deeper('{"a":' * 13 + "1" + "}" * 13)
    assert not json_nests_deeper('{"a":' * 12 + "1" + "}" * 12)
    assert not json_nests_deeper(json.dumps({"q": '[[[[[[[[[[[[[[{{{{{{ " [[[[[[['}))


def test_a_loadtest_report_json_cannot_hold_or_whose_counts_disagree_is_refused() -> None:
    import pydantic

    from router.models import LoadtestReport

    good = {"url": "http://127.0.0.1:8000", "concurrency": 1, "elapsed_s": 1.0, "requests": 5, "ok": 4, "errors": 1,
            "throughput_rps": 5.0, "latency_ms": {"p50": 2.0}, "timeline": [{"t": 0.0, "rps": 5.0}]}
    assert LoadtestReport.model_validate(good).requests == 5
    for bad in ({"elapsed_s": float("inf")}, {"throughput_rps": float("nan")}, {"latency_ms": {"p50": float("nan")}},
                {"timeline": [{"t": float("nan")}]}, {"ok": 5}):
        with pytest.raises(pydantic.ValidationError):
            LoadtestReport.model_validate({**good, **bad})
