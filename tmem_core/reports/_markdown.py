"""The Markdown report: one section per summary table, figures, comparisons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from tmem_core.evaluation._basis import SHOWN
from tmem_core.reports._cells import ci_cell, fmt, markdown_table, signed, with_ci
from tmem_core.reports._compare import COMPARED, SWEEP, Comparison
from tmem_core.reports._metrics import LLM_STAGES, PHASE
from tmem_core.reports._plots import run_labels
from tmem_core.reports._sections import attribution_lines, paired_lines
from tmem_core.reports._summary import Summary
from tmem_core.results._accuracy import ALL_JUDGES, OVERALL
from tmem_core.results._calibration import MIN_CONTROLS, RELIABLE_RATE, UNRELIABLE
from tmem_core.results._degradation import degraded

MATCHED_EVIDENCE = 0.25  # mean context tokens of compared runs may differ by this much
MAX_LISTED = 50  # error rows listed per store; errors.parquet has them all
MAX_ERROR_CHARS = 160
SEPARATE_MARK = " †"
NOT_MEASURABLE = "not measurable"
INTERVALS = ("[low, high]: 95% interval. Where questions share conversations (LoCoMo, "
             "GroupMemBench, EverMemBench, synthetic) a cluster bootstrap: conversations "
             "drawn, then questions within them, then judges x repeats within each question "
             "(`interval unit` conversation); where each has its own (LongMemEval) over "
             "questions: Wilson's for a proportion (one 0/1 value per question), else a "
             "two-stage percentile bootstrap (`interval unit` question). `results/README.md` "
             "says which applies where, the Parquet tables give each row's method, unit and "
             "seed.")
_REFERENCE = {"backbone": "first backbone (by name) of runs alike in every other field",
              "budget": "smallest budget of runs alike in every other field",
              SWEEP: "baseline sweep's run with the same config"}


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
    """The accuracy cell with its interval, marked when a judge of the run failed its
    calibration."""
    def cell(s: dict[str, object]) -> str:
        shown = with_ci(s["accuracy"], s["accuracy_low"], s["accuracy_high"])  # type: ignore[arg-type]
        if s["judges_reliable"] is not False:
            return shown
        judges = ", ".join(map(str, s["unreliable_judges"] or []))  # type: ignore[call-overload]
        return f"{shown} (unreliable judge: {judges})"
    return pl.struct("accuracy", "accuracy_low", "accuracy_high", "judges_reliable",
                     "unreliable_judges").map_elements(cell, return_dtype=pl.String
                                                       ).alias("accuracy")


def _recall_cell(recall: str = "recall", low: str = "ci_low", high: str = "ci_high",
                 questions: str = "questions", untraceable: str = "untraceable",
                 basis: str = "basis") -> pl.Expr:
    """Recall with its interval and n; `not measurable` when no context could be traced,
    `read` when the gold was looked for in what the method read, not in what it showed."""
    def cell(s: dict[str, object]) -> str:
        if s[recall] is None:
            return NOT_MEASURABLE if s[untraceable] else "–"
        shown = f"{with_ci(s[recall], s[low], s[high])} (n={s[questions]}"  # type: ignore[arg-type]
        extra = [f"{s[untraceable]} not measurable"] if s[untraceable] else []
        extra += [str(s[basis])] if s[basis] != SHOWN else []
        return shown + "".join(f", {e}" for e in extra) + ")"
    return pl.struct(recall, low, high, questions, untraceable, basis).map_elements(
        cell, return_dtype=pl.String)


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
            ("Evidence recall@k", self.recall()),
            ("Failure attribution", attribution_lines(self.summary, self._with_run)),
            ("Paired differences", paired_lines(self.summary, self.labels)),
            ("Degradation", self.degradation()), ("Test-time steps", self.steps()),
            ("Memory quality", self.memory_quality()),
            ("Tokens per question by stage", self.tokens()),
            ("Time per stage", self.timing()), ("Engine utilisation", self.utilisation()),
            ("Errors", self.errors()),
            ("Validators", self.validators()), ("Attempts", self.attempts()),
            ("Revision chains (Exp-5)", self.chains()),
            ("Paper figures", self.paper()),
            *self.comparisons(comparisons),
            ("Figures", [f"![{name}]({path.name})" for name, path in figures.items()]),
        ]:
            lines += [f"## {heading}", "", *body, ""]
        return "\n".join(lines).rstrip() + "\n"

    def _with_run(self, frame: pl.DataFrame) -> pl.DataFrame:
        return self.labels.join(frame, on="run_id", maintain_order="left").drop("run_id")

    def runs(self) -> list[str]:
        runs = self.summary.runs.with_columns(
            _flagged_accuracy(),
            *[ci_cell(m, f"{m}_low", f"{m}_high").alias(m) for m in ("exact_match", "f1")],
            _recall_cell(low="recall_low", high="recall_high", questions="recall_questions",
                         untraceable="recall_untraceable", basis="recall_basis").alias(
                "recall"))
        table = self._with_run(runs.select(
            "run_id", "judge_repeats", "questions", "judged", "failed", "stale", "pending",
            "scored", "accuracy", pl.col("judged_by").alias("judged by"), "exact_match", "f1",
            "recall",
            pl.col("accuracy_unit").alias("interval unit"),
            pl.col("context_tokens").alias("context tokens (mean)"),
            pl.col("context_tokens_max").alias("(max)"), "tokens_per_question",
            pl.col("cost_usd").alias("USD spent now"),
            pl.col("method_cost_usd").alias("USD as if run"),
            "wall_s"))
        ids = self.labels.select("run", "run_id")
        return [INTERVALS, "", *markdown_table(table), *self._unmatched_evidence(),
                *self._mixed_attempts(), *markdown_table(ids)]

    def _mixed_attempts(self) -> list[str]:
        """A warning per run whose records come from attempts with different code or
        packages (see Attempts)."""
        mixed = self._with_run(self.summary.attempts.drop_nulls("mixed"))
        lines = [f"**Mixed attempts in {row['run']}**: its {row['attempts']} attempts differ "
                 f"in {row['mixed']}; its records may come from any of them."
                 for row in mixed.iter_rows(named=True)]
        return [*lines, ""] if lines else []

    def attempts(self) -> list[str]:
        table = self._with_run(self.summary.attempts)
        return ["Each driver's pass over a run is an attempt (its contract keeps them all); a "
                "run whose attempts differ in code (git commit) or package versions says so "
                "under `mixed`, as its records may come from any of them.", "",
                *markdown_table(table)]

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

    def memory_quality(self) -> list[str]:
        table = self.summary.memory_quality
        if table.is_empty():
            return ["Not asked (`grid.memory_quality`)."]
        note = ("Per run (its method), the judge's mean score of each question's constructed "
                "memory on the five dimensions of the T2Mem paper (§5.3); the rubric and its "
                "1-5 scale are this project's, not the paper's (`quality/memory`).")
        return [note, "", *markdown_table(self._with_run(table))]

    def _degraded(self, table: pl.DataFrame, counters: list[str]
                  ) -> list[tuple[str, dict[str, int]]]:
        runs = dict(self.labels.iter_rows())
        return [(runs[row["run_id"]], worse) for row in table.iter_rows(named=True)
                if (worse := degraded({k: int(row[k]) for k in counters}))]

    def calibration(self) -> list[str]:
        note = ("Each judge scored control answers built from the run's own questions, per "
                "kind (`results/README.md`): positives it must judge correct (TPR: the gold, "
                "a paraphrase, the right letter) and negatives it must judge wrong (TNR: "
                "another question's gold, a superseded value, a shifted date, a made-up "
                "answer to an unanswerable question, a wrong letter). Rates count only the "
                "controls the judge's LLM scored [Wilson 95% interval]; controls the "
                "benchmark scores by rule are counted apart (*by rule*). A kind is "
                f"*not calibrated* below {MIN_CONTROLS} LLM-scored controls, **unreliable** "
                f"when its interval's lower bound is below {RELIABLE_RATE}; a judge "
                "unreliable on any kind makes its run's accuracy no measurement.")
        def cell(s: dict[str, Any]) -> str:
            status = "**UNRELIABLE**" if s["status"] == UNRELIABLE else s["status"]
            shown = (status if s["rate"] is None else
                     f"{status} {with_ci(s['rate'], s['ci_low'], s['ci_high'])} "
                     f"(n={s['controls']})")
            ruled = (f"; by rule {fmt(s['rule_rate'])} (n={s['rule_controls']})"
                     if s["rule_controls"] else "")
            return shown + ruled
        cells = pl.struct("rate", "ci_low", "ci_high", "controls", "status", "rule_controls",
                          "rule_rate").map_elements(cell, return_dtype=pl.String)
        table = self.summary.calibration.with_columns(cells.alias("cell")).pivot(
            on="control", index=["run_id", "judge"], values="cell")
        return [note, "", *markdown_table(self._with_run(table))]

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
                *markdown_table(_by_category(self.summary.exact_match, ci_cell("exact_match"),
                                             self.labels))]

    def accuracy(self) -> list[str]:
        pooled = self.summary.accuracy.filter(pl.col("judge") == ALL_JUDGES)
        note = ("Mean judge score [95% interval] under each run's judges (`judged by`: `self`, "
                "the run's own backbone; `pooled`, several judges' verdicts averaged)."
                f"{SEPARATE_MARK}: reported separately, outside `overall`.")
        judged = self.summary.runs.select("run_id", "judged_by")
        return [note, "", *markdown_table(_by_category(pooled, ci_cell("accuracy"),
                                                       self.labels).join(
            self.labels.join(judged, on="run_id").select(
                "run", pl.col("judged_by").alias("judged by")), on="run", how="left"))]

    def judges(self) -> list[str]:
        rows = self.summary.accuracy.filter((pl.col("category") == OVERALL)
                                            & (pl.col("judge") != ALL_JUDGES))
        return ["`std`: across the judge's repeats; the interval covers questions and repeats.",
                "", *markdown_table(self._with_run(rows.select(
                    "run_id", "judge", "repeats", "questions",
                    ci_cell("accuracy").alias("accuracy [95% interval]"), "std")))]

    def f1(self) -> list[str]:
        if self.summary.f1.is_empty():
            return ["No LoCoMo runs."]
        return markdown_table(_by_category(self.summary.f1, ci_cell("f1"), self.labels))

    def recall(self) -> list[str]:
        table = _by_category(self.summary.recall, _recall_cell(), self.labels)
        note = ("Recall of gold evidence in the constructed context, over the questions with "
                "gold evidence only (n; abstentions and questions without evidence, such as "
                "EverMemBench's evaluation-code questions, which name none, are left out); k is "
                "the run's top_k. `read`: the gold was looked for in what the method read while "
                "building its context (T2Mem's notes, Search-o1's chain, an external system's "
                f"memories), not in text shown to the answer model; `{NOT_MEASURABLE}`: the "
                "context holds memories that name no source message.")
        return [note, "", *self._recall_not_available(), *markdown_table(table),
                *self._selection_recall()]

    def _selection_recall(self) -> list[str]:
        """Recall@k of the evidence after LLM selection (the paper's Exp-2 for T-MEM)."""
        runs = self.summary.runs.filter(pl.col("selection_recall_questions") > 0)
        if runs.is_empty():
            return []
        table = self._with_run(runs.select(
            "run_id", pl.col("top_k").alias("k"),
            pl.col("selection_recall").round(3).alias("recall@k after selection"),
            pl.col("selection_recall_questions").alias("n")))
        return ["", "Recall@k of the evidence after the method's LLM selection (KEY, then "
                "SUPPORT, from k anchors; `tmem_reranked`, `tmem_global`: cut to k), before "
                "structuring and the budget: the paper's Exp-2 figure for T-MEM.", "",
                *markdown_table(table)]

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
                                          pl.col("method_cost_usd").alias("USD as if run"),
                                          pl.col("calibration_tokens").alias(
                                              "calibration tokens"),
                                          pl.col("calibration_cost_usd").alias(
                                              "calibration USD spent now"))
        table = stages.select("run_id", *LLM_STAGES).join(
            phases.select("run_id", *dict.fromkeys(PHASE.values())), on="run_id").join(
            totals, on="run_id")
        return ["LLM tokens (prompt + completion) per question of the run, the judges' "
                "calibration controls apart (never a method's tokens); totals as "
                "`results/README.md` (Tokens and cost) counts them.", "",
                *markdown_table(self._with_run(table))]

    def timing(self) -> list[str]:
        wall = self._with_run(self.summary.runs.select("run_id", "wall_s"))
        busy = self._with_run(self.summary.timing)
        return ["Run wall time (contract start to end):", "", *markdown_table(wall),
                "Busy time per stage: summed per-question `latency_s` of the stage's records, "
                "and summed LLM call latency (concurrent work overlaps, so sums can exceed "
                "wall time):", "", *markdown_table(busy)]

    def utilisation(self) -> list[str]:
        table = self.summary.utilisation
        if table.is_empty():
            return ["No call reached an engine replica (all cached, or no LLM calls)."]
        return ["Per backbone and replica: the time it held at least one call over the time "
                "its backbone held any (busy fraction), and the calls it held on average and "
                "at most over that time (figure `requests_in_flight`):", "",
                *markdown_table(table)]

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

    def chains(self) -> list[str]:
        if self.summary.revision_chains.is_empty():
            return ["No run's questions carry injected revision chains."]
        return ["Per run, with its condition (at most that many revisions, then a rollback) "
                "and the messages injected per question: over the questions with an injected "
                "revision chain and a context, the share "
                "whose context holds the whole trajectory (original state, every revision, the "
                "rollback), and the share holding a revision but not the rollback.", "",
                *markdown_table(self._with_run(self.summary.revision_chains))]

    def paper(self) -> list[str]:
        """The paper's figures beside each run that matches one (`reports/_paper.py`)."""
        table = self.summary.paper
        if table.is_empty():
            return ["No run matches a figure of the T-MEM paper's table "
                    "(the newest `tmem_core/reports/paper_figures.v<N>.toml`, which documents "
                    "the match key; a figure on accuracy needs a run judged by its own "
                    "backbone, as the paper's were)."]
        shown = ["run_id", "experiment", "section", "paper_method", "metric", "ours", "paper",
                 "difference", "match"]
        if table["inside_interval"].is_not_null().any():
            shown.append("inside_interval")
        return ["Our figure beside the paper's where the run's benchmark, method, answer model, "
                "Top-k and budget match the figure's setting (`loose`: the paper summary does "
                "not state part of it; a margin is `exact` only against the paper's whole "
                "comparator set, else `loose: compared against` the methods it was measured "
                "against); accuracy and recall in percent, margins and losses in points. A "
                "figure on accuracy stands only beside runs judged as the paper judged "
                "(`judged by` = `self`: the answer model judging its own answers, §C.3).", "",
                *markdown_table(self._with_run(table.select(shown)))]

    def comparisons(self, comparisons: Sequence[Comparison]) -> list[tuple[str, list[str]]]:
        """One section per comparison: each run's metrics and `(Δ …)` to its reference run."""
        sections = []
        for c in comparisons:
            table = self._with_run(c.table.select("run_id", *map(_delta_cell, COMPARED)))
            sections.append((c.title, [f"Deltas against the {_REFERENCE[c.axis]}.", "",
                                       *markdown_table(table)]))
        return sections
