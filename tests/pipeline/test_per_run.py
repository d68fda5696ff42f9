"""One actor serving every run of a sweep: rows are routed to their run's stage instance."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from tmem_core.llm import RequestCache
from tmem_core.pipeline._actors import FLOW_SCHEMA, KEEP_RUNS, FusedStages, PerRun, pack, unpack
from tmem_core.pipeline._probe import Probe
from tmem_core.pipeline._stage import Output, StageResult
from tmem_core.results import calls_store
from tmem_core.results._store import StageStore, stage_schema


class Tagging:
    """A stand-in stage: records which run's instance saw which questions."""

    built: ClassVar[list[str]] = []

    def __init__(self, job: Any) -> None:
        self.run_id = job
        Tagging.built.append(job)

    def __call__(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert {r["run_id"] for r in rows} == {self.run_id}
        return [{**r, "prediction": f"{self.run_id}:{r['qid']}"} for r in rows]


def _batch(*pairs: tuple[str, str]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"run_id": run, "qid": qid, "conv_id": "c", "ok": True} for run, qid in pairs],
        schema=FLOW_SCHEMA)


def _through(stage: PerRun, batch: pa.Table) -> pa.Table:
    return pa.concat_tables(list(stage(batch)))


def test_rows_reach_their_runs_instance_built_once() -> None:
    Tagging.built = []
    jobs: dict[str, Any] = {f"r{i}": f"r{i}" for i in range(KEEP_RUNS + 1)}
    stage = PerRun(Tagging, jobs)  # type: ignore[arg-type]
    assert Tagging.built == ["r0"]  # the first run warms up with the actor
    out = _through(stage, _batch(("r0", "a"), ("r0", "b"), ("r1", "c")))
    assert out.column("prediction").to_pylist() == ["r0:a", "r0:b", "r1:c"]
    _through(stage, _batch(("r1", "d")))
    assert Tagging.built == ["r0", "r1"]  # each run's stages are built once
    for run in list(jobs)[2:]:
        _through(stage, _batch((run, "x")))
    assert Tagging.built == list(jobs)
    _through(stage, _batch(("r0", "late")))  # evicted (least recently used), so built again
    assert Tagging.built == [*jobs, "r0"]


class Node:
    def __init__(self) -> None:
        self.index: list[Any] = [{"n": n} for n in range(1000)]
        self.index.append(self)  # a cycle: only the collector frees it


class Loading:
    """A stand-in stage that loads a large structure, in a reference cycle, at construction."""

    loaded: ClassVar[list[weakref.ref[Node]]] = []

    def __init__(self, job: Any) -> None:
        self.node = Node()
        Loading.loaded.append(weakref.ref(self.node))

    def __call__(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return rows


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("unfrozen")
def test_what_a_run_loaded_is_frozen_and_collected_once_the_run_is_dropped() -> None:
    Loading.loaded = []
    jobs: dict[str, Any] = {f"r{i}": f"r{i}" for i in range(KEEP_RUNS + 1)}
    stage = PerRun(Loading, jobs)  # type: ignore[arg-type]
    assert gc.get_freeze_count() >= 1000  # no full collection traverses it
    gc.collect()
    assert Loading.loaded[0]() is not None
    for run in list(jobs)[1:]:  # the last one evicts the first run
        _through(stage, _batch((run, "x")))
    gc.collect()
    assert Loading.loaded[0]() is None  # not kept frozen once its run was dropped
    assert all(ref() is not None for ref in Loading.loaded[1:])


class Sleepy:
    """A stand-in stage: a question takes the seconds its qid names; its record is stored."""

    name = "answer"

    def __init__(self, run_dir: Path) -> None:
        self.job = SimpleNamespace(run_id="r0")
        self.probe = Probe()
        self.store = StageStore(run_dir, "answer", stage_schema())
        self.request_cache = RequestCache(run_dir / "requests.sqlite", write_behind=True)

    def deps_of(self, qid: str) -> str:
        return "{}"

    def step(self, row: dict[str, Any]) -> StageResult:
        time.sleep(float(row["qid"]))
        return StageResult({**row, "prediction": row["qid"]}, Output([
            {"run_id": "r0", "key": row["qid"], "qid": row["qid"], "conv_id": "c", "ok": True}]))

    def records(self, results: list[StageResult]) -> list[tuple[StageStore, list[Any]]]:
        return [(self.store, [r for result in results for r in result.output.records])]


class SleepyFused(FusedStages):
    def __init__(self, job: Any) -> None:  # the stand-in stage only
        self.stages = [Sleepy(job)]  # type: ignore[list-item]
        self.calls = calls_store(job)


def test_a_fused_call_yields_each_question_once_it_is_done_and_written(tmp_path: Path) -> None:
    """A call's questions run at once and come out as each is done, the fast before the
    slow is done, each with its record on disk: a call is no barrier."""
    stage = PerRun(SleepyFused, {"r0": tmp_path})  # type: ignore[dict-item]
    started = time.monotonic()
    seen = []
    for packed in stage(_batch(("r0", "1.5"), ("r0", "0.1"), ("r0", "0.8"))):
        assert packed.num_rows == 1  # a Ray Data block of its own
        table = unpack(packed)
        assert table.schema == FLOW_SCHEMA and table.num_rows == 1
        qid = table.column("qid")[0].as_py()
        stored = set(StageStore(tmp_path, "answer", stage_schema()).done_keys())
        seen.append((qid, round(time.monotonic() - started, 1), qid in stored))
    assert [qid for qid, _, _ in seen] == ["0.1", "0.8", "1.5"]
    assert all(written for _, _, written in seen)
    assert seen[0][1] < 0.8 and seen[1][1] < 1.5  # each out before the slower ones ended
    assert seen[2][1] < 1.5 + 1.0  # at once, not one after another


def test_questions_done_together_travel_as_one_row_and_unpack_as_they_were() -> None:
    """A packed row per yield (Ray Data would split a yielded block into a block per row);
    the driver gets the flow rows back unchanged, in order, across blocks."""
    first = _batch(("r0", "q1"), ("r1", "q2"), ("r0", "q3"))
    second = _batch(("r1", "q4"),)
    packed = [pack(first), pack(second)]
    assert [p.num_rows for p in packed] == [1, 1]
    rows = unpack(pa.concat_tables(packed))
    assert rows.schema == FLOW_SCHEMA
    assert rows.to_pylist() == [*first.to_pylist(), *second.to_pylist()]
