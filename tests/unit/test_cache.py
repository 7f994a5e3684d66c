from __future__ import annotations

import random

from router.cache import LRU
from tests.unit.helpers import FakeClock


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


def test_a_full_map_gives_up_an_entry_of_the_owner_holding_the_most() -> None:
    c: LRU[str, int] = LRU(4, fair=True)
    c.put("alice-1", 1, owner="alice")
    for i in range(10):  # bob floods it
        c.put(f"bob-{i}", i, owner="bob")
    assert c.get("alice-1") == 1 and len(c) == 4
    assert [k for k in ("bob-6", "bob-7", "bob-8", "bob-9") if c.get(k) is not None] == ["bob-7", "bob-8", "bob-9"]
    c.put("alice-2", 2, owner="alice")  # bob holds the most: his least recently used goes
    assert c.get("bob-7") is None and c.get("alice-1") == 1
    c.put("alice-3", 3, owner="alice")  # alice holds the most now: her least recently used (alice-2) goes
    assert c.get("alice-2") is None and c.get("alice-1") == 1
    assert (c.get("bob-8"), c.get("bob-9")) == (8, 9)


def test_an_entry_moves_to_its_new_owner_and_popped_entries_are_forgotten() -> None:
    c: LRU[str, int] = LRU(2, fair=True)
    c.put("k", 1, owner="alice")
    c.put("k", 2, owner="bob")
    c.put("b", 3, owner="bob")
    c.put("a", 4, owner="alice")  # bob holds both others: his least recently used ("k") goes
    assert c.get("k") is None and (c.get("b"), c.get("a")) == (3, 4)
    assert c.pop("a") == 4 and c.pop("b") == 3 and len(c) == 0
    c.put("x", 5)
    c.put("y", 6)
    c.put("z", 7)  # everyone's own: least recently used first, as in a plain map
    assert c.get("x") is None


def test_among_owners_holding_as_many_the_entry_used_longest_ago_goes() -> None:
    c: LRU[str, int] = LRU(3, fair=True)
    for who in ("alice", "bob", "carol"):
        c.put(f"s-{who}", 1, owner=who)
    assert c.get("s-alice") == 1  # alice's session is in use; bob's is the one idle longest
    c.put("s-dave", 1, owner="dave")
    assert c.get("s-bob") is None and c.get("s-alice") == 1 and len(c) == 3


def test_a_fair_map_always_gives_up_the_least_recently_used_entry_of_the_owners_holding_the_most() -> None:
    rng = random.Random(1)
    for _ in range(200):
        size = rng.randrange(1, 15)
        c: LRU[str, int] = LRU(size, fair=True)
        for step in range(200):
            key, owner = f"k{rng.randrange(30)}", f"o{rng.randrange(rng.choice([2, 5, 40]))}"
            roll = rng.random()
            if roll < 0.3:
                c.get(key)
                continue
            if roll < 0.4:
                c.pop(key)
                continue
            owners = {**c._owner_of, key: owner}
            order = [k for k in c._items if k != key] + [key]
            held = {o: list(owners.values()).count(o) for o in owners.values()}
            victim = next(k for k in order if held[owners[k]] == max(held.values())) if len(owners) > size else None
            c.put(key, step, owner=owner)
            assert set(c._items) == set(owners) - {victim}  # that one entry, and only it


def test_a_fair_map_stays_fair_through_the_rebuild_of_its_bookkeeping() -> None:
    rng = random.Random(2)
    c: LRU[str, int] = LRU(50, fair=True)
    for step in range(20_000):  # gets and puts push far more than the rebuild's threshold
        key, owner = f"k{rng.randrange(200)}", f"o{rng.randrange(rng.choice([3, 60]))}"
        if rng.random() < 0.4:
            c.get(key)
            continue
        owners = {**c._owner_of, key: owner}
        order = [k for k in c._items if k != key] + [key]
        held = {o: list(owners.values()).count(o) for o in owners.values()}
        victim = next(k for k in order if held[owners[k]] == max(held.values())) if len(owners) > 50 else None
        c.put(key, step, owner=owner)
        assert set(c._items) == set(owners) - {victim}
    assert c._pushed < 4 * 50 + 1024  # the bookkeeping was rebuilt at least once, and stays bounded
