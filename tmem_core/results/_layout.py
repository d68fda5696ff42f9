"""Where a sweep's results live and what each store holds.

    results/<sweep>/sweep.json                 the grid and its runs
    results/<sweep>/data/<benchmark>/          the prepared benchmark the runs read
    results/<sweep>/<run_id>/contract.json     the run's resolved config, hashes, validators
    results/<sweep>/<run_id>/<store>/part-*.parquet
                                               append-only records (`StageStore`), one store
                                               per stage and one for every LLM call

results/README.md documents every column.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tmem_core.llm._accounting import CALLS_SCHEMA
from tmem_core.results._store import RECORD_COLUMNS, StageStore, stage_schema

SWEEP_FILE = "sweep.json"
CONTRACT_FILE = "contract.json"
CALLS = "calls"
CALIBRATION = "calibration"  # each judge's verdicts on control answers (see _calibration)
CALIBRATION_STAGE = "calibration"  # `calls.stage` of those verdicts: not the method's cost
MEMORY_QUALITY = "memory_quality"  # the judge's scores of each question's memory
MEMORY_QUALITY_STAGE = "memory_quality"  # `calls.stage` of those scores: a judge's, unguarded
MEMORY_QUALITY_DIMENSIONS = ("temporal_accuracy", "entity_coverage", "completeness",
                             "factual_correctness", "detail_preservation")
"""T2Mem paper §5.3's dimensions (the rubric and its 1-5 scale are the project's)."""
MEMORY_STAGE = "memory"  # `calls.stage` of a conversation's offline memory (T2Mem extraction)
_MEMORY_PREFIX = "memory:"


def memory_qid(conv_id: str) -> str:
    """The `qid` of a conversation's memory calls: they belong to the run, not a question."""
    return f"{_MEMORY_PREFIX}{conv_id}"


def conversation_of(qid: str) -> str:
    return qid.removeprefix(_MEMORY_PREFIX)

# `trace`: method detail as records kept it before the typed construct record (`payload`);
# written null since, read only for the evidence basis of those earlier records.
STAGE_SCHEMAS: dict[str, pa.Schema] = {
    "retrieve": stage_schema(
        pa.field("evidence_ids", pa.list_(pa.string())), pa.field("trace", pa.string()),
        pa.field("latency_s", pa.float64()), pa.field("payload", pa.string())),
    "construct": stage_schema(
        pa.field("kind", pa.string()), pa.field("context", pa.string()),
        pa.field("context_ids", pa.list_(pa.string())), pa.field("tokens", pa.int64()),
        pa.field("trace", pa.string()), pa.field("latency_s", pa.float64()),
        pa.field("degradation", pa.string()), pa.field("payload", pa.string()),
        pa.field("steps", pa.string()), pa.field("selected_ids", pa.list_(pa.string()))),
    "answer": stage_schema(
        pa.field("prompt_name", pa.string()), pa.field("prompt_sha256", pa.string()),
        pa.field("prompt", pa.string()), pa.field("prediction", pa.string()),
        pa.field("latency_s", pa.float64())),
    "judge": stage_schema(
        pa.field("judge", pa.string()), pa.field("repeat", pa.int64()),
        pa.field("category", pa.string()), pa.field("answer_kind", pa.string()),
        pa.field("scored_by", pa.string()), pa.field("score", pa.float64()),
        pa.field("f1", pa.float64()), pa.field("exact_match", pa.bool_()),
        pa.field("raw", pa.string()), pa.field("prompt_name", pa.string()),
        pa.field("prompt_sha256", pa.string())),
}
RECORD_STAGES = tuple(STAGE_SCHEMAS)  # retrieve, construct, answer, judge: in flow order
CALIBRATION_SCHEMA = stage_schema(
    pa.field("judge", pa.string()), pa.field("control", pa.string()),
    pa.field("other_qid", pa.string()), pa.field("category", pa.string()),
    pa.field("expected", pa.float64()), pa.field("score", pa.float64()),
    pa.field("raw", pa.string()), pa.field("prompt_name", pa.string()),
    pa.field("prompt_sha256", pa.string()), pa.field("prediction", pa.string()),
    pa.field("scored_by", pa.string()),  # "llm", or the rule that scored it ("rule", "choice")
    pa.field("control_sha256", pa.string()))  # of the control and its builder's version
