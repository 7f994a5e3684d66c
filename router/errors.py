"""The router's one error model: an `ErrorKind` per outcome, and a `RouterError` class per kind.

Every error class lives here. Each carries its kind and HTTP status as class attributes, so the
edges only ever turn a `RouterError` into a response:

    try:
        ...
    except RouterError as err:
        return JSONResponse(err.payload(), status_code=err.status_code)

Backend calls that fail are values, not exceptions: a `CallOutcome` carries the `ErrorKind`, and
`ErrorKind.outcome` / `ErrorKind.backend_level` say what it means for a strategy. Foreign errors
(MCP, httpx, Ray) are translated into these in one place per backend.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class ErrorKind(StrEnum):
    INTERNAL = "internal_error"
    CONFIG = "config_error"
    INVALID_REQUEST = "invalid_request"
    UNKNOWN_INTENT = "unknown_intent"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    UNKNOWN_BACKEND = "unknown_backend"
    UNKNOWN_CAPABILITY = "unknown_capability"
    UNKNOWN_REQUEST = "unknown_request"
    NOT_FOUND = "not_found"
    FEEDBACK_REFUSED = "feedback_refused"
    NO_RELEVANT_BACKEND = "no_relevant_backend"
    AMBIGUOUS_ROUTE = "ambiguous_route"
    ARGUMENTS_REQUIRED = "arguments_required"
    ARGUMENTS_INVALID = "arguments_invalid"
    BACKEND_NOT_CALLABLE = "backend_not_callable"
    BACKEND_FAILED = "backend_failed"
    BACKEND_REJECTED_ARGUMENTS = "backend_rejected_arguments"
    BACKEND_UNAUTHORIZED = "backend_unauthorized"
    FLOW_NOT_FOUND = "flow_not_found"
    TOOL_FAILED = "tool_failed"
    ALL_BACKENDS_FAILED = "all_backends_failed"
    LLM_FAILED = "llm_failed"
    LLM_BAD_OUTPUT = "llm_bad_output"
    NO_HEALTHY_BACKEND = "no_healthy_backend"
    BACKEND_UNAVAILABLE = "backend_unavailable"
    LLM_NOT_CONFIGURED = "llm_not_configured"
    BACKEND_TIMEOUT = "backend_timeout"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    LLM_TIMEOUT = "llm_timeout"
    CANCELLED = "cancelled"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    RATE_LIMITED = "rate_limited"
    OVERLOADED = "overloaded"
    HEADERS_TOO_LARGE = "headers_too_large"
    LIMIT_EXCEEDED = "limit_exceeded"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    MISDIRECTED_REQUEST = "misdirected_request"
    COMPONENT_UNAVAILABLE = "component_unavailable"
    ANSWER_TOO_LARGE = "answer_too_large"

    @property
    def outcome(self) -> str:
        """How an attempt that failed with this kind is reported: timeout, unavailable, cancelled, error."""
        if self in (ErrorKind.BACKEND_TIMEOUT, ErrorKind.DEADLINE_EXCEEDED, ErrorKind.LLM_TIMEOUT):
            return "timeout"
        if self in (ErrorKind.BACKEND_UNAVAILABLE, ErrorKind.NO_HEALTHY_BACKEND):
            return "unavailable"
        if self is ErrorKind.CANCELLED:
            return "cancelled"
        return "error"

    @property
    def backend_fault(self) -> bool:
        """The backend itself failed (its transport, a timeout of its own, a crash, a protocol error, its
        configuration): this counts against its health, for every caller."""
        return self in (ErrorKind.BACKEND_FAILED, ErrorKind.BACKEND_UNAVAILABLE, ErrorKind.BACKEND_TIMEOUT,
                        ErrorKind.BACKEND_UNAUTHORIZED, ErrorKind.FLOW_NOT_FOUND)

    @property
    def answered(self) -> bool:
        """The backend answered, and the answer was an error about this request (a tool error, arguments it
        rejected): the backend is alive; what went wrong belongs to the caller's request, not to the backend."""
        return self in (ErrorKind.TOOL_FAILED, ErrorKind.BACKEND_REJECTED_ARGUMENTS, ErrorKind.ARGUMENTS_INVALID,
                        ErrorKind.ANSWER_TOO_LARGE)

    @property
    def backend_level(self) -> bool:
        """The backend as a whole is unusable right now (not just this one call): fallback skips its
        other tools."""
        return self in (ErrorKind.BACKEND_UNAVAILABLE, ErrorKind.BACKEND_TIMEOUT, ErrorKind.NO_HEALTHY_BACKEND)


