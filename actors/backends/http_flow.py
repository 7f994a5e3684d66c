"""What the Flowise and Langflow backends share: one httpx client per backend, credential hygiene,
and the translation of HTTP and transport errors into RouterErrors, in one place.

Keys travel as per-request headers and are redacted from every message; the W3C trace context of
the call goes out as HTTP headers on every request. Error texts the platforms wrap (Langflow's JSON
encoded in a string, "500: {...}") are unpacked to the message a person would read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from router.errors import (
    AnswerTooLarge,
    BackendBusy,
    BackendFailed,
    BackendRejectedArguments,
    BackendTimeout,
    BackendUnavailable,
    BackendUnreachable,
    FlowNotFound,
    FlowUnauthorized,
    RouterError,
)
from router.settings import FlowiseSpec, FlowSpec, LangflowSpec
from router.values import CallContext, Capability

EVENT_STREAM = "text/event-stream"
StreamReader = Callable[[httpx.Response, Capability], Awaitable[Any]]


_STATUS_PREFIX = re.compile(r"^\d{3}: (?=\{)")  # str() of an HTTP exception: "500: {...}"


def readable_error(value: Any, depth: int = 0) -> str:
    """The human part of an error value: a dict's `message`/`error`/`text`/`detail`, a JSON object
    encoded in a string unpacked, anything else as JSON."""
    if isinstance(value, str):
        text = _STATUS_PREFIX.sub("", value.strip())
        if text.startswith("{") and depth < 3:
            try:
                return readable_error(json.loads(text), depth + 1)
            except ValueError:
                pass
        return text
    if isinstance(value, dict):
        for key in ("message", "error", "text", "detail"):
            inner = value.get(key)
            if isinstance(inner, str | dict) and inner and depth < 3:
                return readable_error(inner, depth + 1)
    return json.dumps(value, default=str)


_ERROR_BODY_BYTES = 65536  # of an error answer, enough for its message


def _too_large(limit: int) -> AnswerTooLarge:
    return AnswerTooLarge(f"the answer is larger than security.max_answer_bytes ({limit})")


async def read_capped(resp: httpx.Response, limit: int, *, prefix: bool = False) -> bytes:
    """The body, never held whole past `limit` bytes: refused (`AnswerTooLarge`), or with `prefix` cut there."""
    body = bytearray()
    async for chunk in resp.aiter_bytes():
        body += chunk
        if len(body) > limit:
            if prefix:
                return bytes(body[:limit])
            raise _too_large(limit)
    return bytes(body)


async def iter_frames(resp: httpx.Response, limit: int) -> AsyncIterator[str]:
    """The blank-line separated frames of a streamed body (SSE, or Langflow's bare JSON objects), refused as
    soon as the stream passes `limit` bytes."""
    buffer, carry, seen = "", "", 0
    async for chunk in resp.aiter_text():
        seen += len(chunk.encode("utf-8", "surrogatepass"))
        if seen > limit:
            raise _too_large(limit)
        # Only the new text is searched, and each frame cut out by position: one event of megabytes in small
        # chunks, or thousands of small events in one chunk, is read in linear time. A "\r" ending a chunk may
        # pair with the next one's "\n".
        text = carry + chunk
        carry = "\r" if text.endswith("\r") else ""
        text = (text[:-1] if carry else text).replace("\r\n", "\n")
        pos, search = 0, max(0, len(buffer) - 1)
        buffer += text
        end = buffer.find("\n\n", search)
        while end != -1:
            frame = buffer[pos:end]
            if frame.strip():
                yield frame
            pos = end + 2
            end = buffer.find("\n\n", pos)
        if pos:
            buffer = buffer[pos:]
    buffer += carry
    if buffer.strip():
        yield buffer


def _server_message(raw: bytes) -> str:
    """The error text a flow platform put in its body (`message`, `error` or `detail`, unpacked)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:300]
    return readable_error(body)[:300]


