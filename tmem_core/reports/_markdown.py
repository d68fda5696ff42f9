"""The Markdown report: one section per summary table, figures, comparisons."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from tmem_core.reports._compare import COMPARED, SWEEP, Comparison
from tmem_core.reports._metrics import LLM_STAGES, PHASE
from tmem_core.reports._plots import run_labels
from tmem_core.reports._summary import Summary
from tmem_core.results import ALL_JUDGES, OVERALL, RELIABLE_RATE, degraded

MATCHED_EVIDENCE = 0.25  # mean context tokens of compared runs may differ by this much
MAX_LISTED = 50  # error rows listed per store; errors.parquet has them all
MAX_ERROR_CHARS = 160
SEPARATE_MARK = " †"
_REFERENCE = {"backbone": "first backbone (by name) of runs alike in every other field",
              "budget": "smallest budget of runs alike in every other field",
              SWEEP: "baseline sweep's run with the same config"}


def fmt(value: object) -> str:
    """A table cell: 4 significant digits below 100, whole numbers above, `–` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.4g}"


def markdown_table(frame: pl.DataFrame) -> list[str]:
    if frame.is_empty():
        return ["(none)", ""]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * frame.width]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.iter_rows()]
    return [*lines, ""]


def _pm(mean: str, std: str) -> pl.Expr:
    """`mean ± std` (std omitted when there is a single repeat)."""
    return pl.struct(mean, std).map_elements(
        lambda s: fmt(s[mean]) + ("" if s[std] is None else f" ± {fmt(s[std])}"),
        return_dtype=pl.String)


def _delta_cell(metric: str) -> pl.Expr:
    """`value (Δ delta)` of one compared metric."""
    def cell(row: dict[str, float | None]) -> str:
        value, delta = row[metric], row[f"{metric}_delta"]
        return "–" if value is None else f"{fmt(value)} (Δ {signed(delta)})"
    return pl.struct(metric, f"{metric}_delta").map_elements(
        cell, return_dtype=pl.String).alias(metric)


def _by_category(frame: pl.DataFrame, value: pl.Expr, labels: pl.DataFrame) -> pl.DataFrame:
    """Runs as rows, categories as columns (overall first, separate ones last and marked)."""
    cells = frame.with_columns(
        pl.when("separate").then(pl.col("category") + SEPARATE_MARK)
        .otherwise("category").alias("category"), value.alias("cell"))
    columns = cells.select("category", "separate",
                           (pl.col("category") != OVERALL).alias("not_overall"))
    order = (columns.unique().sort("separate", "not_overall", "category")
             .get_column("category").to_list())
    wide = cells.pivot(on="category", index="run_id", values="cell")
    return labels.join(wide, on="run_id", maintain_order="left").select("run", *order)


def _flagged_accuracy() -> pl.Expr:
    """The accuracy cell, marked when a judge of the run failed its calibration."""
    def cell(s: dict[str, object]) -> str:
        if s["judges_reliable"] is not False:
            return fmt(s["accuracy"])
        judges = ", ".join(map(str, s["unreliable_judges"] or []))  # type: ignore[call-overload]
        return f"{fmt(s['accuracy'])} (unreliable judge: {judges})"
    return pl.struct("accuracy", "judges_reliable", "unreliable_judges").map_elements(
        cell, return_dtype=pl.String).alias("accuracy")


