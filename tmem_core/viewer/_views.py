"""What the pages show of a sweep and of a run, as JSON-able dataclasses.

A question's outcome: `failed` (an unresolved failure), `stale` (no judge record in force,
but records made under superseded dependencies), `pending` (no judge record yet),
else `correct` when its mean judge score is at least CORRECT_AT, otherwise `wrong`. Judges
disagree on a question when its judge records (judges x repeats) do not all score alike.
Its `cause` is the report's failure attribution. Every headline figure comes with the
report's 95% interval (`[low, high]`, None where there is none).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tmem_core.reports import run_labels
from tmem_core.results._accuracy import CORRECT_AT
from tmem_core.results._degradation import degraded
from tmem_core.viewer._data import SweepData, benchmark

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
class GoldContext:
    """P(correct) over a run's judged questions whose context held all their gold evidence
    (`in_context`) or not, with its Wilson interval."""

    in_context: bool
    basis: str
    questions: int
    correct: int
    p_correct: float
    ci: list[float] | None


@dataclass(frozen=True)
class PairRow:
    """One metric of a pair of runs (see the report's paired differences): b minus a."""

    varied: str
    run_a: str
    run_b: str
    metric: str
    questions: int
    a: float | None
    b: float | None
    diff: float | None
    ci: list[float] | None
    p_value: float | None
    test: str | None


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
    stale: int  # questions whose records were made under superseded dependencies
    pending: int
    accuracy: float | None
    accuracy_ci: list[float] | None
    f1: float | None
    f1_ci: list[float] | None
    exact_match: float | None
    exact_match_ci: list[float] | None
    recall: float | None
    recall_ci: list[float] | None
    recall_basis: str | None  # shown, read, shown+read
    recall_untraceable: int  # scorable questions whose context names no source message
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
    causes: dict[str, int]  # questions per cause of the failure attribution
    gold_context: list[GoldContext]


@dataclass(frozen=True)
class SweepView:
    name: str
    root: str
    running: bool
    runs: list[RunRow]
    figures: list[Figure]
    tables: list[Table]
    pairs: list[PairRow]


@dataclass(frozen=True)
class QuestionRow:
    qid: str
    question: str
    category: str
    outcome: str
    cause: str
    score: float | None
    judged: int
    disagreement: bool
    gold_in_context: str | None  # all, partial, none (null: no gold, or untraceable)
    evidence_basis: str | None
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
                     tables, _pairs(data))


def _pairs(data: SweepData) -> list[PairRow]:
    return [PairRow(r["varied"], r["run_a"], r["run_b"], r["metric"], r["questions"], r["a"],
                    r["b"], r["diff"], _ci(r["ci_low"], r["ci_high"]), r["p_value"], r["test"])
            for r in data.summary.paired.iter_rows(named=True)]


def _ci(low: float | None, high: float | None) -> list[float] | None:
    return None if low is None or high is None else [low, high]


def run_rows(data: SweepData) -> list[RunRow]:
    summary = data.summary
    runs = summary.runs.with_columns(run_labels(summary.runs))
    errors = summary.error_counts.group_by("run_id").agg(
        pl.col("unresolved").sum().alias("errors"), pl.col("failed_attempts").sum())
    table = runs.join(errors, on="run_id", how="left")
    degradation = {r["run_id"]: degraded({k: int(v or 0) for k, v in r.items()
                                          if k not in ("run_id", "questions")})
                   for r in summary.degradation.iter_rows(named=True)}
    causes: dict[str, dict[str, int]] = {}
    for run_id, cause, count in summary.attribution.select(
            "run_id", "cause", "questions").iter_rows():
        causes.setdefault(run_id, {})[cause] = count
    gold: dict[str, list[GoldContext]] = {}
    for r in summary.gold_context.iter_rows(named=True):
        gold.setdefault(r["run_id"], []).append(GoldContext(
            r["in_context"], r["basis"], r["questions"], r["correct"], r["p_correct"],
            _ci(r["ci_low"], r["ci_high"])))
    return [_run_row(row, degradation.get(row["run_id"], {}), causes.get(row["run_id"], {}),
                     gold.get(row["run_id"], []))
            for row in table.iter_rows(named=True)]


def _run_row(row: dict[str, Any], worse: dict[str, int], causes: dict[str, int],
             gold: list[GoldContext]) -> RunRow:
    questions = row["questions"] or 0
    cost = row["cost_usd"]
    return RunRow(
        row["run_id"], row["label"], row["benchmark"], row["method"], row["backbone"],
        row["judges"], row["top_k"], row["budget"], row["ended_at"] is None, questions,
        row["judged"] or 0, row["failed"] or 0, row["stale"] or 0, row["pending"] or 0,
        *_with_ci(row, "accuracy"), *_with_ci(row, "f1"), *_with_ci(row, "exact_match"),
        *_with_ci(row, "recall"), row["recall_basis"], row["recall_untraceable"] or 0,
        row["context_tokens"], row["tokens_per_question"],
        None if cost is None or not questions else cost / questions,
        None if not questions else (row["calibration_tokens"] or 0) / questions,
        row["wall_s"], row["errors"] or 0, row["failed_attempts"] or 0,
        list(row.get("unreliable_judges") or []), list(row.get("uncalibrated") or []), worse,
        causes, gold)


def _with_ci(row: dict[str, Any], metric: str) -> tuple[float | None, list[float] | None]:
    return row[metric], _ci(row[f"{metric}_low"], row[f"{metric}_high"])


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
    answers = data.results.records["answer"].filter(only).select(*_ID, "prediction")
    table = data.summary.questions.filter(only).join(answers, on=_ID, how="left",
                                                      maintain_order="left")
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
        row["cause"], row["score"], row["judged"], bool(row["judge_disagreement"]),
        row["gold_in_context"], row["evidence_basis"], row["f1"], row["exact_match"],
        row["recall"], row["context_tokens"], row["llm_tokens"], row["cost_usd"],
        row["calibration_tokens"],
        row["prediction"], answer, row["error"])


def _outcome(status: str, score: float | None) -> str:
    if status != "judged" or score is None:
        return status
    return verdict(score)


def verdict(score: float) -> str:
    return "correct" if score >= CORRECT_AT else "wrong"
