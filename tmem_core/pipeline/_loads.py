"""Calls in flight per engine replica as every router of a backbone sees them.

Each stage actor routes its own calls; to keep loads bounded across all of them, every router
publishes its own in-flight counts to one board per backbone (a Ray actor found by name) and
reads the others' sums from it, refreshed in the background at most every `REFRESH_S`: a
router's view is its own counts, exact, plus the others', at most that stale.
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
    """The backbone's board on the Ray cluster, created by the first router that asks."""

    def __init__(self, name: str, replicas: int, router: str) -> None:
        self.router = router
        self._board: Any = ray.remote(LoadBoard).options(
            name=name, get_if_exists=True, num_cpus=0, max_restarts=-1).remote(replicas)
        self._seen = [0] * replicas
        self._pending: Any = None
        self._refreshed = 0.0
        self._lock = threading.Lock()

    def publish(self, counts: list[int]) -> None:
        self._board.report.remote(self.router, counts)  # not waited for

    def others(self) -> list[int]:
        with self._lock:
            if self._pending is not None:
                ready, _ = ray.wait([self._pending], timeout=0)
                if ready:
                    # a board that restarted has lost the counts: they come back as routers
                    # publish again, and the last view is kept meanwhile
                    with contextlib.suppress(ray.exceptions.RayError):
                        self._seen = ray.get(ready[0])
                    self._pending = None
            if self._pending is None and time.monotonic() - self._refreshed >= REFRESH_S:
                self._pending = self._board.others.remote(self.router)
                self._refreshed = time.monotonic()
            return list(self._seen)
