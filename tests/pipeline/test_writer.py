"""A stage actor's calls write their records in groups: one part per store for the calls that
end together, each call returning only once its own records are on disk, calls first."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tmem_core.pipeline._probe import Probe
from tmem_core.pipeline._writer import Batch, RecordWriter
from tmem_core.results import StageStore
from tmem_core.results._store import stage_schema

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


def test_calls_ending_together_share_a_part_and_return_with_their_records_on_disk(
        tmp_path: Path) -> None:
    writer = RecordWriter(window_s=0.3)
    calls, answers = StageStore(tmp_path, "calls", SCHEMA), StageStore(tmp_path, "answer", SCHEMA)
    probe = Watching(answers)
    seen: dict[str, bool] = {}
    start = threading.Barrier(12)

    def call(index: int) -> None:
        qid = f"q{index}"
        with writer.working():
            start.wait()
            writer.write(Batch(calls, [_row(f"{qid}-call")], [("answer", qid)],
                               [(answers, [_row(qid)])], probe))
            seen[qid] = qid in answers.read_all().column("qid").to_pylist()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {f"q{i}": True for i in range(12)}  # each returned with its record on disk
    assert len(answers.parts()) < 12 and len(calls.parts()) == len(answers.parts())
    assert answers.read_all().num_rows == 12 and calls.read_all().num_rows == 12
    assert probe.records_before_calls[0] == 0  # a group's calls land before its records


def test_a_lone_call_writes_at_once(tmp_path: Path) -> None:
    writer = RecordWriter(window_s=30.0)  # would time the test out if it waited
    answers = StageStore(tmp_path, "answer", SCHEMA)
    with writer.working():
        writer.write(Batch(StageStore(tmp_path, "calls", SCHEMA), [], [("answer", "q")],
                           [(answers, [_row("q")])], Probe()))
    assert answers.read_all().num_rows == 1


def test_every_call_of_a_group_that_could_not_be_written_raises(tmp_path: Path) -> None:
    writer = RecordWriter(window_s=0.2)
    (tmp_path / "answer").write_text("a file where the store's folder should be")
    answers = StageStore(tmp_path, "answer", SCHEMA)
    failed: list[str] = []
    start = threading.Barrier(3)

    def call(index: int) -> None:
        with writer.working():
            start.wait()
            try:
                writer.write(Batch(StageStore(tmp_path, "calls", SCHEMA), [],
                                   [("answer", f"q{index}")], [(answers, [_row(f"q{index}")])],
                                   Probe()))
            except OSError as exc:
                failed.append(type(exc).__name__)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(failed) == 3
    with pytest.raises(OSError):
        answers.append([_row("again")])
