"""An MCP server reached over streamable HTTP (configured headers on every request).

With `launch` in its config the backend also owns the server process: it starts it before
connecting, waits for the port, and starts it again when a reconnect finds it gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import signal
import ssl
import time
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client

from actors.backends.mcp import McpBackend
from actors.backends.mcp_stdio import resolve_command
from router.errors import BackendUnavailable
from router.settings import McpHttpSpec


def _die_with_parent() -> None:
    """Linux: the launched server gets SIGTERM when the actor process dies, even if it is killed."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for the process's backends: building one loads the CA bundle, some 15 ms of CPU that
    a host of a hundred backends paid once per connection (shared contexts are safe: each connection wraps
    its own socket)."""
    return httpx2.create_ssl_context()


class McpHttpBackend(McpBackend):
    kind = "mcp_http"
    transport = "streamable-http"

    def __init__(self, spec: McpHttpSpec) -> None:
        super().__init__(spec)
        self.http_spec = spec
        self._process: asyncio.subprocess.Process | None = None
        self._token: str | None = None  # the launched server's credential (`launch.token_env`)

    async def _target(self, stack: AsyncExitStack) -> Any:
        s = self.http_spec
        if s.launch is not None:
            await self._ensure_process()
        headers = {k: v.get_secret_value() for k, v in s.headers.items()}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        timeout = httpx2.Timeout(s.connect_timeout_s, read=max(s.timeout_s, 30.0))
        client = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=timeout,
                                                                    verify=_tls_context()))
        return streamable_http_client(s.url, http_client=client)

    async def _ensure_process(self) -> None:
        launch = self.http_spec.launch
        assert launch is not None
        if self._process is not None and self._process.returncode is None:
            return
        if self._process is not None:  # exited: what it started may still hold the port
            await _end_group(self._process)
        parts = urlsplit(self.http_spec.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)
        if await _accepts(host, port):
            # Another process holds the port (the previous deployment's server, still draining, or an orphan):
            # ours would fail to bind, and the port's answer be taken for ours. Tried again with backoff.
            raise BackendUnavailable(f"backend {self.name!r}: {host}:{port} is already in use by another process; "
                                     "the launched server cannot listen there", backend=self.name)
        # Like stdio servers (the MCP SDK's rule): a minimal inherited environment plus the configured
        # one, so the router's own secrets never reach a server that might echo its environment.
        env = {**get_default_environment(), **launch.env}
        if launch.token_env is not None:
            self._token = secrets.token_urlsafe(32)
            env[launch.token_env] = self._token
        self._process = await asyncio.create_subprocess_exec(
            resolve_command(launch.command), *launch.args, cwd=launch.cwd, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=None, preexec_fn=_die_with_parent,
            start_new_session=True)  # a group of its own: a wrapper (sh, npx, uv run) is ended with its server
        deadline = time.monotonic() + launch.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.returncode is not None:
                raise BackendUnavailable(f"backend {self.name!r}: launched server exited with code "
                                         f"{self._process.returncode}", backend=self.name)
            try:
                _, writer = await asyncio.open_connection(host, port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.1)
        raise BackendUnavailable(f"backend {self.name!r}: launched server did not open {host}:{port} within "
                                 f"{launch.startup_timeout_s:.0f} s", backend=self.name)

    async def shutdown(self) -> None:
        await self.close()
        process, self._process = self._process, None
        if process is not None:
            await _end_group(process)


async def _accepts(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


async def _end_group(process: asyncio.subprocess.Process) -> None:
    """The launched server's whole group: a wrapper that already exited may have left its server running."""
    if process.returncode is None:
        _signal_group(process, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 5)
    _signal_group(process, signal.SIGKILL)  # whatever of the group outlived its leader


def _signal_group(process: asyncio.subprocess.Process, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