class RouterError(Exception):
    """Base of every error the router reports to a caller."""

    status_code: ClassVar[int] = 500
    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {k: v for k, v in details.items() if v is not None}

    @property
    def code(self) -> str:
        return self.kind.value

    def headers(self) -> dict[str, str]:
        """HTTP headers the refusal carries (`WWW-Authenticate`, `Retry-After`)."""
        return {}

    def payload(self, request_id: str | None = None) -> dict[str, Any]:
        """The JSON body of the error; `request_id`: the router's id of the request it answers."""
        body: dict[str, Any] = {"type": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        if request_id is not None:
            body["request_id"] = request_id
        return {"error": body}

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps details when the error crosses a Ray or pickle boundary.
        return (_rebuild, (type(self), self.message, self.details))


def _rebuild(cls: type[RouterError], message: str, details: dict[str, Any]) -> RouterError:
    return cls(message, **details)


class ConfigError(RouterError):
    """A configuration file or setting is invalid (raised at start-up)."""

    kind = ErrorKind.CONFIG


class InvalidRequest(RouterError):
    status_code = 400
    kind = ErrorKind.INVALID_REQUEST


class UnknownIntent(InvalidRequest):
    kind = ErrorKind.UNKNOWN_INTENT


class PayloadTooLarge(InvalidRequest):
    status_code = 413
    kind = ErrorKind.PAYLOAD_TOO_LARGE


class RequestTimeout(InvalidRequest):
    """The request's body did not arrive in time."""

    status_code = 408
    kind = ErrorKind.REQUEST_TIMEOUT


class UnknownBackend(RouterError):
    status_code = 404
    kind = ErrorKind.UNKNOWN_BACKEND


class UnknownCapability(RouterError):
    status_code = 404
    kind = ErrorKind.UNKNOWN_CAPABILITY


class UnknownRequest(RouterError):
    """A `request_id` the router does not remember (never issued, or older than `learning.decision_ttl_s`)."""

    status_code = 404
    kind = ErrorKind.UNKNOWN_REQUEST


class NotFound(RouterError):
    """Something the request asks for does not exist yet (no load test report)."""

    status_code = 404
    kind = ErrorKind.NOT_FOUND


class FeedbackRefused(RouterError):
    """The caller may not give feedback (`learning.accept_feedback`)."""

    status_code = 403
    kind = ErrorKind.FEEDBACK_REFUSED


class NoRelevantBackend(RouterError):
    """Nothing in the catalog matches the question well enough to call it."""

    status_code = 404
    kind = ErrorKind.NO_RELEVANT_BACKEND


class AmbiguousRoute(RouterError):
    """The two best candidates are too close to call."""

    status_code = 409
    kind = ErrorKind.AMBIGUOUS_ROUTE


class ArgumentsRequired(RouterError):
    """The chosen tool needs structured arguments that could not be derived from the question."""

    status_code = 422
    kind = ErrorKind.ARGUMENTS_REQUIRED


class ArgumentsInvalid(ArgumentsRequired):
    """Arguments the router derived do not fit the tool's input schema; the call is not made."""

    kind = ErrorKind.ARGUMENTS_INVALID


class BackendNotCallable(ArgumentsRequired):
    """The best match is a backend known only by its description (an MCP server whose tools are not
    listed), or a tool held until its changed definition is approved: there is nothing to call. A
    subclass of `ArgumentsRequired` because planning treats both alike: the candidate is skipped for a
    callable runner-up almost as relevant, or the request is refused."""

    status_code = 503
    kind = ErrorKind.BACKEND_NOT_CALLABLE


class BackendFailed(RouterError):
    status_code = 502
    kind = ErrorKind.BACKEND_FAILED


class BackendRejectedArguments(RouterError):
    """The backend refused the arguments the caller gave (e.g. a flow tweak it does not allow)."""

    status_code = 422
    kind = ErrorKind.BACKEND_REJECTED_ARGUMENTS


class FlowUnauthorized(BackendFailed):
    """The flow platform refused the API key (or none was configured)."""

    kind = ErrorKind.BACKEND_UNAUTHORIZED


class FlowNotFound(BackendFailed):
    """The flow platform has no flow with that id (or the id is not one it accepts)."""

    kind = ErrorKind.FLOW_NOT_FOUND


class ToolFailed(BackendFailed):
    """The backend answered, but the tool reported an error (`isError: true`)."""

    kind = ErrorKind.TOOL_FAILED


class AnswerTooLarge(BackendFailed):
    """The backend's answer to this call is larger than `security.max_answer_bytes`: refused, and not counted
    against the backend (a question can ask for a large answer)."""

    kind = ErrorKind.ANSWER_TOO_LARGE


class AllBackendsFailed(BackendFailed):
    kind = ErrorKind.ALL_BACKENDS_FAILED


class LLMFailed(BackendFailed):
    """The LLM endpoint could not be reached or answered with an HTTP error (after retries)."""

    kind = ErrorKind.LLM_FAILED


class LLMBadOutput(LLMFailed):
    """The LLM answered, but not with JSON matching the schema it was asked for."""

    kind = ErrorKind.LLM_BAD_OUTPUT


class NoHealthyBackend(RouterError):
    status_code = 503
    kind = ErrorKind.NO_HEALTHY_BACKEND


class BackendUnavailable(NoHealthyBackend):
    """One named backend is down (its process died, its URL refuses connections, or it is ejected)."""

    kind = ErrorKind.BACKEND_UNAVAILABLE


class BackendUnreachable(BackendUnavailable):
    """The request never left: the backend is not connected, or refused the connection. Nothing can have
    acted, so a call that may act can still go to another backend."""


class BackendBusy(BackendUnreachable):
    """The backend refused to start the run now (HTTP 429, 408): nothing ran, and it is not down. A flow
    platform limits its callers by address, and the router is one address: one caller's burst must neither
    mark the backend down nor eject it for everyone."""


class LLMNotConfigured(RouterError):
    status_code = 503
    kind = ErrorKind.LLM_NOT_CONFIGURED


class BackendTimeout(RouterError):
    status_code = 504
    kind = ErrorKind.BACKEND_TIMEOUT


class DeadlineExceeded(BackendTimeout):
    kind = ErrorKind.DEADLINE_EXCEEDED


class LLMTimeout(BackendTimeout):
    kind = ErrorKind.LLM_TIMEOUT


class Unauthenticated(RouterError):
    """No credential, or one that is not valid (RFC 6750: the answer names the Bearer scheme)."""

    status_code = 401
    kind = ErrorKind.UNAUTHENTICATED

    def headers(self) -> dict[str, str]:
        error = ' error="invalid_token"' if self.details.get("reason") == "invalid" else ""
        return {"WWW-Authenticate": f'Bearer realm="mcp-router"{error}'}


class Forbidden(RouterError):
    """The caller is known, but its policy does not allow this (the message names the policy)."""

    status_code = 403
    kind = ErrorKind.FORBIDDEN


class _RetryLater(RouterError):
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, round(float(self.details.get("retry_after_s", 1)))))}


