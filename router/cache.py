"""A bounded LRU map with an optional time-to-live, used for query vectors, sessions and responses.

A map of callers' entries is `fair`: each entry is put with its owner, and a full map gives up the least
recently used entry of the owners holding the most. One caller filling it pushes out its own entries, not
everyone else's (a principal's cached answers, sessions and remembered decisions are theirs alone); among
owners holding as many, the entry used longest ago goes, as in a plain LRU."""

from __future__ import annotations

import heapq
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    def __init__(self, size: int, ttl_s: float | None = None, clock: Callable[[], float] = time.monotonic,
                 fair: bool = False) -> None:
        self._size = size
        self._ttl = ttl_s
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._fair = fair
        self._owner_of: dict[K, str] = {}
        self._keys: dict[str, OrderedDict[K, int]] = {}  # owner -> its keys, least recently used first, with a tick
        self._tick = 0
        self._holding: dict[int, set[str]] = {}  # entries -> the owners holding that many
        self._most = 0
        # Per number of entries held, (tick of its oldest entry, owner): the owner tied at the most whose oldest
        # entry is oldest, in O(log n). Entries a later change made stale are dropped when met, or all rebuilt.
        self._heaps: dict[int, list[tuple[int, str]]] = {}
        self._pushed = 0

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
        if self._fair:
            self._touch(key, self._owner_of[key])
        return value

    def put(self, key: K, value: V, owner: str = "") -> None:
        if self._size <= 0:
            return
        if self._fair:
            if self._owner_of.get(key) != owner:
                self._disown(key)
                self._owner_of[key] = owner
                self._count(owner, 1)
            self._touch(key, owner)
        self._items[key] = (self._clock(), value)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self.pop(self._victim())

    def _victim(self) -> K:
        """The least recently used entry, of the owners holding the most when the map is fair."""
        oldest = next(iter(self._items))
        if not self._fair:
            return oldest
        if self._owner_of[oldest] in self._holding[self._most]:  # many owners holding one each, say
            return oldest
        heap = self._heaps[self._most]
        while True:
            tick, owner = heap[0]
            keys = self._keys.get(owner)
            if keys is not None and len(keys) == self._most:
                first, first_tick = next(iter(keys.items()))
                if first_tick == tick:
                    return first
            heapq.heappop(heap)  # stale: the owner's count or its oldest entry changed since

    def _touch(self, key: K, owner: str) -> None:
        self._tick += 1
        keys = self._keys[owner]
        keys[key] = self._tick
        keys.move_to_end(key)
        self._note(owner)

    def _note(self, owner: str) -> None:
        """The owner's oldest entry and count as they are now, for `_victim`."""
        keys = self._keys.get(owner)
        if not keys:
            return
        heapq.heappush(self._heaps.setdefault(len(keys), []), (next(iter(keys.values())), owner))
        self._pushed += 1
        if self._pushed > 4 * len(self._owner_of) + 1024:  # mostly stale: rebuilt from the owners as they are
            self._heaps = {}
            for name, held in self._keys.items():
                self._heaps.setdefault(len(held), []).append((next(iter(held.values())), name))
            for heap in self._heaps.values():
                heapq.heapify(heap)
            self._pushed = len(self._keys)

    def _count(self, owner: str, n: int) -> None:
        keys = self._keys.setdefault(owner, OrderedDict())
        held = len(keys)  # before the change: the caller adds or removes the key after
        if held:
            self._holding[held].discard(owner)
        held += n
        if held:
            self._holding.setdefault(held, set()).add(owner)
            self._most = max(self._most, held)
        while self._most and not self._holding.get(self._most):
            self._holding.pop(self._most, None)
            self._most -= 1

    def _disown(self, key: K) -> None:
        owner = self._owner_of.pop(key, None)
        if owner is not None:
            self._count(owner, -1)
            keys = self._keys[owner]
            del keys[key]
            if not keys:
                del self._keys[owner]
            self._note(owner)

    def pop(self, key: K) -> V | None:
        self._disown(key)
        item = self._items.pop(key, None)
        return None if item is None else item[1]

    def clear(self) -> None:
        self._items.clear()
        self._owner_of.clear()
        self._keys.clear()
        self._holding.clear()
        self._most = 0
        self._heaps.clear()
        self._pushed = 0
