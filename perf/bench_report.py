"""What intervals, paired differences and failure attribution add to a sweep's report.

    python perf/bench_report.py [--questions 5000] [--runs 2] [--judge-repeats 1] [--repeats 5]

Builds bench_viewer.py's synthetic results tree (`--runs` runs of `--questions` questions,
one BM25-like, the others T-MEM-like; every pair of them differs in method only, so each
pair is compared) and times `write_report` (what `python -m jobs.report SWEEP` runs):
interleaved, `--repeats` times each, with every part and with a baseline in which each new
part is a stand-in that returns its columns empty (the evidence basis read from traces, the
interval columns of accuracy, F1, exact match and recall, the causes of the questions, the
attribution, P(correct | gold in context), the paired differences and their Markdown
sections). Prints the medians (wall clock and CPU time) and their ratios. With
`--judge-repeats` above 1 a question's score is a fraction, so every accuracy interval is a
two-stage bootstrap and every paired p-value a sign-flip test, instead of Wilson's intervals
and exact McNemar.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import polars as pl
import pyarrow as pa
from bench_viewer import build_tree

from tmem_core.reports import _markdown, _metrics, _summary, write_report
from tmem_core.reports._intervals import INTERVAL_SCHEMA
from tmem_core.reports._paired import PAIRED_SCHEMA
from tmem_core.results import SCOPE, _sweep, with_overall

_NEW_QUESTION_COLUMNS = {"unreliable_judge": pl.Boolean, "degraded": pl.Boolean,
                         "cause": pl.String}


def _no_intervals(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.lit(None, dtype).alias(name)
                              for name, dtype in INTERVAL_SCHEMA.items())


def _mean_by_category(questions: pl.DataFrame, column: str, exclude_separate: bool = True,
                      extra: Any = ()) -> pl.DataFrame:
    """The means per category as they were computed before intervals."""
    return _no_intervals(with_overall(questions.filter(pl.col(column).is_not_null()),
                                      exclude_separate)
                         .group_by("run_id", "category", "separate")
                         .agg(pl.len().alias("questions"), pl.col(column).mean(),
                              pl.lit(0).alias("untraceable"), pl.lit("shown").alias("basis")))


def _basis(construct: pa.Table) -> dict[str, pa.Array]:
    rows = construct.num_rows
    return {"evidence_basis": pa.array(["shown"] * rows, pa.string()),
            "linked_ids": pa.array([[]] * rows, pa.list_(pa.string()))}


@contextmanager
def baseline() -> Iterator[None]:
    """Every new part of the report replaced by a stand-in that returns its columns empty."""
    empty_scope = pl.DataFrame(schema={**{k: pl.String for k in SCOPE}, "separate": pl.Boolean})
    patches = [
        mock.patch.object(_sweep, "basis_columns", _basis),
        mock.patch.object(_metrics, "score_intervals",
                          lambda _scores: _no_intervals(empty_scope)),
        mock.patch.object(_metrics, "_mean_by_category", _mean_by_category),
        mock.patch.object(_summary, "with_causes", lambda q, *_: q.with_columns(
            pl.lit(None, dtype).alias(name) for name, dtype in _NEW_QUESTION_COLUMNS.items())),
        mock.patch.object(_summary, "attribution", lambda _q: pl.DataFrame(schema={
            "run_id": pl.String, "cause": pl.String, "questions": pl.UInt32,
            "share": pl.Float64})),
        mock.patch.object(_summary, "gold_context", lambda _q: pl.DataFrame(schema={
            "run_id": pl.String, "in_context": pl.Boolean, **INTERVAL_SCHEMA})),
        mock.patch.object(_summary, "paired_differences",
                          lambda *_: pl.DataFrame(schema=PAIRED_SCHEMA)),
        mock.patch.object(_markdown, "attribution_lines", lambda *_: []),
        mock.patch.object(_markdown, "paired_lines", lambda *_: []),
    ]
    for patch in patches:
        patch.start()
    try:
        yield
    finally:
        for patch in reversed(patches):
            patch.stop()


@dataclass(frozen=True)
class Timing:
    """Median seconds of one variant: wall clock, and this process's CPU time (every thread:
    the figure a shared machine disturbs least)."""

    wall: float
    cpu: float


def interleaved(repeats: int, work: Callable[[], object]) -> tuple[Timing, Timing]:
    """`work` with every part and in the baseline, alternating, `repeats` times each."""
    runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(repeats):
        for full in (True, False):
            with _nothing() if full else baseline():
                wall, cpu = time.perf_counter(), time.process_time()
                work()
                runs[full].append((time.perf_counter() - wall, time.process_time() - cpu))
    return tuple(Timing(statistics.median(w for w, _ in runs[full]),  # type: ignore[return-value]
                        statistics.median(c for _, c in runs[full])) for full in (True, False))


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--judge-repeats", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if min(args.questions, args.judge_repeats, args.repeats) < 1 or args.runs < 2:
        parser.error("--questions, --judge-repeats and --repeats must be at least 1, --runs "
                     "at least 2")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        tree = build_tree(Path(tmp), args.questions, args.runs, args.judge_repeats)
        print(f"results tree: {args.runs} runs x {args.questions:,} questions, "
              f"{args.judge_repeats} judge repeat(s), built in "
              f"{time.perf_counter() - started:.1f} s")
        out = Path(tmp) / "report"
        write_report(tree.root, out)  # warm: imports, the file cache
        full, base = interleaved(args.repeats, lambda: write_report(tree.root, out))
        print(f"write_report, medians of {args.repeats} interleaved runs each, with intervals, "
              f"paired differences and attribution vs without:")
        for name in ("wall", "cpu"):
            new, old = getattr(full, name), getattr(base, name)
            print(f"  {name:4} {new:.2f} s vs {old:.2f} s: ratio {new / old:.3f} "
                  f"({100 * (new / old - 1):+.1f}%)")

if __name__ == "__main__":
    main()
