"""What the pages show of a sweep and of a run, as JSON-able dataclasses.

A question's outcome: `failed` (an unresolved failure), `pending` (no judge record yet),
else `correct` when its mean judge score is at least 0.5, otherwise `wrong`. Judges
disagree on a question when its judge records (judges x repeats) do not all score alike.
EM is the share of judge records of text answers whose prediction matches the gold answer
exactly (`exact_match`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tmem_core.reports import run_labels
from tmem_core.results import degraded
from tmem_core.viewer._data import SweepData, benchmark

CORRECT_AT = 0.5  # a mean judge score from which a question counts as correct
SHOWN_TABLES_SKIP = ("runs", "questions")  # the sweep page's run table; the run pages
_ID = ["run_id", "qid"]


@dataclass(frozen=True)
class Table:
    name: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass(frozen=True)
class Figure:
    name: str
    src: str


@dataclass(frozen=True)
class RunRow:
    run_id: str
    label: str
    benchmark: str
    method: str
    backbone: str
    judges: str
    top_k: int
    budget: int
    running: bool
    questions: int
    judged: int
    failed: int
    pending: int
    accuracy: float | None
    accuracy_std: float | None
    f1: float | None
    exact_match: float | None
    recall: float | None
    context_tokens: float | None
    tokens_per_question: float | None
    cost_per_question: float | None
    calibration_tokens_per_question: float | None  # the judges' controls, never the method's
    wall_s: float | None
    errors: int  # failed records whose key never succeeded
    failed_attempts: int
    unreliable_judges: list[str]  # judges that failed their calibration on this run
    uncalibrated: list[str]  # `judge:control kind` pairs without a scored control
    degraded: dict[str, int]  # the method's non-zero fallback and repair counters


@dataclass(frozen=True)
class SweepView:
    name: str
    root: str
    running: bool
    runs: list[RunRow]
    figures: list[Figure]
    tables: list[Table]


@dataclass(frozen=True)
class QuestionRow:
    qid: str
    question: str
    category: str
    outcome: str
    score: float | None
    judged: int
    disagreement: bool
    f1: float | None
    exact_match: float | None
    recall: float | None
    context_tokens: int | None
    llm_tokens: int
    cost_usd: float
    calibration_tokens: int
    prediction: str | None
    answer: str | None
    error: str | None


@dataclass(frozen=True)
class RunView:
    run: RunRow
    categories: list[str]
    questions: list[QuestionRow]


def sweep_view(data: SweepData, figure_src: Callable[[str, Path], str]) -> SweepView:
    """The sweep page; `figure_src(name, path)` is how the page loads a figure."""
    runs = run_rows(data)
    tables = [Table(name, frame.columns, [list(r) for r in frame.rows()])
              for name, frame in data.summary.tables().items() if name not in SHOWN_TABLES_SKIP]
    return SweepView(data.results.name, str(data.results.root), any(r.running for r in runs),
                     runs, [Figure(n, figure_src(n, p)) for n, p in data.figures.items()],
                     tables)


def run_rows(data: SweepData) -> list[RunRow]:
    runs = data.summary.runs.with_columns(run_labels(data.summary.runs))
    judged = data.results.records["judge"]
    em = judged.group_by("run_id").agg(pl.col("exact_match").cast(pl.Float64).mean())
    errors = data.summary.error_counts.group_by("run_id").agg(
        pl.col("unresolved").sum().alias("errors"), pl.col("failed_attempts").sum())
    table = runs.join(em, on="run_id", how="left").join(errors, on="run_id", how="left")
    degradation = {r["run_id"]: degraded({k: int(v or 0) for k, v in r.items()
                                          if k not in ("run_id", "questions")})
                   for r in data.summary.degradation.iter_rows(named=True)}
    return [_run_row(row, degradation.get(row["run_id"], {}))
            for row in table.iter_rows(named=True)]


def _run_row(row: dict[str, Any], worse: dict[str, int]) -> RunRow:
    questions = row["questions"] or 0
    cost = row["cost_usd"]
    return RunRow(
        row["run_id"], row["label"], row["benchmark"], row["method"], row["backbone"],
        row["judges"], row["top_k"], row["budget"], row["ended_at"] is None, questions,
        row["judged"] or 0, row["failed"] or 0, row["pending"] or 0, row["accuracy"],
        row["accuracy_std"], row["f1"], row["exact_match"], row["recall"],
        row["context_tokens"], row["tokens_per_question"],
        None if cost is None or not questions else cost / questions,
        None if not questions else (row["calibration_tokens"] or 0) / questions,
        row["wall_s"], row["errors"] or 0, row["failed_attempts"] or 0,
        list(row.get("unreliable_judges") or []), list(row.get("uncalibrated") or []), worse)


def run_view(data: SweepData, run_id: str) -> RunView | None:
    """A run's page: its headline row and one light row per question (no large columns)."""
    run = next((r for r in run_rows(data) if r.run_id == run_id), None)
    if run is None:
        return None
    rows = question_rows(data, run_id)
    return RunView(run, sorted({r.category for r in rows}), rows)


def question_rows(data: SweepData, run_id: str, qids: Collection[str] | None = None
                  ) -> list[QuestionRow]:
    """The run's question rows (only those of `qids`, when given)."""
    only = pl.col("run_id") == run_id
    if qids is not None:
        only &= pl.col("qid").is_in(list(qids))
    table = data.summary.questions.filter(only)
    judged = data.results.records["judge"].filter(only).group_by(_ID).agg(
        (pl.col("score").n_unique() > 1).alias("disagreement"),
        pl.col("exact_match").cast(pl.Float64).mean())
    answers = data.results.records["answer"].filter(only).select(*_ID, "prediction")
    for facts in (judged, answers):
        table = table.join(facts, on=_ID, how="left", maintain_order="left")
    questions = benchmark(data_dir(data, run_id)).questions
    gold = data.results.gold[run_id]
    return [_question_row(r, questions[r["qid"]].question, gold[r["qid"]].answer)
            for r in table.iter_rows(named=True)]


def data_dir(data: SweepData, run_id: str) -> Path:
    """The prepared benchmark the run read."""
    return Path(data.summary.runs.filter(run_id=run_id).item(0, "data_dir"))


def _question_row(row: dict[str, Any], question: str, answer: str | None) -> QuestionRow:
    return QuestionRow(
        row["qid"], question, row["category"], _outcome(row["status"], row["score"]),
        row["score"], row["judged"], bool(row["disagreement"]), row["f1"], row["exact_match"],
        row["recall"], row["context_tokens"], row["llm_tokens"], row["cost_usd"],
        row["calibration_tokens"],
        row["prediction"], answer, row["error"])


def _outcome(status: str, score: float | None) -> str:
    if status != "judged" or score is None:
        return status
    return verdict(score)


def verdict(score: float) -> str:
    return "correct" if score >= CORRECT_AT else "wrong"