class HttpFlowBackend:
    """What the Flowise and Langflow backends share; subclasses implement `_probe` and the calls."""

    kind = "flow"
    transport = "http"
    product = "the flow platform"
    auth_quirk_500 = False  # Flowise: a rejected per-flow key is an HTTP 500 saying "Unauthorized"
    max_answer_bytes = 16 * 2**20  # the supervisor sets `security.max_answer_bytes`

    def __init__(self, spec: FlowiseSpec | LangflowSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.on_change: Callable[[], None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._flow_specs: dict[str, FlowSpec] = {f.id: f for f in spec.flows}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, url={self._url()!r})"

    def _url(self) -> str:
        url = httpx.URL(self.spec.url)
        return str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)

    @property
    def connected(self) -> bool:
        return self._client is not None and not self._client.is_closed

    async def connect(self) -> None:
        if self.connected:
            return
        timeout = httpx.Timeout(self.spec.timeout_s, connect=self.spec.connect_timeout_s)
        self._client = httpx.AsyncClient(base_url=self.spec.url, timeout=timeout)
        try:
            await self._probe(self.spec.connect_timeout_s, "connect")
        except RouterError as exc:  # a timeout or a bad answer at connect time: the backend is not up
            await self.close()
            raise BackendUnavailable(exc.message, backend=self.name) from None

    async def health(self, timeout_s: float) -> None:
        await self._probe(timeout_s, "health check")

    async def _probe(self, timeout_s: float, what: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def shutdown(self) -> None:
        await self.close()

    def _require(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            raise BackendUnreachable(f"backend {self.name!r} is not connected", backend=self.name)
        return self._client

    def _key(self, flow_id: str | None = None) -> str | None:
        flow = self._flow_specs.get(flow_id) if flow_id else None
        if flow is not None and flow.api_key is not None:
            return flow.api_key.get_secret_value()
        return self.spec.resolved_api_key()

    def redact(self, text: str) -> str:
        keys = [self.spec.resolved_api_key(), *(f.api_key.get_secret_value() for f in self.spec.flows
                                                if f.api_key)]
        for key in sorted((k for k in keys if k), key=len, reverse=True):
            text = text.replace(key, "***")
        return text

    @staticmethod
    def _trace(context: CallContext) -> dict[str, str]:
        return {str(k): str(v) for k, v in (context.trace or {}).items()}

    async def _get(self, path: str, *, what: str, timeout_s: float, headers: dict[str, str] | None = None,
                   params: dict[str, str] | None = None) -> httpx.Response:
        client = self._require()
        try:
            async with asyncio.timeout(timeout_s):
                return await client.get(path, headers=headers, params=params, timeout=timeout_s)
        except (TimeoutError, httpx.HTTPError) as exc:
            raise self._translate(exc, what, timeout_s) from None

    async def _post_flow(self, cap: Capability, path: str, *, body: dict[str, Any], headers: dict[str, str],
                         timeout_s: float, read_stream: StreamReader, params: dict[str, str] | None = None,
                         first_byte_s: float | None = None) -> tuple[Any, float]:
        """POST a run; a streamed body goes to `read_stream`, any other is parsed as JSON.

        `first_byte_s` bounds the wait for the response to start, apart from `timeout_s` for the whole
        answer: a platform that answers some failures with nothing is then reported at once.
        """
        client = self._require()
        what = f"flow {cap.name!r}"
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s), contextlib.AsyncExitStack() as stack:
                request = client.stream("POST", path, json=body, headers=headers, params=params, timeout=timeout_s)
                try:
                    async with asyncio.timeout(first_byte_s):
                        resp = await stack.enter_async_context(request)
                except TimeoutError:
                    if first_byte_s is None or first_byte_s >= timeout_s:
                        raise
                    raise self._no_first_byte(cap, first_byte_s) from None
                if resp.status_code >= 400:
                    raise self._status_error(resp, what, cap, await read_capped(resp, _ERROR_BODY_BYTES, prefix=True))
                if EVENT_STREAM in resp.headers.get("content-type", ""):
                    result = await read_stream(resp, cap)
                else:
                    result = self._json(await read_capped(resp, self.max_answer_bytes), what, cap, obj=True)
        except (TimeoutError, httpx.HTTPError) as exc:
            raise self._translate(exc, what, timeout_s, cap) from None
        return result, (time.perf_counter() - started) * 1000

    def _json(self, raw: bytes | str, what: str, cap: Capability | None = None, *, obj: bool = False) -> Any:
        """Parse a body or a stream event; with `obj` it must be a JSON object."""
        try:
            value = json.loads(raw)
            if not obj or isinstance(value, dict):
                return value
        except ValueError:
            pass
        raise BackendFailed(f"backend {self.name!r} ({what}): malformed response (not "
                            f"{'a JSON object' if obj else 'JSON'})", backend=self.name,
                            tool=cap.name if cap else None)

    def _translate(self, exc: BaseException, what: str, timeout_s: float, cap: Capability | None = None
                   ) -> RouterError:
        """Timeouts and httpx errors -> RouterError."""
        tool = cap.name if cap else None
        if isinstance(exc, TimeoutError | httpx.TimeoutException):
            return BackendTimeout(f"backend {self.name!r} ({what}): no answer within {timeout_s:.1f} s",
                                  backend=self.name, tool=tool)
        cause = self.redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:300]
        if isinstance(exc, httpx.ConnectError):  # no connection, so no request: nothing ran
            return BackendUnreachable(f"backend {self.name!r} ({what}): cannot reach {self._url()}: {cause}",
                                      backend=self.name)
        if isinstance(exc, httpx.TransportError):
            return BackendUnavailable(f"backend {self.name!r} ({what}): cannot reach {self._url()}: {cause}",
                                      backend=self.name)
        return BackendFailed(f"backend {self.name!r} ({what}): {cause}", backend=self.name, tool=tool)

    def _no_first_byte(self, cap: Capability, seconds: float) -> RouterError:
        """No response started within `_post_flow`'s `first_byte_s`."""
        return BackendTimeout(f"backend {self.name!r} (flow {cap.name!r}): no response within {seconds:.1f} s",
                              backend=self.name, tool=cap.name)

    def _clean_message(self, text: str) -> str:
        """The platform's error text as a person should read it (Flowise drops its call-site prefixes)."""
        return text

    def _missing_flow(self, status: int, message: str) -> bool:
        """Whether an error answer to a run means there is no such flow."""
        return status == 404

    def _status_error(self, resp: httpx.Response, what: str, cap: Capability | None = None,
                      body: bytes | None = None) -> RouterError:
        """An HTTP error status -> RouterError (`body`: the response's, when it was streamed); an auth failure
        never echoes the server's text."""
        status, tool = resp.status_code, (cap.name if cap else None)
        message = self._clean_message(self.redact(_server_message(resp.content if body is None else body)))
        where = f"backend {self.name!r} ({what})"
        quirk = self.auth_quirk_500 and status == 500 and "unauthorized" in message.lower()
        if status in (401, 403) or quirk:
            hint = ("no API key is configured (set api_key or api_key_env)"
                    if not self._key(cap.target if cap else None) else
                    "check the backend's api_key / api_key_env" + (" and the flow's api_key" if cap else ""))
            return FlowUnauthorized(f"{where}: {self.product} refused the request as unauthorized "
                                    f"(HTTP {status}); {hint}", backend=self.name, tool=tool)
        if cap is not None and self._missing_flow(status, message):
            return FlowNotFound(f"{where}: {self.product} has no flow {cap.name!r} (id {cap.target or cap.name!r}) "
                                f"(HTTP {status}: {message or 'no message'})", backend=self.name, tool=tool)
        if status == 404:
            return BackendFailed(f"{where}: {self.product} has no {resp.url.path} (HTTP 404)", backend=self.name)
        if status in (408, 429):
            return BackendBusy(f"{where}: {self.product} did not start the run (HTTP {status}: "
                               f"{message or 'no message'})", backend=self.name, tool=tool)
        if cap is not None and status in (400, 413, 422):
            return BackendRejectedArguments(f"{where}: {self.product} rejected the request (HTTP {status}): "
                                            f"{message or 'no message'}", backend=self.name, tool=tool)
        if status in (502, 503):
            return BackendUnavailable(f"{where}: HTTP {status}: {message}", backend=self.name)
        if status == 504:
            return BackendTimeout(f"{where}: HTTP 504: {message}", backend=self.name, tool=tool)
        return BackendFailed(f"{where}: HTTP {status}: {message or 'no message'}", backend=self.name,
                             tool=tool)

    def _flow_spec(self, *ids: str | None) -> FlowSpec | None:
        return next((self._flow_specs[i] for i in ids if i and i in self._flow_specs), None)
