"""Answering from a middleware, before (or instead of) the app: one JSON response, sent at once."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import Send


async def reply(send: Send, body: Any, status: int, headers: dict[str, str] | None = None) -> None:
    await JSONResponse(body, status_code=status, headers=headers)({"type": "http"}, _no_receive, send)


async def _no_receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}
