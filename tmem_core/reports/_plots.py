"""The report's figures as PNG files (matplotlib's Agg canvas; no display needed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tmem_core.reports._metrics import LLM_STAGES, left_join
from tmem_core.reports._summary import Summary
from tmem_core.reports._utilisation import in_flight
from tmem_core.results._accuracy import ALL_JUDGES, OVERALL, POOLED

LABEL_FIELDS = ("benchmark", "method", "backbone", "construct_backbone", "top_k", "budget",
                "reasoning_budget", "steps", "params", "judges")
_PREFIX = {"construct_backbone": "construct ", "top_k": "k", "budget": "b",
           "reasoning_budget": "r", "steps": "s"}
AXIS_LABELS = {"reasoning_budget": "reasoning budget N (tokens; max_tokens = N + 64)",
               "steps": "construction steps (Tmax)"}
"""The test-time axes a sweep may vary, each drawn against accuracy and tokens when it does."""


def run_labels(runs: pl.DataFrame, leave_out: Sequence[str] = ()) -> pl.Series:
    """A short label per run: its method plus every config field that varies in `runs`
    (parameters only when one method runs with several: each method has its own), but those
    the run leaves unset (a construct backbone)."""
    shown = [_column(runs, f) for f in LABEL_FIELDS
             if f in runs.columns and f not in leave_out and _varies(runs, f)]
    parts = [_method(runs) if f == "method" else pl.lit(_PREFIX.get(f, "")) + pl.col(f).cast(
        pl.String) for f in shown]
    return runs.select(pl.concat_str(parts, separator=" ", ignore_nulls=True).alias("label")
                       ).to_series()


def _method(runs: pl.DataFrame) -> pl.Expr:
    """The method's name; a project addition (not in the papers) says so."""
    if "addition" not in runs.columns:
        return pl.col("method")
    return pl.when(pl.col("addition")).then(pl.col("method") + " (project addition)"
                                            ).otherwise(pl.col("method"))


def _column(runs: pl.DataFrame, field: str) -> str:
    """The column that shows `field`: a benchmark read from several sources or variants is
    shown with its dataset (source, variant)."""
    if field == "benchmark" and "dataset" in runs.columns and _per_group(runs, "benchmark",
                                                                          "dataset"):
        return "dataset"
    return field


def _per_group(runs: pl.DataFrame, group: str, field: str) -> bool:
    """Whether `field` takes several values within one value of `group`."""
    counts = runs.group_by(group).agg(pl.col(field).n_unique())
    return any(n > 1 for n in counts.get_column(field).to_list())


def _varies(runs: pl.DataFrame, field: str) -> bool:
    if field == "method":
        return True
    if field == "benchmark" and _column(runs, field) == "dataset":
        return True
    if field == "params":
        return _per_group(runs, "method", field)
    return runs.get_column(field).n_unique() > 1


def _overall(summary: Summary, column: str) -> pl.DataFrame:
    """Runs with their overall accuracy (all judges) or recall and its interval (runs with
    none, such as an untraceable recall, left out)."""
    table = summary.recall if column == "recall" else summary.accuracy.filter(
        pl.col("judge") == ALL_JUDGES)
    values = table.filter(pl.col("category") == OVERALL).select(
        "run_id", pl.col(column).alias("value"), "ci_low", "ci_high").drop_nulls("value")
    return summary.runs.join(values, on="run_id", maintain_order="left")  # runs' order


def error_bars(frame: pl.DataFrame, value: str = "value") -> list[list[float]]:
    """Matplotlib's `yerr` (below, above) from each row's interval (none: no bar)."""
    below = (pl.col(value) - pl.col("ci_low")).fill_null(0.0)
    above = (pl.col("ci_high") - pl.col(value)).fill_null(0.0)
    bars = frame.select(below.alias("below"), above.alias("above"))
    return [bars.get_column("below").to_list(), bars.get_column("above").to_list()]


def _lines(ax: Axes, summary: Summary, metric: str, x: str) -> None:
    """One line per run series (every config field but `x`), `metric` against `x`."""
    _series(ax, _overall(summary, metric), x)
    ax.set_ylim(-0.05, 1.05)


def _series(ax: Axes, runs: pl.DataFrame, x: str) -> None:
    """One line per run series of `runs` (every config field but `x`), `value` against `x`
    (with its interval where `runs` has one)."""
    runs = runs.drop_nulls(x)
    if runs.is_empty():
        _no_data(ax)
        return
    runs = runs.with_columns(run_labels(runs, leave_out=[x]).alias("series"))
    ordered = runs.sort(x, maintain_order=True)  # series in the runs' config order
    for (series,), points in ordered.group_by("series", maintain_order=True):
        bars = error_bars(points) if "ci_low" in points.columns else None
        ax.errorbar(points.get_column(x).to_list(), points.get_column("value").to_list(),
                    yerr=bars, marker="o", capsize=3, label=str(series))
    _legend(ax)


def varied_axes(summary: Summary) -> list[str]:
    """The test-time axes the sweep's runs take several values of."""
    runs = summary.runs
    return [a for a in AXIS_LABELS if runs.get_column(a).drop_nulls().n_unique() > 1]


def accuracy_vs(axis: str) -> Callable[[Axes, Summary], None]:
    def draw(ax: Axes, summary: Summary) -> None:
        _lines(ax, summary, "accuracy", axis)
        ax.set(title=f"Accuracy vs {axis.replace('_', ' ')}", xlabel=AXIS_LABELS[axis],
               ylabel=accuracy_label(summary))
    return draw


