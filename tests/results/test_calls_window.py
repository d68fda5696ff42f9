"""The window of a set of LLM calls: from the first sent to the last answered."""

from __future__ import annotations

import pytest

from tmem_core.results import calls_window


def test_the_window_runs_from_the_first_call_sent_to_the_last_answered() -> None:
    calls = [{"finished_at": 110.0, "latency_s": 4.0},   # sent at 106
             {"finished_at": 105.0, "latency_s": 5.0},   # sent at 100, answered first
             {"finished_at": 130.0, "latency_s": 1.0}]   # answered last
    assert calls_window(calls) == pytest.approx(30.0)
    assert calls_window(iter(calls[:1])) == pytest.approx(4.0)
