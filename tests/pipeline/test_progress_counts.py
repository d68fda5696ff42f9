"""The driver counts each question out of the last stage once: a call retried after its
actor died yields its questions again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from tmem_core.pipeline._actors import FLOW_SCHEMA
from tmem_core.pipeline._config import Resources
from tmem_core.pipeline._execute import block_size
from tmem_core.pipeline._progress import Progress


def _out(*qids: str, error: str | None = None) -> pa.Table:
    return pa.Table.from_pylist([{"run_id": "r0", "qid": q, "conv_id": "c", "ok": error is None,
                                  "error": error} for q in qids], schema=FLOW_SCHEMA)


def test_a_question_out_twice_counts_once_with_its_failure() -> None:
    run: Any = SimpleNamespace(run_id="r0", questions=(("q1", "c"), ("q2", "c"), ("q3", "c")))
    lines: list[str] = []
    progress = Progress([run], lines.append, every_s=0.0)
    progress.add(run, _out("q1"))
    progress.add(run, _out("q2", error="answer: boom"))
    progress.add(run, _out("q1", "q2", error="answer: boom"))  # the retried call's
    assert (progress.done_of(run), progress.done, progress.failed["r0"]["answer"]) == (2, 2, 1)
    assert not progress.finished(run)
    progress.add(run, _out("q3"))
    assert progress.finished(run) and progress.landed()[0].done == 3
    assert lines[-1].startswith("[progress] r0: 3/3 questions")


def test_calls_hold_the_questions_in_flight_and_spread_over_the_actors() -> None:
    """Derived: at most 32 questions a call, at least 4 calls per actor while the sweep has
    the questions, never more than an actor's share of the questions in flight; a stated
    `batch_size` as it is."""
    default = Resources()
    assert block_size(default, 745, 4, 745) == 32
    assert block_size(default, 9, 1, 8) == 3  # the default sweep: 3 calls of 3
    assert block_size(default, 745, 1, 8) == 8  # an engine with 8 slots: 8 in flight
    assert block_size(default, 2, 4, 2) == 1
    assert block_size(Resources(batch_size=5), 745, 4, 745) == 5