def tokens_vs(axis: str) -> Callable[[Axes, Summary], None]:
    def draw(ax: Axes, summary: Summary) -> None:
        _series(ax, summary.runs.select(
            *summary.runs.columns, pl.col("tokens_per_question").alias("value")), axis)
        ax.set(title=f"Tokens vs {axis.replace('_', ' ')}", xlabel=AXIS_LABELS[axis],
               ylabel="LLM tokens per question (the method's)")
    return draw


def accuracy_label(summary: Summary) -> str:
    """The accuracy axis, saying so when a run's accuracy pools several judges."""
    pooled = summary.runs.get_column("judged_by").str.starts_with(POOLED).any()
    return f"accuracy ({POOLED + ' ' if pooled else ''}judge mean, 95% interval)"


def _legend(ax: Axes) -> None:
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _no_data(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def accuracy_vs_top_k(ax: Axes, summary: Summary) -> None:
    _lines(ax, summary, "accuracy", "top_k")
    ax.set(title="Accuracy vs Top-k", xlabel="Top-k (messages retrieved)",
           ylabel=accuracy_label(summary))


def accuracy_vs_budget(ax: Axes, summary: Summary) -> None:
    _lines(ax, summary, "accuracy", "budget")
    ax.set_xscale("log", base=2)
    ax.set(title="Accuracy vs token budget", xlabel="context token budget",
           ylabel=accuracy_label(summary))


def recall_vs_k(ax: Axes, summary: Summary) -> None:
    _lines(ax, summary, "recall", "top_k")
    ax.set(title="Evidence recall vs k", xlabel="Top-k (messages retrieved)",
           ylabel="evidence recall (scorable questions, 95% interval)")


def tokens_by_stage(ax: Axes, summary: Summary) -> None:
    runs = summary.runs.sort("method")
    runs = runs.with_columns(run_labels(runs))
    per_stage = summary.tokens.pivot(on="stage", index="run_id", values="tokens_per_question")
    table = left_join(runs.select("run_id", "label"), per_stage, "run_id")
    positions = list(range(table.height))
    bottom = [0.0] * table.height
    for stage in LLM_STAGES:
        heights = table.get_column(stage).fill_null(0.0).to_list()
        ax.bar(positions, heights, bottom=bottom, label=stage)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_xticks(positions, table.get_column("label").to_list(), rotation=30, ha="right")
    ax.set(title="LLM tokens per question by stage", xlabel="run (method, varied config)",
           ylabel="tokens per question")
    _legend(ax)


def accuracy_by_category(ax: Axes, summary: Summary) -> None:
    scores = summary.accuracy.filter((pl.col("judge") == ALL_JUDGES)
                                     & (pl.col("category") != OVERALL))
    if scores.is_empty():
        _no_data(ax)
        return
    categories = scores.select("category", "separate").unique().sort("separate", "category")
    names = [c + (" (separate)" if s else "") for c, s in categories.iter_rows()]
    labelled = summary.runs.with_columns(run_labels(summary.runs))
    width = 0.8 / labelled.height
    for i, (run_id, label) in enumerate(labelled.select("run_id", "label").iter_rows()):
        row = left_join(categories, scores.filter(pl.col("run_id") == run_id),
                        ["category", "separate"])
        ax.bar([j + i * width for j in range(len(names))],
               row.get_column("accuracy").fill_null(float("nan")).to_list(), width,
               yerr=error_bars(row, "accuracy"), label=label,
               error_kw={"elinewidth": 0.8, "ecolor": "dimgray", "capsize": 2})
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, rotation=30,
                  ha="right")
    ax.set(title="Accuracy per category", xlabel="category",
           ylabel=accuracy_label(summary),
           ylim=(0, 1.05))
    _legend(ax)


def requests_in_flight(ax: Axes, summary: Summary) -> None:
    ax.set(title="Requests in flight per engine replica", xlabel="seconds since the first call",
           ylabel="requests in flight")
    calls = summary.engine_calls
    if calls.is_empty():  # every call answered by the request cache
        _no_data(ax)
        return
    first = float(calls.get_column("start").min())  # type: ignore[arg-type]
    for (backbone, replica), one in calls.sort("backbone", "replica").group_by(
            "backbone", "replica", maintain_order=True):
        times, counts = in_flight(one["start"].to_list(), one["end"].to_list())
        ax.step(times - first, counts, where="post", label=f"{backbone} #{replica}")
    _legend(ax)


FIGURES: dict[str, Callable[[Axes, Summary], None]] = {
    "accuracy_vs_top_k": accuracy_vs_top_k,
    "accuracy_vs_budget": accuracy_vs_budget,
    "tokens_by_stage": tokens_by_stage,
    "accuracy_by_category": accuracy_by_category,
    "recall_vs_k": recall_vs_k,
    "requests_in_flight": requests_in_flight,
}


def write_figures(summary: Summary, out: Path) -> dict[str, Path]:
    """Every figure of FIGURES as `<out>/<name>.png`, and accuracy and tokens against each
    test-time axis the runs vary (`accuracy_vs_steps`, `tokens_vs_reasoning_budget`)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    axes = {f"{kind}_vs_{axis}": make(axis) for axis in varied_axes(summary)
            for kind, make in (("accuracy", accuracy_vs), ("tokens", tokens_vs))}
    for name, draw in {**FIGURES, **axes}.items():
        figure = Figure(figsize=(8, 5), layout="constrained")
        FigureCanvasAgg(figure)
        draw(figure.add_subplot(), summary)
        paths[name] = out / f"{name}.png"
        figure.savefig(paths[name], dpi=100, bbox_inches="tight")  # the legend sits outside
    return paths
