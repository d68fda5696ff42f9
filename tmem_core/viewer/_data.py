"""Everything the viewer reads of a sweep, in one place: the report's tables and figures, the
prepared benchmark, and one question's full records (large columns included).

The rest of the viewer reads results only through this module.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tmem_core import DataError
from tmem_core.benchmarks import read_prepared
from tmem_core.reports import FIGURES, REPORT_DIR, Summary, summarise
from tmem_core.results import RECORD_STAGES, calls_store, memory_qid, stage_store
from tmem_core.results._current import QuestionData, expected_deps, question_data
from tmem_core.results._layout import CALIBRATION, CALLS, CONTRACT_FILE, calibration_store
from tmem_core.results._store import StageStore, in_force, read_parts, report_unreadable
from tmem_core.results._sweep import SweepResults, read_sweep
from tmem_core.schema import Message, Question, messages_from_table, questions_from_table

Record = dict[str, Any]


@dataclass(frozen=True)
class SweepData:
    """A sweep as the report sees it, plus where each run's records lie."""

    results: SweepResults
    summary: Summary
    run_dirs: Mapping[str, Path]
    figures: Mapping[str, Path]  # report figures present on disk, by name


@dataclass(frozen=True)
class QuestionRecords:
    """One question's successful record in force per key in every store (`in_force`, the
    rule the report counts by), its failures, and its stale records."""

    latest: Mapping[str, list[Record]]  # store -> records (retrieve, ..., judge, calls)
    failed: list[Record]  # failed attempts of every store, oldest first, with `store`
    stale: list[Record]  # per key with no record in force, its newest one, with `store`


class Benchmark:
    """A prepared benchmark's questions and messages by id, each converted when first used."""

    def __init__(self, data_dir: Path) -> None:
        self._prepared = read_prepared(data_dir)

    @cached_property
    def questions(self) -> dict[str, Question]:
        return {q.qid: q for q in questions_from_table(self._prepared.questions)}

    @cached_property
    def messages(self) -> dict[str, Message]:
        return {m.msg_id: m for m in messages_from_table(self._prepared.messages)}

    @cached_property
    def data(self) -> dict[str, QuestionData]:
        """Per question, the hashes of its data (which records are in force depends on)."""
        return question_data(self._prepared.messages, self._prepared.questions)


def load_sweep(root: Path, report: Path | None = None) -> SweepData:
    """The sweep folder `root` (a run still going: what it has written so far), with the
    figures in `report` (default: the sweep's report folder)."""
    if not root.is_dir():
        raise DataError("no such sweep folder", file=str(root))
    try:
        results = read_sweep(root)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"unreadable results: {exc}", file=str(root)) from exc
    report = report or root / REPORT_DIR
    figures = {n: report / f"{n}.png" for n in FIGURES if (report / f"{n}.png").exists()}
    return SweepData(results, summarise(results), _run_dirs(root), figures)


def _run_dirs(root: Path) -> dict[str, Path]:
    contracts = sorted(root.glob(f"*/{CONTRACT_FILE}"))
    return {json.loads(p.read_text())["run_id"]: p.parent for p in contracts}


def fingerprint(root: Path) -> tuple[tuple[str, int], ...]:
    """Changes whenever a run writes: contracts are rewritten, record parts only added."""
    paths = [*root.glob(f"*/{CONTRACT_FILE}"), *root.glob("*/*/part-*.parquet"),
             *root.glob(f"{REPORT_DIR}/*.png")]
    return tuple(sorted((str(p), p.stat().st_mtime_ns) for p in paths))


def question_records(run_dir: Path, qids: Collection[str], data: Mapping[str, QuestionData],
                     conversations: Mapping[str, str] | None = None
                     ) -> dict[str, QuestionRecords]:
    """Every store's records of the questions `qids` (large columns included), read only
    from the parts that hold them, in force as the run's contract and its prepared `data`
    say (`in_force`); with `conversations` (qid -> conv_id), each question's calls include
    the run's memory calls of its conversation."""
    owners = {q: memory_qid(c) for q, c in (conversations or {}).items()}
    found = _question_records(run_dir, [*qids, *set(owners.values())], data)
    for qid in qids:
        memory = found.get(owners.get(qid, ""))
        if memory is not None:
            found[qid].latest[CALLS][:0] = memory.latest[CALLS]
    return {q: found[q] for q in qids}


def _question_records(run_dir: Path, qids: Collection[str], data: Mapping[str, QuestionData]
                      ) -> dict[str, QuestionRecords]:
    deps = json.loads((run_dir / CONTRACT_FILE).read_text()).get("deps")
    stores = {**{s: stage_store(run_dir, s) for s in RECORD_STAGES},
              CALIBRATION: calibration_store(run_dir), CALLS: calls_store(run_dir)}
    latest: dict[str, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    failed: dict[str, list[Record]] = defaultdict(list)
    stale: dict[str, list[Record]] = defaultdict(list)
    for name, store in stores.items():
        history = _read(store, qids)
        forced = in_force(history, None if name == CALLS else expected_deps(deps, name, data))
        for row in forced.done.sort_by("written_at").to_pylist():
            latest[row["qid"]][name].append(row)
        for row in history.filter(pc.invert(history.column("ok"))).to_pylist():
            failed[row["qid"]].append({**row, "store": name})
        for row in forced.stale.to_pylist():
            stale[row["qid"]].append({**row, "store": name})
    return {q: QuestionRecords({s: latest[q][s] for s in stores},
                               sorted(failed[q], key=lambda r: r["written_at"]),
                               sorted(stale[q], key=lambda r: r["written_at"])) for q in qids}


def _read(store: StageStore, qids: Collection[str]) -> pa.Table:
    wanted = set(qids)
    holding = [p for p in store.parts() if _part_qids(p) & wanted]
    return read_parts(holding, store.schema, pc.field("qid").isin(pa.array(wanted, pa.string())))


@cache
def _part_qids(part: Path) -> frozenset[str]:
    """The questions a record part holds: parts are never rewritten, so read once (none for
    a damaged part, which is reported and skipped)."""
    try:
        return frozenset(pq.read_table(part, columns=["qid"]).column("qid").to_pylist())
    except (OSError, pa.ArrowException) as exc:
        report_unreadable(part, exc)
        return frozenset()


@cache
def benchmark(data_dir: Path) -> Benchmark:
    """The prepared benchmark a run read (read once per process: it never changes)."""
    return Benchmark(data_dir)
