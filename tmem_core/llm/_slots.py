"""A bound on the requests in flight that lets waiting requests in by priority, then arrival.

An engine with every slot busy queues what else is sent to it in arrival order; a client that
holds requests back until a slot is free can choose instead. A call that other work waits for
(a conversation's memory build, which every question of the conversation needs) asks for a
lower `ChatRequest.priority` and passes the questions' own calls that arrived before it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tmem_core import check_range


class PrioritySlots:
    """At most `size` holders at once; waiters enter lowest `priority` first, ties in arrival
    order. For one event loop (as `asyncio.Semaphore`)."""

    def __init__(self, size: int) -> None:
        check_range("slots", size)
        self._free = size
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @asynccontextmanager
    async def slot(self, priority: int = 0) -> AsyncIterator[None]:
        await self._acquire(priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (priority, next(self._order), future)
        heapq.heappush(self._waiting, entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # handed a slot as it was cancelled: pass it on
            else:  # gone from the queue, so that it never holds back an arrival
                self._waiting.remove(entry)
                heapq.heapify(self._waiting)
            raise

    def _release(self) -> None:
        while self._waiting:
            _, _, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)  # the slot goes straight to the next waiter
                return
        self._free += 1
