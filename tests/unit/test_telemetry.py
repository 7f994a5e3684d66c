from __future__ import annotations

import logging

import pytest
from opentelemetry import trace

from router import telemetry


def test_span_attributes_are_coerced_to_otel_types() -> None:
    assert telemetry._attr("x") == "x"
    assert telemetry._attr(3) == 3
    assert telemetry._attr(["a", "b"]) == ["a", "b"]
    assert telemetry._attr(("a", 1)) == ["a", 1]
    assert telemetry._attr({"k": 1}) == "{'k': 1}"
    assert telemetry._attr([{"k": 1}]) == "[{'k': 1}]"


def test_tracing_is_not_configured_without_exporter_variables() -> None:
    assert telemetry.configure_tracing("svc", environ={}) is False
    assert telemetry.configure_tracing("svc", environ={"OTEL_TRACES_EXPORTER": "none"}) is False
    assert telemetry._configured is False


def test_steps_and_events_work_without_a_tracer_provider(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=telemetry.log.name):
        telemetry.record_step("fallback", {"backend": "a", "attempt": 2, "backends": ["a", "b"]})
        telemetry.event("smart_routing_start", question="q", skipped=None)
    # No provider: the span is the no-op one, and the event still reaches the log, without the None field.
    assert not trace.get_current_span().is_recording()
    assert [r.getMessage() for r in caplog.records] == ["smart_routing_start {'question': 'q'}"]
