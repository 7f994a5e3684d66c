"""The same-node call channel over a real Unix socket, without Ray: many calls in flight on one
connection, cancellation by id, a handler's exception, the server going away, and the sweep of
sockets left behind by killed processes."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys
from typing import Any

import pytest

from actors import channel
from actors.channel import ChannelCallError, ChannelClient, ChannelClosed, ChannelServer


class Handler:
    def __init__(self) -> None:
        self.called: list[str] = []
        self.cancelled: list[str] = []

    async def __call__(self, name: str, delay: float = 0.0) -> str:
        self.called.append(name)
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise
        if name == "boom":
            raise ValueError("no such thing")
        return name.upper()


async def pair(handler: Any) -> tuple[ChannelServer, ChannelClient]:
    server = ChannelServer(handler)
    return server, await ChannelClient.connect(*await server.start())


def test_calls_in_flight_together_come_back_to_their_callers_and_close_removes_the_socket() -> None:
    async def run() -> tuple[str, list[str]]:
        server, client = await pair(Handler())
        try:
            assert server.path is not None
            return server.path, await asyncio.gather(*(client.call((f"n{i}", 0.05 - i * 0.01)) for i in range(5)))
        finally:
            await client.close()
            await server.close()

    path, results = asyncio.run(run())
    assert results == [f"N{i}" for i in range(5)]  # replies arrive out of order, each to its caller
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700 and not os.path.exists(path)


async def test_cancelling_one_call_cancels_its_task_only() -> None:
    handler = Handler()
    server, client = await pair(handler)
    try:
        slow = asyncio.create_task(client.call(("slow", 5.0)))
        other = asyncio.create_task(client.call(("other", 0.2)))
        await asyncio.sleep(0.05)
        slow.cancel()
        assert await other == "OTHER"
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert handler.cancelled == ["slow"]
    finally:
        await client.close()
        await server.close()


async def test_a_handler_error_names_the_exception_and_keeps_the_connection() -> None:
    server, client = await pair(Handler())
    try:
        with pytest.raises(ChannelCallError, match="ValueError: no such thing"):
            await client.call(("boom",))
        assert await client.call(("fine",)) == "FINE"
    finally:
        await client.close()
        await server.close()


async def test_calls_in_flight_fail_as_closed_when_the_server_goes_away() -> None:
    server, client = await pair(Handler())
    waiting = asyncio.create_task(client.call(("slow", 5.0)))
    await asyncio.sleep(0.05)
    await server.close()
    with pytest.raises(ChannelClosed):
        await asyncio.wait_for(waiting, 5)
    assert client.closed
    with pytest.raises(ChannelClosed):
        await client.call(("late",))
    await client.close()


async def test_a_caller_without_the_token_is_hung_up_on_before_anything_is_unpickled() -> None:
    handler = Handler()
    server = ChannelServer(handler)
    path, token = await server.start()
    try:
        for wrong in (b"", bytes(len(token))):  # no token at all, and a wrong one
            intruder = await ChannelClient.connect(path, wrong)
            with pytest.raises(ChannelClosed):
                await asyncio.wait_for(intruder.call(("intruder",)), 15)
            await intruder.close()
        assert handler.called == []
        starts = await asyncio.gather(server.start(), server.start())  # concurrent starts share one socket
        assert starts == [(path, token)] * 2
        friend = await ChannelClient.connect(path, token)
        assert await friend.call(("hello",)) == "HELLO"
        await friend.close()
    finally:
        await server.close()


def test_sockets_of_dead_processes_are_swept_and_live_ones_kept() -> None:
    directory = channel._socket_dir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    stale = os.path.join(directory, f"{dead.stdout.strip()}-0.sock")
    live = os.path.join(directory, f"{os.getpid()}-test.sock")
    for path in (stale, live):
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(path)
    try:
        assert channel._socket_dir() == directory
        assert not os.path.exists(stale) and os.path.exists(live)
    finally:
        os.unlink(live)
