"""The router's error tree: every error carries its HTTP status and MCP error code.

Foreign errors (MCP, httpx, Ray) are translated into these in one place per backend, so the
ingress only ever has to turn a `RouterError` into a response:

    try:
        ...
    except RouterError as err:
        return JSONResponse(err.payload(), status_code=err.status_code)
"""

from __future__ import annotations

from typing import Any, ClassVar

# JSON-RPC codes used when an error travels back over MCP.
MCP_INVALID_PARAMS = -32602
MCP_INTERNAL_ERROR = -32603


class RouterError(Exception):
    """Base of every error the router reports to a caller."""

    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    mcp_code: ClassVar[int] = MCP_INTERNAL_ERROR

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {k: v for k, v in details.items() if v is not None}

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return {"error": body}

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps details when the error crosses a Ray or pickle boundary.
        return (_rebuild, (type(self), self.message, self.details))


def _rebuild(cls: type[RouterError], message: str, details: dict[str, Any]) -> RouterError:
    return cls(message, **details)


class ConfigError(RouterError):
    """A configuration file or setting is invalid (raised at start-up)."""

    code = "config_error"


class InvalidRequest(RouterError):
    status_code = 400
    code = "invalid_request"
    mcp_code = MCP_INVALID_PARAMS


class UnknownIntent(InvalidRequest):
    code = "unknown_intent"


class PayloadTooLarge(InvalidRequest):
    status_code = 413
    code = "payload_too_large"


class UnknownBackend(RouterError):
    status_code = 404
    code = "unknown_backend"
    mcp_code = MCP_INVALID_PARAMS


class UnknownCapability(RouterError):
    status_code = 404
    code = "unknown_capability"
    mcp_code = MCP_INVALID_PARAMS


class NoRelevantBackend(RouterError):
    """Nothing in the catalog matches the question well enough to call it."""

    status_code = 404
    code = "no_relevant_backend"


class AmbiguousRoute(RouterError):
    """The two best candidates are too close to call."""

    status_code = 409
    code = "ambiguous_route"


class ArgumentsRequired(RouterError):
    """The chosen tool needs structured arguments that could not be derived from the question."""

    status_code = 422
    code = "arguments_required"
    mcp_code = MCP_INVALID_PARAMS


class BackendRejectedArguments(RouterError):
    """The backend refused the arguments the caller gave (e.g. a flow tweak it does not allow)."""

    status_code = 422
    code = "backend_rejected_arguments"
    mcp_code = MCP_INVALID_PARAMS


class BackendFailed(RouterError):
    status_code = 502
    code = "backend_failed"


class ToolFailed(BackendFailed):
    """The backend answered, but the tool reported an error (`isError: true`)."""

    code = "tool_failed"


class AllBackendsFailed(BackendFailed):
    code = "all_backends_failed"


class NoHealthyBackend(RouterError):
    status_code = 503
    code = "no_healthy_backend"


class BackendUnavailable(NoHealthyBackend):
    """One named backend is down (its process died, its URL refuses connections, or it is ejected)."""

    code = "backend_unavailable"


class LLMNotConfigured(RouterError):
    status_code = 503
    code = "llm_not_configured"


class BackendTimeout(RouterError):
    status_code = 504
    code = "backend_timeout"


class DeadlineExceeded(BackendTimeout):
    code = "deadline_exceeded"
