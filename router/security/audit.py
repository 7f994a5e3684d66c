"""One structured audit record per request, as a JSON line (a file or the `mcp_router.audit` log) and, when
tracing is on, as an event on the request's span.

Records hold who asked, the route taken and how it ended; tool arguments only as a SHA-256 unless
`audit.include_arguments` is on. Never a credential: the principal's name stands for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from typing import Any

from opentelemetry import trace

from router.errors import ConfigError, RouterError
from router.settings import AuditSettings

log = logging.getLogger("mcp_router.audit")


def arguments_digest(arguments: Any) -> str | None:
    if arguments is None:
        return None
    blob = json.dumps(arguments, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


CLIENT_CLOSED = 499  # the caller closed the connection before the answer (nginx's code for it)


def outcome_of(code: int) -> str:
    if code == CLIENT_CLOSED:
        return "cancelled"
    return "ok" if code < 400 else "refused" if code < 500 else "failed"


class AuditLog:
    def __init__(self, settings: AuditSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        try:
            self._file = open(settings.path, "a", encoding="utf-8") if settings.enabled and settings.path else None
        except OSError as exc:
            raise ConfigError(f"audit.path {settings.path}: {exc.strerror or exc}", setting="audit.path") from None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def record(self, *, principal: str, method: str, path: str, status: int, latency_ms: float,
               request_id: str, client_request_id: str | None = None, route: dict[str, Any] | None = None,
               span: trace.Span | None = None, error: RouterError | None = None) -> None:
        """`status` is the HTTP status; `error`, the error the request ended with whatever that status says (an
        MCP tool error is answered with 200), decides the outcome: refused (4xx), failed (5xx), or cancelled (499: the
        caller left before the answer)."""
        if not self.settings.enabled:
            return
        code = error.status_code if error is not None else status
        entry: dict[str, Any] = {"time": round(time.time(), 3), "request_id": request_id, "principal": principal,
                                 "method": method, "path": path, "status": status,
                                 "outcome": outcome_of(code),
                                 "latency_ms": round(latency_ms, 3)}
        if error is not None:
            entry["error"] = error.code
        if client_request_id is not None:
            entry["client_request_id"] = client_request_id
        for key, value in (route or {}).items():
            if key == "arguments":
                entry["arguments_sha256"] = arguments_digest(value)
                if self.settings.include_arguments:
                    entry["arguments"] = value
            elif value is not None:
                entry.setdefault(key, value)  # what the request was (method, path, status) stays as it was
        line = json.dumps(entry, default=str, separators=(",", ":"))
        if self._file is not None:
            with self._lock:
                self._file.write(line + "\n")
                self._file.flush()
        else:
            log.info("%s", line)
        if span is not None and span.is_recording():
            span.add_event("audit", {k: v for k, v in entry.items() if isinstance(v, (str, int, float, bool))})
