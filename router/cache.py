"""A bounded LRU map with an optional time-to-live, used for query vectors, sessions and responses.

Where entries belong to callers, `put(..., owner=...)` names whose each is, and a full map gives up the least
recently used entry of the owner holding the most: one caller filling it pushes out its own entries, not
everyone else's (a principal's cached answers, sessions and remembered decisions are theirs alone)."""

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
        self._owner_of: dict[K, str] = {}  # only entries put with an owner
        self._owned: dict[str, OrderedDict[K, None]] = {}  # owner -> its keys, least recently used first

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        stamp, value = item
        if self._ttl is not None and self._clock() - stamp > self._ttl:
            self.pop(key)
            return None
        self._items.move_to_end(key)
        owner = self._owner_of.get(key)
        if owner is not None:
            self._owned[owner].move_to_end(key)
        return value

    def put(self, key: K, value: V, owner: str | None = None) -> None:
        if self._size <= 0:
            return
        if self._owner_of.get(key, owner) != owner:
            self._disown(key)
        self._items[key] = (self._clock(), value)
        self._items.move_to_end(key)
        if owner is not None:
            self._owner_of[key] = owner
            self._owned.setdefault(owner, OrderedDict())[key] = None
            self._owned[owner].move_to_end(key)
        while len(self._items) > self._size:
            self.pop(self._victim())

    def _victim(self) -> K:
        """The least recently used entry of the owner holding the most (of all, when none has an owner)."""
        if not self._owned:
            return next(iter(self._items))
        largest = max(self._owned.values(), key=len)
        if len(largest) < len(self._items) - len(self._owner_of):  # the entries with no owner hold more
            return next(k for k in self._items if k not in self._owner_of)
        return next(iter(largest))

    def _disown(self, key: K) -> None:
        owner = self._owner_of.pop(key, None)
        if owner is not None:
            keys = self._owned[owner]
            del keys[key]
            if not keys:
                del self._owned[owner]

    def pop(self, key: K) -> V | None:
        self._disown(key)
        item = self._items.pop(key, None)
        return None if item is None else item[1]

    def clear(self) -> None:
        self._items.clear()
        self._owner_of.clear()
        self._owned.clear()