class RateLimited(_RetryLater):
    """The caller is over its policy's rate or in-flight limit."""

    status_code = 429
    kind = ErrorKind.RATE_LIMITED


class Overloaded(_RetryLater):
    """The replica has as many requests in flight as it takes; queueing more would only add latency."""

    status_code = 503
    kind = ErrorKind.OVERLOADED


class HeadersTooLarge(InvalidRequest):
    status_code = 431
    kind = ErrorKind.HEADERS_TOO_LARGE


class LimitExceeded(InvalidRequest):
    """A request asks for more work than a configured cap allows (turns, candidates, steps); the message
    names the cap and its setting."""

    status_code = 422
    kind = ErrorKind.LIMIT_EXCEEDED


class MethodNotAllowed(InvalidRequest):
    """The path exists, but not for this HTTP method (the answer's `Allow` header lists those it takes)."""

    status_code = 405
    kind = ErrorKind.METHOD_NOT_ALLOWED


class MisdirectedRequest(InvalidRequest):
    """A `Host` the router does not answer by (`server.allowed_hosts`): DNS rebinding's tell."""

    status_code = 421
    kind = ErrorKind.MISDIRECTED_REQUEST


class ComponentUnavailable(RouterError):
    """A part of the router itself (its feedback store, its performance tracker) is slow, restarting or gone;
    the message names it. Not a backend: it counts against no backend's health."""

    status_code = 503
    kind = ErrorKind.COMPONENT_UNAVAILABLE


def internal_error(request_id: str) -> RouterError:
    """What a caller is told of an unforeseen failure: the request id the log holds it under, never the
    exception's text (it can hold internals)."""
    return RouterError(f"internal error; the router's log has the details under request id {request_id}")


def error_of_kind(kind: ErrorKind, message: str, **details: Any) -> RouterError:
    """The router error of `kind`, for a failure that crossed a process as data (a relayed request's)."""
    found: type[RouterError] = RouterError
    pending: list[type[RouterError]] = [RouterError]
    while pending:
        cls = pending.pop()
        if cls.kind is kind:
            found = cls
            break
        pending += cls.__subclasses__()
    return found(message, **details)
