"""A bounded LRU map with an optional time-to-live, used for query vectors, sessions and responses."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    def __init__(self, size: int, ttl_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._ttl = ttl_s
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        stamp, value = item
        if self._ttl is not None and self._clock() - stamp > self._ttl:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        if self._size <= 0:
            return
        self._items[key] = (self._clock(), value)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def pop(self, key: K) -> V | None:
        item = self._items.pop(key, None)
        return None if item is None else item[1]

    def clear(self) -> None:
        self._items.clear()
