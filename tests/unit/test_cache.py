from __future__ import annotations

from router.cache import LRU


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_get_returns_what_was_put() -> None:
    c: LRU[str, int] = LRU(3)
    c.put("a", 1)
    assert c.get("a") == 1
    assert c.get("b") is None


def test_least_recently_used_entry_is_evicted_first() -> None:
    c: LRU[str, int] = LRU(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # "a" is now the most recent
    c.put("c", 3)
    assert c.get("b") is None
    assert (c.get("a"), c.get("c")) == (1, 3)
    assert len(c) == 2


def test_putting_an_existing_key_replaces_and_refreshes_it() -> None:
    c: LRU[str, int] = LRU(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("a", 10)
    c.put("c", 3)
    assert c.get("a") == 10
    assert c.get("b") is None


def test_entries_expire_after_the_ttl() -> None:
    clock = FakeClock()
    c: LRU[str, int] = LRU(10, ttl_s=5.0, clock=clock)
    c.put("a", 1)
    clock.now = 5.0
    assert c.get("a") == 1  # exactly at the ttl it is still fresh
    clock.now = 5.01
    assert c.get("a") is None
    assert len(c) == 0


def test_reading_does_not_extend_the_ttl() -> None:
    clock = FakeClock()
    c: LRU[str, int] = LRU(10, ttl_s=5.0, clock=clock)
    c.put("a", 1)
    clock.now = 4.0
    assert c.get("a") == 1
    clock.now = 6.0
    assert c.get("a") is None


def test_size_zero_stores_nothing() -> None:
    c: LRU[str, int] = LRU(0)
    c.put("a", 1)
    assert c.get("a") is None
    assert len(c) == 0


def test_pop_and_clear() -> None:
    c: LRU[str, int] = LRU(5)
    c.put("a", 1)
    c.put("b", 2)
    assert c.pop("a") == 1
    assert c.pop("a") is None
    c.clear()
    assert c.get("b") is None
