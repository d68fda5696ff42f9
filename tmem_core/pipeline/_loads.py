"""Calls in flight per engine replica as every router of a backbone sees them.

Each stage actor routes its own calls; to keep loads bounded across all of them, every router
sends its own in-flight counts to one board per backbone (a Ray actor found by name) and
reads the others' sums back in the same call, in the background and at most every
`REFRESH_S` (a router that just went idle says so at once): a router's view is its own
counts, exact, plus the others', at most about twice that stale. One exchange per router and
`REFRESH_S`, not a message per call: with a message per call sent and answered, a 16-replica
sweep sent the board ~400 a second.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Protocol

import ray

REFRESH_S = 0.2


class LoadBoard:
    """In-flight counts per replica of every router (a Ray actor in a sweep)."""

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self._counts: dict[str, list[int]] = {}

    def report(self, router: str, counts: list[int]) -> None:
        self._counts[router] = list(counts)

    def exchange(self, router: str, counts: list[int]) -> list[int]:
        """`report`, then `others`: one round trip."""
        self.report(router, counts)
        return self.others(router)

    def others(self, router: str) -> list[int]:
        """Summed counts per replica of every router but `router`."""
        total = [0] * self.replicas
        for name, counts in self._counts.items():
            if name != router:
                total = [a + b for a, b in zip(total, counts, strict=True)]
        return total


class Loads(Protocol):
    """What a router needs of the shared view."""

    def publish(self, counts: list[int]) -> None: ...

    def others(self) -> list[int]: ...


class LocalLoads:
    """A board in this process (tests, several routers in one process)."""

    def __init__(self, board: LoadBoard, router: str) -> None:
        self.board, self.router = board, router

    def publish(self, counts: list[int]) -> None:
        self.board.report(self.router, counts)

    def others(self) -> list[int]:
        return self.board.others(self.router)


class SharedLoads:
    """The backbone's board on the Ray cluster, created by the first router that asks.

    The router's counts go to the board with the exchange that reads the others' back: when
    the router asks for them and one is due, and from a thread of its own at most
    `REFRESH_S` after its counts last changed, so a router waiting on long calls is not
    shown with counts it no longer has."""

    def __init__(self, name: str, replicas: int, router: str) -> None:
        self.router = router
        self._board: Any = ray.remote(LoadBoard).options(
            name=name, get_if_exists=True, num_cpus=0, max_restarts=-1).remote(replicas)
        self._mine = [0] * replicas
        self._sent: list[int] | None = None  # the counts of the last exchange
        self._seen = [0] * replicas
        self._pending: Any = None
        self._refreshed = 0.0
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._sender: threading.Thread | None = None

    def publish(self, counts: list[int]) -> None:
        with self._lock:
            self._mine = list(counts)
            if not any(counts):  # idle: the others must not wait a refresh to know it
                self._board.report.remote(self.router, self._mine)  # not waited for
                self._sent = self._mine
            self._refresh()
            if self._sender is None:
                self._sender = threading.Thread(target=self._send_changes, daemon=True,
                                                name=f"loads-{self.router[:8]}")
                self._sender.start()
        self._changed.set()

    def others(self) -> list[int]:
        with self._lock:
            self._refresh()
            return list(self._seen)

    def _refresh(self) -> None:
        """Collect the exchange under way if it came back; start the next when one is due."""
        if self._pending is not None:
            ready, _ = ray.wait([self._pending], timeout=0)
            if ready:
                # a board that restarted has lost the counts: they come back as routers
                # exchange again, and the last view is kept meanwhile
                with contextlib.suppress(ray.exceptions.RayError):
                    self._seen = ray.get(ready[0])
                self._pending = None
        if self._pending is None and time.monotonic() - self._refreshed >= REFRESH_S:
            self._pending = self._board.exchange.remote(self.router, self._mine)
            self._sent = self._mine
            self._refreshed = time.monotonic()

    def _send_changes(self) -> None:
        """Until the process ends: counts changed and not sent go out within `REFRESH_S`."""
        while True:
            self._changed.wait()
            time.sleep(REFRESH_S)
            self._changed.clear()
            with self._lock:
                self._refresh()
                if self._sent != self._mine:
                    self._changed.set()  # an exchange was under way: send them next time
