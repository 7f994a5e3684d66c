"""A flow platform's stream (SSE, or Langflow's bare JSON objects) cut into its frames, however it is chunked."""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator

from actors.backends.http_flow import iter_frames


class Streamed:
    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    async def aiter_text(self) -> AsyncIterator[str]:
        for chunk in self.chunks:
            yield chunk


async def frames(chunks: list[str]) -> list[str]:
    return [f async for f in iter_frames(Streamed(chunks), 10**9)]  # type: ignore[arg-type]


async def test_frames_are_the_same_however_the_stream_is_chunked() -> None:
    rng = random.Random(3)
    for _ in range(300):
        events = ["data: " + "".join(rng.choice("ab\r") for _ in range(rng.randrange(12))) for _ in range(4)]
        body = rng.choice(["\n\n", "\r\n\r\n"]).join(events)
        cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randrange(6))))
        chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        assert await frames(chunks) == [f for f in body.replace("\r\n", "\n").split("\n\n") if f.strip()]


async def test_a_large_event_or_many_small_ones_are_read_in_linear_time() -> None:
    big = "data: " + "x" * 4_000_000 + "\n\n"
    many = "".join(f"data: {i}\n\n" for i in range(50_000))
    for chunks, count in (([big[i:i + 16384] for i in range(0, len(big), 16384)], 1), ([many], 50_000)):
        started = time.perf_counter()
        assert len(await frames(chunks)) == count
        assert time.perf_counter() - started < 0.2  # each chunk once copied the whole buffer: 0.4-1 s here
