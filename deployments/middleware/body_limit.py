"""Request bodies over the limit are refused with 413 before any parsing (declared or streamed)."""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from deployments.middleware.reply import reply
from router.errors import PayloadTooLarge


class BodyLimit:
    """Rejects request bodies over `limit` bytes with 413 before any parsing."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await reply(send, PayloadTooLarge(f"request body exceeds {self.limit} bytes").payload(), 413)
            return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise PayloadTooLarge(f"request body exceeds {self.limit} bytes")
            return message

        await self.app(scope, limited, send)
