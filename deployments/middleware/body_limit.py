"""Request bodies over the limit are refused with 413 before any parsing (declared or streamed), and bodies that
do not arrive in time with 408."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from deployments.middleware.reply import reply
from router.errors import PayloadTooLarge, RequestTimeout


class BodyLimit:
    """Rejects request bodies over `limit` bytes with 413 before any parsing, and waits at most `timeout_s` for a
    whole body: a client that sends a byte now and then would otherwise hold one of the replica's request slots
    for as long as it likes. Once the body is in, waiting for the client to leave (a stream) is not bounded."""

    def __init__(self, app: ASGIApp, limit: int, timeout_s: float = 30.0) -> None:
        self.app = app
        self.limit = limit
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await reply(send, PayloadTooLarge(f"request body exceeds {self.limit} bytes").payload(), 413)
            return
        seen, complete, deadline = 0, False, asyncio.get_running_loop().time() + self.timeout_s

        async def limited() -> Any:
            nonlocal seen, complete
            if complete:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):  # no task of its own, as wait_for makes: every request pays it
                    message = await receive()
            except TimeoutError:
                raise RequestTimeout(f"the request body did not arrive within {self.timeout_s:g} s "
                                     "(server.body_timeout_s)") from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise PayloadTooLarge(f"request body exceeds {self.limit} bytes")
                complete = not message.get("more_body", False)
            else:
                complete = True
            return message

        await self.app(scope, limited, send)