MEMORY_QUALITY_SCHEMA = stage_schema(
    pa.field("judge", pa.string()), pa.field("method", pa.string()),
    *(pa.field(d, pa.float64()) for d in MEMORY_QUALITY_DIMENSIONS),
    pa.field("mean", pa.float64()), pa.field("evidence", pa.int64()),
    pa.field("raw", pa.string()), pa.field("prompt_name", pa.string()),
    pa.field("prompt_sha256", pa.string()))
CALLS_STORE_SCHEMA = pa.schema([*RECORD_COLUMNS, *[
    f for f in CALLS_SCHEMA if f.name not in {c.name for c in RECORD_COLUMNS}],
    pa.field("deps", pa.string())])  # the dependencies of the stage record it belongs to
STORES = (*RECORD_STAGES, CALIBRATION, MEMORY_QUALITY, CALLS)


def stage_store(run_dir: Path, stage: str) -> StageStore:
    """A run's records of one stage (`retrieve`, `construct`, `answer`, `judge`)."""
    return StageStore(run_dir, stage, STAGE_SCHEMAS[stage])


def calibration_store(run_dir: Path) -> StageStore:
    """A run's judge verdicts on control answers (gold as prediction, another's gold)."""
    return StageStore(run_dir, CALIBRATION, CALIBRATION_SCHEMA)


def memory_quality_store(run_dir: Path) -> StageStore:
    """A run's memory-quality scores, one record per question and judge."""
    return StageStore(run_dir, MEMORY_QUALITY, MEMORY_QUALITY_SCHEMA)


def calls_store(run_dir: Path) -> StageStore:
    """A run's LLM calls, one record per call (`CallRecord` columns)."""
    return StageStore(run_dir, CALLS, CALLS_STORE_SCHEMA)


def run_stores(run_dir: Path) -> list[StageStore]:
    """Every store of a run."""
    return [*(stage_store(run_dir, s) for s in RECORD_STAGES), calibration_store(run_dir),
            memory_quality_store(run_dir), calls_store(run_dir)]


def merge_run_levels(run_dir: Path) -> None:
    """`StageStore.merge_levels` for each store of a running run: its parts stay few."""
    for store in run_stores(run_dir):
        store.merge_levels()


def compact_run(run_dir: Path) -> None:
    """Merge each store's parts of a run into one (`StageStore.compact`): a done run's
    records, written a call at a time as its questions streamed, in one part per store."""
    for store in run_stores(run_dir):
        store.compact()


def calls_window(calls: Iterable[Mapping[str, Any]]) -> float:
    """Seconds from the first of `calls` (call records) sent to the last answered."""
    ends = [(float(c["finished_at"]), float(c["latency_s"])) for c in calls]
    return max(end for end, _ in ends) - min(end - latency for end, latency in ends)


def write_atomic(path: Path, text: str) -> None:
    """Write `path` through a temporary beside it and a rename: never half-written."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


TEMPORARIES = (".*.tmp", "*/.*.tmp", "*/*/.*.tmp", "data/.*")
"""Where interrupted writes leave temporaries: the sweep file and lease, contracts, record
parts (`.<name>.tmp` beside their final name) and prepared benchmarks (`data/.<folder>.*`)."""


def remove_leftovers(sweep_dir: Path, before: float) -> list[Path]:
    """Remove the temporaries of writes interrupted before `before` (Unix seconds): only the
    folder's lease holder may call this, with the time it took the lease."""
    removed = []
    for pattern in TEMPORARIES:
        for path in sweep_dir.glob(pattern):
            try:
                if path.lstat().st_mtime >= before:
                    continue
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except FileNotFoundError:
                continue
            removed.append(path)
    return removed


def run_dirs(sweep_dir: Path) -> list[Path]:
    """The run folders of a sweep: those with a contract."""
    return sorted(p.parent for p in sweep_dir.glob(f"*/{CONTRACT_FILE}"))
