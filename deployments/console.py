"""The operator console at /ui/: plain HTML, CSS and JavaScript modules from `deployments/ui/`, no build step.

The page holds no data of its own: it calls the same API as any client (`/v1/whoami`, `/v1/backends`,
`/v1/route`, `/v1/query`, `/v1/feedback`, and for operators `/v1/stats`, `/v1/decisions`, `/v1/loadtest`)
with the key the operator types, kept in the tab's session storage only. Its files are public (they hold
no secret); every answer is under the caller's key and policy. A strict Content-Security-Policy allows
only the page's own scripts and styles, and the scripts render every string a backend sent as text.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse, Response

from router.errors import NotFound

UI = Path(__file__).resolve().parent / "ui"
PREFIX = "/ui"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache"}
FILES = {p.name: p for p in UI.iterdir() if p.suffix in _TYPES}


def add_console(app: FastAPI) -> None:
    @app.get(PREFIX, include_in_schema=False)
    async def console_root() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    @app.get(PREFIX + "/{name:path}", include_in_schema=False)
    async def console_file(name: str) -> Response:
        path = FILES.get(name or "index.html")
        if path is None:  # in the API's error format, as any other unknown path
            raise NotFound(f"GET {PREFIX}/{name}: no such file of the console")
        return Response(path.read_bytes(), media_type=_TYPES[path.suffix], headers=_HEADERS)
