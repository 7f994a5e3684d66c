"""Protocol-faithful stand-ins for Flowise and Langflow, served over real HTTP on loopback.

    fake = FakeFlowise([Chatflow(id="f1", name="Docs QA")], api_key="...")
    with serve_app(fake.app) as url:       # uvicorn on 127.0.0.1, a free port, a background thread
        ...                                 # point a FlowiseSpec at `url`

The fakes follow the public API documentation and the behaviour observed on Flowise 3.1.2 and
Langflow 1.13.0 (see `tests/fakes/flowise.py` and `tests/fakes/langflow.py`); they are not the
real products.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn


@dataclass
class Recorded:
    """One request a fake received, as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


async def slow_down(request: Any, seconds: float) -> None:
    """Sleep like a slow flow, but stop early once the client has gone (so servers stop promptly)."""
    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(gone(), seconds)


@contextmanager
def serve_app(app: Any, *, host: str = "127.0.0.1", startup_timeout_s: float = 10.0,
              lifespan: str = "off") -> Iterator[str]:
    """Run an ASGI app with uvicorn on a free port in a daemon thread; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    # A short graceful shutdown: handlers still sleeping for a timeout test are cancelled at exit.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan=lifespan,
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name=f"fake-server-{port}")
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError(f"the fake server on {host}:{port} did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


__all__ = ["Recorded", "RecordingFake", "record_request", "serve_app", "slow_down"]


async def record_request(request: Any) -> Recorded:
    """What a fake server received: method, path, query, headers (lower-cased) and the JSON body (or text)."""
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode(errors="replace")
    return Recorded(request.method, request.url.path, dict(request.query_params),
                    {k.lower(): v for k, v in request.headers.items()}, body)


class RecordingFake:
    """Base of the fake servers: every request is recorded; `last` finds the newest by path."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []

    def last(self, path_suffix: str = "") -> Recorded:
        return next(r for r in reversed(self.requests) if r.path.endswith(path_suffix))

    async def _record(self, request: Any) -> Recorded:
        rec = await record_request(request)
        self.requests.append(rec)
        return rec
