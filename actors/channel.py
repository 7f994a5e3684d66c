"""A same-node fast path into a backend actor: calls over a Unix socket instead of Ray tasks.

A Ray actor call costs about 2 ms on this kind of machine before any work is done, and the MCP call
inside the actor runs slower while Ray's threads hand the task over. A backend actor therefore also
listens on a Unix socket in a private directory (mode 0700, so only its own user can connect);
router replicas on the same node send `call`s over one connection each, many in flight at once,
as length-prefixed pickled frames. A connection first presents the channel's random token, which
callers get through Ray (so only a Ray client of this cluster can call); nothing is unpickled before
that. Nothing but `call` travels this way, and callers on other nodes use Ray. A closed connection
fails the calls in flight on it with `ChannelClosed`, which the executor treats like an unavailable
actor: it looks the actor up again and retries.

Frames: request `(call_id, args)`; cancel `(call_id, None)`; reply `(call_id, result, error)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import itertools
import os
import pickle
import secrets
import stat
import struct
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

_LENGTH = "!I"  # a format string, not a Struct: this module travels to actors by pickle
_LENGTH_SIZE = struct.calcsize(_LENGTH)
_TOKEN_BYTES = 32
_MAX_REQUEST_BYTES = 64 * 2**20  # a call's arguments; larger frames end the connection


class ChannelClosed(ConnectionError):
    """The connection to the actor ended; the call may or may not have run."""


class ChannelCallError(RuntimeError):
    """The handler raised; the message names the exception."""


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack(_LENGTH, len(data)) + data


async def _read_frame(reader: asyncio.StreamReader, limit: int | None = None) -> Any:
    (length,) = struct.unpack(_LENGTH, await reader.readexactly(_LENGTH_SIZE))
    if limit is not None and length > limit:
        raise ConnectionError(f"frame of {length} bytes exceeds {limit}")
    return pickle.loads(await reader.readexactly(length))


def _forget(running: dict[int, Any], call_id: int, _task: asyncio.Task[None]) -> None:
    running.pop(call_id, None)


def supported() -> bool:
    return hasattr(asyncio, "start_unix_server")


def _socket_dir() -> str:
    """This user's private socket directory, cleared of sockets whose process is gone (an actor that
    was killed cannot remove its own). A directory another user could write to is never used."""
    path = os.path.join(tempfile.gettempdir(), f"mcp-router-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{path} is not a private directory of this user")
    for name in os.listdir(path):
        pid = name.split("-", 1)[0]
        if name.endswith(".sock") and pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(path, name))
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ChannelServer:
    """Serves `handler(*args)` on a Unix socket; each call runs as its own task, cancellable by id."""

    def __init__(self, handler: Callable[..., Awaitable[Any]]) -> None:
        self.handler = handler
        self.path: str | None = None
        self.token = b""
        self._server: asyncio.AbstractServer | None = None
        self._starting: asyncio.Lock | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> tuple[str, bytes]:
        """`(socket path, token)`; the first call binds the socket, concurrent ones wait for it."""
        self._starting = self._starting or asyncio.Lock()
        async with self._starting:
            if self.path is None:
                path = os.path.join(_socket_dir(), f"{os.getpid()}-{id(self):x}.sock")
                self.token = secrets.token_bytes(_TOKEN_BYTES)
                self._server = await asyncio.start_unix_server(self._serve, path)
                self.path = path
        return self.path, self.token

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._connections):  # callers see the channel close and find the actor again
            writer.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.path = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        running: dict[int, asyncio.Task[None]] = {}

        async def run(call_id: int, args: tuple[Any, ...]) -> None:
            reply: tuple[int, Any, str | None]
            try:
                reply = (call_id, await self.handler(*args), None)
            except asyncio.CancelledError:
                return  # the caller asked for this and no longer waits
            except Exception as exc:  # reported to the caller, who decides
                reply = (call_id, None, f"{type(exc).__name__}: {exc}"[:500])
            if not writer.is_closing():
                writer.write(_frame(reply))
                with contextlib.suppress(OSError):
                    await writer.drain()  # a caller slow to read holds replies back here, not in memory

        self._connections.add(writer)
        try:
            token = await asyncio.wait_for(reader.readexactly(_TOKEN_BYTES), 10)
            if not hmac.compare_digest(token, self.token):
                return
            while True:
                call_id, args = await _read_frame(reader, _MAX_REQUEST_BYTES)
                if args is None:
                    if (task := running.get(call_id)) is not None:
                        task.cancel()
                else:
                    task = running[call_id] = asyncio.create_task(run(call_id, args))
                    # Not in `run`: a task cancelled before it starts never runs its body.
                    task.add_done_callback(functools.partial(_forget, running, call_id))
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass  # the caller went away (or never said who it is): its calls are abandoned
        finally:
            for task in list(running.values()):
                task.cancel()
            self._connections.discard(writer)
            writer.close()


class ChannelClient:
    """One connection to a `ChannelServer`, shared by all of a replica's calls to that backend."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._ids = itertools.count()
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._reading = asyncio.get_running_loop().create_task(self._read(reader))

    @classmethod
    async def connect(cls, path: str, token: bytes) -> ChannelClient:
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError as exc:  # the actor moved or restarted: its socket is gone
            raise ChannelClosed(f"cannot connect to {path}: {exc}") from exc
        writer.write(token)
        return cls(reader, writer)

    @property
    def closed(self) -> bool:
        return self._reading.done()

    async def call(self, args: tuple[Any, ...]) -> Any:
        if self.closed:
            raise ChannelClosed("channel closed")
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        try:
            self._writer.write(_frame((call_id, args)))
            try:
                await self._writer.drain()
            except OSError as exc:
                raise ChannelClosed(f"channel closed: {type(exc).__name__}") from exc
            return await future
        except asyncio.CancelledError:
            if not self.closed:
                self._writer.write(_frame((call_id, None)))  # stops the call's task in the actor
            raise
        finally:
            self._waiting.pop(call_id, None)

    async def close(self) -> None:
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reading

    async def _read(self, reader: asyncio.StreamReader) -> None:
        failure = "the backend actor closed the channel"
        try:
            while True:
                call_id, result, error = await _read_frame(reader)
                future = self._waiting.get(call_id)
                if future is None or future.done():
                    continue
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(ChannelCallError(error))
        except Exception as exc:  # end of stream, or a frame that does not unpickle: the channel is done
            failure = f"{failure}: {type(exc).__name__}"
        finally:
            self._writer.close()
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(ChannelClosed(failure))
