"""One actor serving every run of a sweep: rows are routed to their run's stage instance."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from tmem_core.pipeline._actors import FLOW_SCHEMA, KEEP_RUNS, PerRun


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


def test_rows_reach_their_runs_instance_built_once() -> None:
    Tagging.built = []
    jobs: dict[str, Any] = {f"r{i}": f"r{i}" for i in range(KEEP_RUNS + 1)}
    stage = PerRun(Tagging, jobs)  # type: ignore[arg-type]
    assert Tagging.built == ["r0"]  # the first run warms up with the actor
    out = stage(_batch(("r0", "a"), ("r0", "b"), ("r1", "c")))
    assert out.column("prediction").to_pylist() == ["r0:a", "r0:b", "r1:c"]
    stage(_batch(("r1", "d")))
    assert Tagging.built == ["r0", "r1"]  # each run's stages are built once
    for run in list(jobs)[2:]:
        stage(_batch((run, "x")))
    assert Tagging.built == list(jobs)
    stage(_batch(("r0", "late")))  # evicted (least recently used), so built again
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
        stage(_batch((run, "x")))
    gc.collect()
    assert Loading.loaded[0]() is None  # not kept frozen once its run was dropped
    assert all(ref() is not None for ref in Loading.loaded[1:])
