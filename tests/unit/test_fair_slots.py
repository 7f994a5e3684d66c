"""A backend's call slots among principals: a flood from one caller does not queue another behind it."""

from __future__ import annotations

import asyncio

from actors.slots import FairSlots


async def _calls(slots: FairSlots, order: list[str], who: str, n: int, release: asyncio.Event) -> None:
    async def one(i: int) -> None:
        async with slots.held(who):
            order.append(f"{who}{i}")
            await release.wait()

    await asyncio.gather(*(one(i) for i in range(n)))


async def test_a_freed_slot_goes_to_the_waiting_principal_that_holds_the_fewest() -> None:
    slots, order, release = FairSlots(2), [], asyncio.Event()
    flood = asyncio.create_task(_calls(slots, order, "alice", 6, release))
    await asyncio.sleep(0.01)
    bob = asyncio.create_task(_calls(slots, order, "bob", 1, release))
    carol = asyncio.create_task(_calls(slots, order, "carol", 2, release))
    await asyncio.sleep(0.01)
    assert order == ["alice0", "alice1"]  # alice alone took every slot
    release.set()
    await asyncio.gather(flood, bob, carol)
    # Bob and Carol each get one of the next slots freed, not a place behind alice's queue; carol's second
    # call waits its turn, which still comes before alice's last.
    assert {"bob0", "carol0"} < set(order[2:5]) and order.index("carol1") < order.index("alice5")
    assert slots.in_use == 0


async def test_a_caller_alone_gets_every_slot_and_anonymous_callers_share_one_turn() -> None:
    slots, order, release = FairSlots(3), [], asyncio.Event()
    first = asyncio.create_task(_calls(slots, order, "", 4, release))
    await asyncio.sleep(0.01)
    assert slots.in_use == 3
    release.set()
    await first
    assert len(order) == 4 and slots.in_use == 0


async def test_anonymous_callers_unnamed_or_empty_wait_as_one_principal_beside_a_named_one() -> None:
    slots, order, release = FairSlots(1), [], asyncio.Event()
    held = asyncio.create_task(_calls(slots, order, "carol", 1, release))
    await asyncio.sleep(0.01)

    async def anonymous(i: int, principal: str | None) -> None:
        async with slots.held(principal):
            order.append(f"anon{i}")
            await release.wait()

    # Four anonymous calls queue first, named and unnamed alike, then two of dave's: a freed slot goes to
    # whichever of the two waiting principals holds the fewest, so dave's calls are not served after all four.
    crowd = [asyncio.create_task(anonymous(i, None if i % 2 else "")) for i in range(4)]
    await asyncio.sleep(0.01)
    dave = asyncio.create_task(_calls(slots, order, "dave", 2, release))
    await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(held, dave, *crowd)
    assert order[0] == "carol0" and order.index("dave1") < order.index("anon3")


async def test_a_cancelled_wait_gives_up_its_place_and_never_its_slot() -> None:
    slots, release = FairSlots(1), asyncio.Event()
    holder = asyncio.create_task(_calls(slots, [], "alice", 1, release))
    await asyncio.sleep(0.01)
    waiting = asyncio.create_task(_calls(slots, [], "bob", 1, release))
    await asyncio.sleep(0.01)
    waiting.cancel()
    release.set()
    await holder
    assert waiting.cancelled() and slots.in_use == 0
    async with slots.held("carol"):  # the slot is free again
        assert slots.in_use == 1


async def test_calls_beyond_those_that_may_wait_are_refused_unsent_and_a_freed_place_is_taken_again() -> None:
    import pytest

    from router.errors import BackendBusy

    slots, order, release = FairSlots(2, max_waiting=3), [], asyncio.Event()
    flood = asyncio.create_task(_calls(slots, order, "alice", 5, release))  # two in slots, three waiting
    await asyncio.sleep(0.01)
    with pytest.raises(BackendBusy, match="not sent"):
        async with slots.held("bob"):
            pass
    release.set()
    await flood
    async with slots.held("bob"):  # the queue drained: room again
        assert slots.in_use == 1
    assert FairSlots(64).max_waiting == 256
