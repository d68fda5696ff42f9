"""Gating work runs first: other threads pause at their next LLM call, never for long."""

from __future__ import annotations

import threading
import time

import pytest

from tmem_core.llm import _gating
from tmem_core.llm._gating import defer_to_gating, gating_threads, gating_wait, gating_work


def _deferred_for(start: threading.Event) -> list[float]:
    """Seconds another thread's `defer_to_gating` waited, once `start` is set."""
    waited: list[float] = []

    def other() -> None:
        start.wait()
        began = time.perf_counter()
        defer_to_gating()
        waited.append(time.perf_counter() - began)

    threading.Thread(target=other).start()
    return waited


def test_other_threads_wait_until_the_gating_work_ends() -> None:
    start = threading.Event()
    waited = _deferred_for(start)
    with gating_work():
        start.set()
        time.sleep(0.3)
        assert not waited  # still paused
    deadline = time.monotonic() + 5
    while not waited and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 0.2 < waited[0] < _gating.MAX_DEFER_S
    assert gating_threads() == 0


def test_the_gating_threads_own_waits_let_the_others_run() -> None:
    start = threading.Event()
    with gating_work():
        with gating_wait():  # e.g. its LLM calls
            assert gating_threads() == 0
            waited = _deferred_for(start)
            start.set()
            time.sleep(0.2)
            assert waited and waited[0] < 0.1
        assert gating_threads() == 1
        defer_to_gating()  # the gating thread itself never waits
        with gating_work():  # nested: still one thread
            assert gating_threads() == 1
    assert gating_threads() == 0


def test_a_pause_is_bounded_so_it_cannot_deadlock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_gating, "MAX_DEFER_S", 0.2)
    start = threading.Event()
    waited = _deferred_for(start)
    with gating_work():
        start.set()
        time.sleep(1.0)  # as if it waited for the paused thread
        assert waited and 0.15 < waited[0] < 0.9


def test_a_wait_outside_gating_work_changes_nothing() -> None:
    with gating_wait():
        assert gating_threads() == 0
    assert gating_threads() == 0


def test_an_error_in_gating_work_releases_the_others() -> None:
    with pytest.raises(RuntimeError), gating_work():
        raise RuntimeError("build failed")
    assert gating_threads() == 0
