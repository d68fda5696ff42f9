"""CPU work that other work waits for runs first within a process.

A stage actor holds hundreds of questions, each a thread, and Python runs one thread at a
time: a conversation's memory build (parsing its extraction, indexing its entries), which
every question of the conversation waits for, would get a small share of the process beside
the questions of other conversations. While a thread does `gating_work`, the others pause
at their next LLM call (`defer_to_gating`, at most `MAX_DEFER_S` each time, so a pause can
never deadlock); a gating thread's own waits (`gating_wait`: its LLM calls, a lock held by
another process) let the others run meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

MAX_DEFER_S = 2.0
"""The longest a thread waits for gating work at one LLM call."""

_state = threading.Condition()
_running = 0  # threads in gating work, not in one of its waits
_thread = threading.local()


@contextmanager
def gating_work() -> Iterator[None]:
    """This thread's work, which others wait for, runs first (nested: the outermost counts)."""
    depth = getattr(_thread, "depth", 0)
    _thread.depth = depth + 1
    if depth == 0:
        _change(+1)
    try:
        yield
    finally:
        _thread.depth = depth
        if depth == 0:
            _change(-1)


@contextmanager
def gating_wait() -> Iterator[None]:
    """A wait inside gating work (the others run meanwhile); nothing outside it."""
    gating = getattr(_thread, "depth", 0) > 0 and not getattr(_thread, "waiting", False)
    if not gating:
        yield
        return
    _thread.waiting = True
    _change(-1)
    try:
        yield
    finally:
        _change(+1)
        _thread.waiting = False


def defer_to_gating() -> None:
    """Wait while another thread of the process does gating work (a gating thread never)."""
    if _running == 0 or getattr(_thread, "depth", 0) > 0:
        return
    with _state:
        _state.wait_for(lambda: _running == 0, timeout=MAX_DEFER_S)


def gating_threads() -> int:
    """Threads of this process in gating work now (not in one of its waits)."""
    return _running


def _change(by: int) -> None:
    global _running
    with _state:
        _running += by
        if _running == 0:
            _state.notify_all()
