"""OpenTelemetry: the router's tracer, span events for strategy steps, and exporter set-up.

Exporters come from the standard environment variables, read when `configure_tracing` runs (at
start-up, never at import): OTLP over HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the traces
variant) is set, the console when ``OTEL_TRACES_EXPORTER`` includes ``console``, nothing otherwise.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace

from router.errors import ConfigError

TRACER = trace.get_tracer("mcp-router")
log = logging.getLogger("mcp_router")
_configured = False


def record_step(name: str, attrs: Mapping[str, Any]) -> None:
    """A strategy step (fallback, hedge, parallel, consensus) as an event on the current span."""
    span = trace.get_current_span()
    span.add_event(f"router.{name}", {k: _attr(v) for k, v in attrs.items()})


def _attr(value: Any) -> Any:
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bool, int, float)) for v in value):
        return list(value)
    return str(value)


def event(name: str, **attrs: Any) -> None:
    """A named event both on the current span and in the log (e.g. smart_routing_start)."""
    clean = {k: _attr(v) for k, v in attrs.items() if v is not None}
    trace.get_current_span().add_event(name, clean)
    log.info("%s %s", name, clean)


def configure_tracing(service_name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Install a TracerProvider with exporters chosen by the standard OTEL_* variables; idempotent."""
    global _configured
    if _configured:
        return True
    env = os.environ if environ is None else environ
    exporters: list[Any] = []
    names = {n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()}
    if "none" in names:
        return False
    otlp = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "otlp" in names
    if not otlp and "console" not in names:
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        if otlp:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
    except ImportError:
        raise ConfigError("exporting traces (OTEL_* variables) needs the OpenTelemetry SDK: "
                          "pip install 'mcp-router[telemetry]'") from None
    if "console" in names:
        exporters.append(ConsoleSpanExporter())

    provider = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME",
                                                                                   service_name)}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _configured = True
    return True
