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

from tmem_core.benchmarks import read_prepared
from tmem_core.reports import FIGURES, REPORT_DIR, Summary, summarise
from tmem_core.results import (
    CALIBRATION,
    CALLS,
    CONTRACT_FILE,
    RECORD_STAGES,
    StageStore,
    SweepResults,
    calibration_store,
    calls_store,
    latest_of,
    memory_qid,
    read_parts,
    read_sweep,
    report_unreadable,
    stage_store,
)
from tmem_core.schema import DataError, Message, Question, messages_from_table, questions_from_table

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
    """One question's latest successful record per key in every store, and its failures."""

    latest: Mapping[str, list[Record]]  # store -> records (retrieve, ..., judge, calls)
    failed: list[Record]  # failed attempts of every store, oldest first, with `store`


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


def question_records(run_dir: Path, qids: Collection[str],
                     conversations: Mapping[str, str] | None = None
                     ) -> dict[str, QuestionRecords]:
    """Every store's records of the questions `qids` (large columns included), read only
    from the parts that hold them; with `conversations` (qid -> conv_id), each question's
    calls include the run's memory calls of its conversation."""
    owners = {q: memory_qid(c) for q, c in (conversations or {}).items()}
    found = _question_records(run_dir, [*qids, *set(owners.values())])
    for qid in qids:
        memory = found.get(owners.get(qid, ""))
        if memory is not None:
            found[qid].latest[CALLS][:0] = memory.latest[CALLS]
    return {q: found[q] for q in qids}


def _question_records(run_dir: Path, qids: Collection[str]) -> dict[str, QuestionRecords]:
    stores = {**{s: stage_store(run_dir, s) for s in RECORD_STAGES},
              CALIBRATION: calibration_store(run_dir), CALLS: calls_store(run_dir)}
    latest: dict[str, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    failed: dict[str, list[Record]] = defaultdict(list)
    for name, store in stores.items():
        history = _read(store, qids)
        for row in latest_of(history).sort_by("written_at").to_pylist():
            latest[row["qid"]][name].append(row)
        for row in history.filter(pc.invert(history.column("ok"))).to_pylist():
            failed[row["qid"]].append({**row, "store": name})
    return {q: QuestionRecords({s: latest[q][s] for s in stores},
                               sorted(failed[q], key=lambda r: r["written_at"])) for q in qids}


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