class Report:
    """Builds the Markdown text of one summary (and optional comparisons)."""

    def __init__(self, summary: Summary, title: str) -> None:
        self.summary, self.title = summary, title
        self.labels = summary.runs.select("run_id", run_labels(summary.runs).alias("run"))

    def render(self, figures: Mapping[str, Path], comparisons: Sequence[Comparison],
               header: Sequence[str] = ()) -> str:
        lines = [f"# {self.title}", "", *[f"{h}  " for h in header], "",
                 "Every table and figure is defined in `results/README.md`. Errors are never "
                 "scored: a failed question is counted under Errors, not as a wrong answer.", ""]
        for heading, body in [
            ("Runs", self.runs()), ("Accuracy per category", self.accuracy()),
            ("Accuracy per judge (overall)", self.judges()),
            ("Judge calibration", self.calibration()),
            ("Judge agreement", self.agreement()),
            ("Exact match", self.exact_match()), ("LoCoMo F1", self.f1()),
            ("Evidence recall@k", self.recall()), ("Degradation", self.degradation()),
            ("Test-time steps", self.steps()),
            ("Tokens per question by stage", self.tokens()),
            ("Time per stage", self.timing()), ("Errors", self.errors()),
            ("Validators", self.validators()), *self.comparisons(comparisons),
            ("Figures", [f"![{name}]({path.name})" for name, path in figures.items()]),
        ]:
            lines += [f"## {heading}", "", *body, ""]
        return "\n".join(lines).rstrip() + "\n"

    def _with_run(self, frame: pl.DataFrame) -> pl.DataFrame:
        return self.labels.join(frame, on="run_id", maintain_order="left").drop("run_id")

    def runs(self) -> list[str]:
        runs = self.summary.runs.with_columns(_flagged_accuracy())
        table = self._with_run(runs.select(
            "run_id", "judge_repeats", "questions", "judged", "failed", "pending", "scored",
            "accuracy", "accuracy_std", "exact_match", "f1", "recall",
            pl.col("context_tokens").alias("context tokens (mean)"),
            pl.col("context_tokens_max").alias("(max)"), "tokens_per_question",
            pl.col("cost_usd").alias("USD spent now"),
            pl.col("method_cost_usd").alias("USD as if run"),
            "wall_s"))
        ids = self.labels.select("run", "run_id")
        return [*markdown_table(table), *self._unmatched_evidence(), *markdown_table(ids)]

    def _unmatched_evidence(self) -> list[str]:
        """A warning per benchmark whose runs' mean context tokens differ by more than
        `MATCHED_EVIDENCE` (the runs do not compare like with like)."""
        lines = []
        runs = self.labels.join(self.summary.runs, on="run_id")
        for (benchmark,), group in runs.group_by("benchmark", maintain_order=True):
            means = group.drop_nulls("context_tokens")
            if means.height < 2:
                continue
            low, high = means["context_tokens"].min(), means["context_tokens"].max()
            if isinstance(low, float) and isinstance(high, float) and \
                    high > (1 + MATCHED_EVIDENCE) * low:
                lines.append(f"**Unmatched evidence on {benchmark}**: mean context tokens "
                             f"range from {fmt(low)} to {fmt(high)} (more than "
                             f"{MATCHED_EVIDENCE:.0%} apart); accuracy differences between "
                             f"these runs mix method and evidence size.")
        return [*lines, ""] if lines else []

    def degradation(self) -> list[str]:
        table = self.summary.degradation
        counters = [c for c in table.columns if c not in ("run_id", "questions")]
        if not counters:
            return ["No method of these runs reports fallbacks or repairs."]
        note = ("Fallbacks and repairs inside the methods, summed over each run's questions "
                "(`*_total`: what they are out of). A run with any is marked **degraded**: "
                "part of its score comes from the fallback path, not the method.")
        flagged = [f"**Degraded**: {run} ({', '.join(f'{k} {v}' for k, v in worse.items())})"
                   for run, worse in self._degraded(table, counters)]
        return [note, "", *flagged, *([""] if flagged else []),
                *markdown_table(self._with_run(table))]

    def steps(self) -> list[str]:
        table = self.summary.steps
        if table.is_empty():
            return ["No run of a test-time method (T2Mem, Search-o1)."]
        note = ("Per question of a test-time method, its step record: steps taken of the "
                "budget (`max_steps`, the initial retrieval not counted), answers **forced** "
                "at the last step (where Answer is the only action), tool calls (searches and "
                "reads) per question, and T2Mem's episode parts read, in full or in part.")
        return [note, "", *markdown_table(self._with_run(table))]

    def _degraded(self, table: pl.DataFrame, counters: list[str]
                  ) -> list[tuple[str, dict[str, int]]]:
        runs = dict(self.labels.iter_rows())
        return [(runs[row["run_id"]], worse) for row in table.iter_rows(named=True)
                if (worse := degraded({k: int(row[k]) for k in counters}))]

    def calibration(self) -> list[str]:
        note = ("Each judge scored control answers built from the run's own questions: the "
                "gold answer as prediction (must be correct: TPR) and another question's "
                "differing gold answer, of the same category where there is one (must be "
                f"wrong: TNR). A judge below {RELIABLE_RATE} on either is **unreliable** and "
                "its accuracy is not a measurement.")
        return [note, "", *markdown_table(self._with_run(self.summary.calibration))]

    def agreement(self) -> list[str]:
        if self.summary.agreement.is_empty():
            return ["One judge per run: no agreement to measure."]
        return ["Cohen's kappa of each pair of judges on the run's answers (first repeat).",
                "", *markdown_table(self._with_run(self.summary.agreement))]

    def exact_match(self) -> list[str]:
        if self.summary.exact_match.is_empty():
            return ["No text answers to match."]
        return ["Normalised exact match of the prediction with the gold answer, over "
                "questions with a text answer.", "",
                *markdown_table(_by_category(self.summary.exact_match, pl.col(
                    "exact_match").map_elements(fmt, return_dtype=pl.String), self.labels))]

    def accuracy(self) -> list[str]:
        pooled = self.summary.accuracy.filter(pl.col("judge") == ALL_JUDGES)
        note = (f"Mean judge score ± std across repeats, all judges pooled.{SEPARATE_MARK}: "
                "reported separately, outside `overall`.")
        return [note, "", *markdown_table(_by_category(pooled, _pm("accuracy", "std"),
                                                       self.labels))]

    def judges(self) -> list[str]:
        rows = self.summary.accuracy.filter((pl.col("category") == OVERALL)
                                            & (pl.col("judge") != ALL_JUDGES))
        return markdown_table(self._with_run(rows.select(
            "run_id", "judge", "repeats", "questions", "accuracy", "std")))

    def f1(self) -> list[str]:
        if self.summary.f1.is_empty():
            return ["No LoCoMo runs."]
        return markdown_table(_by_category(self.summary.f1, pl.col("f1").map_elements(
            fmt, return_dtype=pl.String), self.labels))

    def recall(self) -> list[str]:
        cell = pl.struct("recall", "questions").map_elements(
            lambda s: f"{fmt(s['recall'])} (n={s['questions']})", return_dtype=pl.String)
        table = _by_category(self.summary.recall, cell, self.labels)
        note = ("Recall of gold evidence in the constructed context, over the questions with "
                "gold evidence only (n; abstentions and questions without evidence, such as "
                "EverMemBench's evaluation-code questions, which name none, are left out); k is "
                "the run's top_k.")
        return [note, "", *self._recall_not_available(), *markdown_table(table)]

    def _recall_not_available(self) -> list[str]:
        """A line per run none of whose questions has gold evidence."""
        counts = self.summary.questions.group_by("run_id").agg(
            pl.len().alias("questions"), pl.col("scorable").sum().alias("with_evidence"))
        lines = [f"Recall **not available** for {run}: none of its {n} questions has gold "
                 f"evidence." for run, n, with_evidence in
                 self._with_run(counts).select("run", "questions", "with_evidence").iter_rows()
                 if not with_evidence]
        return [*lines, ""] if lines else []

    def tokens(self) -> list[str]:
        t = self.summary.tokens
        stages = t.pivot(on="stage", index="run_id", values="tokens_per_question")
        phases = t.pivot(on="phase", index="run_id", values="tokens_per_question",
                         aggregate_function="sum")
        totals = self.summary.runs.select("run_id", pl.col("tokens").alias("total tokens"),
                                          pl.col("tokens_per_question").alias("per question"),
                                          pl.col("cost_usd").alias("USD spent now"),
                                          pl.col("method_cost_usd").alias("USD as if run"))
        table = stages.select("run_id", *LLM_STAGES).join(
            phases.select("run_id", *dict.fromkeys(PHASE.values())), on="run_id").join(
            totals, on="run_id")
        return ["LLM tokens (prompt + completion) per question of the run.", "",
                *markdown_table(self._with_run(table))]

    def timing(self) -> list[str]:
        wall = self._with_run(self.summary.runs.select("run_id", "wall_s"))
        busy = self._with_run(self.summary.timing)
        return ["Run wall time (contract start to end):", "", *markdown_table(wall),
                "Busy time per stage: summed per-question `latency_s` of the stage's records, "
                "and summed LLM call latency (concurrent work overlaps, so sums can exceed "
                "wall time):", "", *markdown_table(busy)]

    def errors(self) -> list[str]:
        counts = self.summary.error_counts.with_columns(pl.format(
            "{} / {}", "failed_attempts", "unresolved").alias("cell"))
        wide = counts.pivot(on="store", index="run_id", values="cell")
        lines = ["Failed attempts / unresolved keys (no later success) per store:", "",
                 *markdown_table(self._with_run(wide))]
        for (store,), rows in self.summary.errors.group_by("store", maintain_order=True):
            listed = self._with_run(rows.head(MAX_LISTED).select(
                "run_id", "stage", "qid", "key", "resolved", "error_kind",
                pl.col("error").str.slice(0, MAX_ERROR_CHARS)))
            more = rows.height - listed.height
            lines += [f"### {store} errors ({rows.height})", "", *markdown_table(listed)]
            lines += [f"{more} more in `errors.parquet`.", ""] if more else []
        return lines

    def validators(self) -> list[str]:
        return markdown_table(self._with_run(self.summary.validators.select(
            "run_id", "validator", "passed", "checked", "problem_count",
            pl.col("problems").list.first().alias("first problem"))))

    def comparisons(self, comparisons: Sequence[Comparison]) -> list[tuple[str, list[str]]]:
        """One section per comparison: each run's metrics and `(Δ …)` to its reference run."""
        sections = []
        for c in comparisons:
            table = self._with_run(c.table.select("run_id", *map(_delta_cell, COMPARED)))
            sections.append((c.title, [f"Deltas against the {_REFERENCE[c.axis]}.", "",
                                       *markdown_table(table)]))
        return sections
