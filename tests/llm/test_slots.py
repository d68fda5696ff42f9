"""Slots that let waiting requests in by priority, then arrival."""

from __future__ import annotations

import asyncio

import pytest

from tmem_core.llm._slots import PrioritySlots


def test_waiters_enter_by_priority_then_arrival_and_never_more_than_the_size() -> None:
    entered: list[str] = []
    holding = 0
    most = 0

    async def hold(slots: PrioritySlots, name: str, priority: int) -> None:
        nonlocal holding, most
        async with slots.slot(priority):
            holding += 1
            most = max(most, holding)
            entered.append(name)
            await asyncio.sleep(0.01)
            holding -= 1

    async def main() -> None:
        slots = PrioritySlots(2)
        first = [asyncio.create_task(hold(slots, n, 0)) for n in ("x", "y")]
        await asyncio.sleep(0)  # both hold a slot; the rest wait
        rest = [asyncio.create_task(hold(slots, n, p))
                for n, p in (("a", 0), ("b", 0), ("m1", -1), ("c", 0), ("m2", -1))]
        await asyncio.gather(*first, *rest)

    asyncio.run(main())
    assert entered == ["x", "y", "m1", "m2", "a", "b", "c"]
    assert most == 2


def test_a_cancelled_waiter_gives_up_its_turn_and_no_slot_is_lost() -> None:
    async def main() -> list[str]:
        slots = PrioritySlots(1)
        entered: list[str] = []

        async def hold(name: str, priority: int = 0) -> None:
            async with slots.slot(priority):
                entered.append(name)
                await asyncio.sleep(0.01)

        busy = asyncio.create_task(hold("busy"))
        await asyncio.sleep(0)
        gone = asyncio.create_task(hold("gone", -1))
        later = asyncio.create_task(hold("later"))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.gather(busy, later)
        with pytest.raises(asyncio.CancelledError):
            await gone
        async with slots.slot():  # the slot came back
            entered.append("again")
        return entered

    assert asyncio.run(main()) == ["busy", "later", "again"]


def test_slots_need_at_least_one() -> None:
    with pytest.raises(ValueError, match="1 or more"):
        PrioritySlots(0)
