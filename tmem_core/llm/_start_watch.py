"""A watch on an engine's start: a start that stops making progress (no CPU time spent and
no bytes read by the starting process and its children for `stall_s`) is ended, so that it
counts as a failed attempt; a slow start that progresses (weights read from a shared volume,
a cold `torch.compile`) is never ended by it."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import psutil

Progress = Callable[[], float]


def process_tree_progress() -> float:
    """CPU seconds spent plus megabytes read so far by this process and its descendants
    (grows while weights load or kernels compile)."""
    total = 0.0
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            cpu = process.cpu_times()
            total += cpu.user + cpu.system + cpu.children_user + cpu.children_system
            with contextlib.suppress(AttributeError, psutil.Error):
                total += process.io_counters().read_bytes / 1e6
    return total


def kill_children() -> None:
    """End this process's descendants (an engine core and its shard workers)."""
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()


class StallWatch:
    """Calls `on_stall` once when `progress()` has not grown for `stall_s` seconds, checked
    every `poll_s` while the `with` block runs; `stalled` says whether it did."""

    def __init__(self, stall_s: float, on_stall: Callable[[], None] = kill_children,
                 progress: Progress = process_tree_progress, poll_s: float = 5.0) -> None:
        self.stall_s, self.poll_s = stall_s, poll_s
        self._on_stall, self._progress = on_stall, progress
        self._done = threading.Event()
        self.stalled = False

    @contextlib.contextmanager
    def watching(self) -> Iterator[StallWatch]:
        thread = threading.Thread(target=self._watch, name="engine-start-watch", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._done.set()
            thread.join()

    def _watch(self) -> None:
        last, since = self._progress(), time.monotonic()
        while not self._done.wait(self.poll_s):
            now = self._progress()
            if now > last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= self.stall_s:
                self.stalled = True
                self._on_stall()
                return
