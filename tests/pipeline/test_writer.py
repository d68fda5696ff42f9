"""A stage actor's calls write their records in groups: the calls that end while a group is
being written share the next group's part per store, each call returning only once its own
records are on disk, calls first; a call that meets no other writes at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tmem_core.pipeline._probe import Probe
from tmem_core.pipeline._writer import Batch, RecordWriter
from tmem_core.results._store import StageStore, stage_schema

SCHEMA = stage_schema(pa.field("value", pa.int64()))


def _row(qid: str) -> dict[str, Any]:
    return {"run_id": "r", "key": qid, "qid": qid, "conv_id": "c", "ok": True, "value": 1}


class Watching(Probe):
    """Notes, when a batch's calls are written, whether any record part exists yet."""

    def __init__(self, records: StageStore) -> None:
        self.records = records
        self.records_before_calls: list[int] = []

    def calls_written(self, reached: list[tuple[str, str]]) -> None:
        self.records_before_calls.append(len(self.records.parts()))


class SlowStore(StageStore):
    """A store whose writes take a while (a busy disk), so that calls pile up behind one."""

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        time.sleep(0.3)
        super().append(rows)


def test_calls_ending_while_a_group_is_written_share_the_next_part(tmp_path: Path) -> None:
    writer = RecordWriter()
    calls, answers = SlowStore(tmp_path, "calls", SCHEMA), SlowStore(tmp_path, "answer", SCHEMA)
    probe = Watching(answers)
    seen: dict[str, bool] = {}

    def call(index: int) -> None:
        qid = f"q{index}"
        writer.write(Batch(calls, [_row(f"{qid}-call")], [("answer", qid)],
                           [(answers, [_row(qid)])], probe))
        seen[qid] = qid in answers.read_all().column("qid").to_pylist()

    first = threading.Thread(target=call, args=(0,))
    first.start()
    time.sleep(0.1)  # the first call's group is being written: the others pile up behind it
    threads = [threading.Thread(target=call, args=(i,)) for i in range(1, 12)]
    for thread in threads:
        thread.start()
    for thread in [first, *threads]:
        thread.join()
    assert seen == {f"q{i}": True for i in range(12)}  # each returned with its record on disk
    assert len(answers.parts()) == len(calls.parts()) == 2  # the first call's, then the rest
    assert answers.read_all().num_rows == 12 and calls.read_all().num_rows == 12
    assert probe.records_before_calls == [0] + [1] * 11  # each group: its calls, then records


def test_a_lone_call_writes_at_once(tmp_path: Path) -> None:
    answers = StageStore(tmp_path, "answer", SCHEMA)
    started = time.perf_counter()
    RecordWriter().write(Batch(StageStore(tmp_path, "calls", SCHEMA), [], [("answer", "q")],
                               [(answers, [_row("q")])], Probe()))
    assert answers.read_all().num_rows == 1 and time.perf_counter() - started < 0.5


def test_every_call_of_a_group_that_could_not_be_written_raises(tmp_path: Path) -> None:
    writer = RecordWriter()
    (tmp_path / "answer").write_text("a file where the store's folder should be")
    answers = StageStore(tmp_path, "answer", SCHEMA)
    calls = SlowStore(tmp_path, "calls", SCHEMA)
    failed: list[str] = []

    def call(index: int) -> None:
        try:
            writer.write(Batch(calls, [_row(f"q{index}-call")], [("answer", f"q{index}")],
                               [(answers, [_row(f"q{index}")])], Probe()))
        except OSError as exc:
            failed.append(type(exc).__name__)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    assert len(failed) == 3
    with pytest.raises(OSError):
        answers.append([_row("again")])
