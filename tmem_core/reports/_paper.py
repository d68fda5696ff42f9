"""The paper's figures beside ours: the bundled table (the newest `paper_figures.v<N>.toml`,
whose header documents the match key) and the runs of a sweep that match each figure."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl

from tmem_core.reports._chains import chain_facts
from tmem_core.results._accuracy import SELF, judged_by


def _newest_table(folder: Path) -> Path:
    """The highest version of the bundled table (versions are never edited, only added)."""
    tables = {int(m[1]): p for p in folder.glob("paper_figures.v*.toml")
              if (m := re.fullmatch(r"paper_figures\.v(\d+)\.toml", p.name))}
    return tables[max(tables)]


FIGURES_FILE = _newest_table(Path(__file__).resolve().parent)
Metric = Literal["accuracy", "recall", "selection_recall", "margin", "gain", "loss", "tokens_m",
                 "cost_usd"]
PERCENT = ("accuracy", "recall", "selection_recall")  # fractions in the runs table
ANY_BENCHMARK = "*"  # the summary does not name the benchmark: any matches, loosely
METRICS: tuple[str, ...] = get_args(Metric)
RELATIVE = ("gain", "loss")  # against the run of the figure's `reference` method
SETTING = ("dataset", "backbone", "top_k", "budget")  # what "the same setting" shares
PAPER_JUDGE = SELF
"""Who judged the bundled figures' answers: the answer model itself, in separate calls (T-MEM
§C.3). A figure on accuracy (`JUDGED`) is set only beside a run judged so, and compares it
only with runs judged so; a run judged otherwise (or pooled over judges) gets none."""
JUDGED = ("accuracy", "margin", "gain", "loss")
# (run_id, metric) -> our interval for that figure, in the metric's unit; None: none yet
Interval = Callable[[str, str], tuple[float, float] | None]
PAPER_SCHEMA = pl.Schema({
    "run_id": pl.String, "figure": pl.String, "experiment": pl.String, "section": pl.String,
    "setting": pl.String, "paper_method": pl.String, "metric": pl.String, "ours": pl.Float64,
    "paper": pl.Float64, "difference": pl.Float64, "match": pl.String,
    "inside_interval": pl.Boolean})


@dataclass(frozen=True)
class PaperFigure:
    """One figure of the paper with its setting and match key (None: not stated)."""

    id: str
    experiment: str
    section: str
    setting: str
    metric: str
    value: float
    paper_method: str
    method: str  # ours implementing it; "": none yet
    benchmark: str  # "*": not named, matches any (loose); "": matches no run
    answer_model: str | None = None
    top_k: int | None = None
    budget: int | None = None
    condition: int | None = None
    reference: str | None = None
    categories: tuple[str, ...] = ()  # the question types the run keeps (empty: any)

    def match(self, run: Mapping[str, Any], condition: int | None) -> str | None:
        """"exact", "loose" (a key field the summary leaves out) or None."""
        if not self.method or self.method != run["method"] or self.benchmark not in (
                run["benchmark"], ANY_BENCHMARK):
            return None
        given = [(self.answer_model, _model(run["backbone"])), (self.top_k, run["top_k"]),
                 (self.budget, run["budget"]), (self.condition, condition)]
        if any(want is not None and (_model(want) if isinstance(want, str) else want) != have
               for want, have in given) or not self._same_types(run.get("categories")):
            return None
        unstated = self.benchmark == ANY_BENCHMARK or any(want is None for want, _ in given[:3])
        return "loose" if unstated else "exact"

    def _same_types(self, kept: str | None) -> bool:
        """The run keeps exactly the figure's question types (any, when it names none)."""
        types = {c.lower().replace("-", "_") for c in (kept or "").split(",") if c}
        return not self.categories or types == set(self.categories)


def _model(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@cache
def paper_figures(path: Path = FIGURES_FILE) -> tuple[PaperFigure, ...]:
    """The bundled table, checked: known metrics, a reference for relative ones, unique ids."""
    raw = tomllib.loads(path.read_text())
    known = {f.name for f in fields(PaperFigure)}
    figures = []
    for row in raw["figure"]:
        if set(row) - known or row["metric"] not in METRICS or (
                (row["metric"] in RELATIVE) != ("reference" in row)):
            raise ValueError(f"{path.name}: figure {row.get('id')!r} is malformed")
        fields_: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                   for k, v in row.items()}
        figures.append(PaperFigure(**fields_))
    if len({f.id for f in figures}) != len(figures):
        raise ValueError(f"{path.name}: figure ids repeat")
    return tuple(figures)


def paper_table(runs: pl.DataFrame, interval: Interval | None = None) -> pl.DataFrame:
    """One row per (run, paper figure) match: our value, the paper's, their difference and,
    once `interval` gives ours, whether the paper's figure lies inside it; a figure on
    accuracy matches only runs judged as the paper judged (`PAPER_JUDGE`)."""
    rows = runs.to_dicts()
    conditions = {r["run_id"]: _condition(r.get("data_dir")) for r in rows}
    paper_judged = [r for r in rows if r.get("judges")
                    and judged_by(r["judges"].split(","), r["backbone"]) == PAPER_JUDGE]
    out = []
    for figure in paper_figures():
        pool = paper_judged if figure.metric in JUDGED else rows
        for run in pool:
            kind = figure.match(run, conditions[run["run_id"]])
            if kind is None:
                continue
            ours, kind = (_margin(run, pool, kind) if figure.metric == "margin"
                          else (_ours(figure, run, pool), kind))
            bounds = interval(run["run_id"], figure.metric) if interval else None
            inside = None if bounds is None else bounds[0] <= figure.value <= bounds[1]
            out.append({
                "run_id": run["run_id"], "figure": figure.id, "experiment": figure.experiment,
                "section": figure.section, "setting": figure.setting,
                "paper_method": figure.paper_method, "metric": figure.metric, "ours": ours,
                "paper": figure.value, "difference": None if ours is None else ours - figure.value,
                "match": kind, "inside_interval": inside})
    return pl.DataFrame(out, schema=PAPER_SCHEMA)


def run_intervals(runs: pl.DataFrame) -> Interval:
    """Our 95% interval of each run's accuracy and recall (the `runs` table's `<metric>_low`
    and `<metric>_high`), in the paper's unit."""
    bounds: dict[tuple[str, str], tuple[float, float]] = {}
    for run in runs.to_dicts():
        for metric in ("accuracy", "recall"):
            low, high = _percent(run.get(f"{metric}_low")), _percent(run.get(f"{metric}_high"))
            if low is not None and high is not None:
                bounds[run["run_id"], metric] = (low, high)
    return lambda run_id, metric: bounds.get((run_id, metric))


def _ours(figure: PaperFigure, run: Mapping[str, Any], runs: list[dict[str, Any]]
          ) -> float | None:
    """Our figure in the paper's unit (percent and points for accuracy and recalls)."""
    if figure.metric in PERCENT:
        return _percent(run[figure.metric])
    if figure.metric == "tokens_m":
        return None if run.get("tokens") is None else run["tokens"] / 1e6
    if figure.metric == "cost_usd":
        return run.get("method_cost_usd")
    same = _same_setting(run, runs)
    accuracy = _percent(run["accuracy"])
    if accuracy is None:
        return None
    reference = [a for r in same if r["method"] == figure.reference
                 and (a := _percent(r["accuracy"])) is not None]
    if not reference:
        return None
    return accuracy - reference[0] if figure.metric == "gain" else reference[0] - accuracy


def _same_setting(run: Mapping[str, Any], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in runs if all(r[k] == run[k] for k in SETTING) and r is not run]


@cache
def paper_comparators(path: Path = FIGURES_FILE) -> dict[str, str]:
    """The paper's comparator set for margins: each baseline and our method implementing it
    ("": none does yet), the table's `[comparators]`."""
    return {name: str(method) for name, method in
            tomllib.loads(path.read_text()).get("comparators", {}).items()}


def _margin(run: Mapping[str, Any], runs: list[dict[str, Any]], kind: str
            ) -> tuple[float | None, str]:
    """T-MEM's margin over the best of the paper's comparators in the run's setting, with its
    match: `kind` only when the sweep ran all of them; else over those it ran (none: over every
    other method but T-MEM's variants), "loose: compared against <methods>"."""
    accuracy = {r["method"]: a for r in _same_setting(run, runs)
                if (a := _percent(r["accuracy"])) is not None}
    wanted = paper_comparators()
    ran = sorted({m for m in wanted.values() if m in accuracy})
    against = ran or sorted(m for m in accuracy if not m.startswith("tmem"))
    ours = _percent(run["accuracy"])
    value = None if ours is None or not against else ours - max(accuracy[m] for m in against)
    if all(m in accuracy for m in wanted.values()):  # "" (none of ours) never is
        return value, kind
    return value, f"loose: compared against {', '.join(against) or 'no other method'}"


def _percent(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _condition(data_dir: str | None) -> int | None:
    """Exp-5's revision condition of a prepared benchmark, from its manifest."""
    value = chain_facts(data_dir).get("condition")
    return value if isinstance(value, int) else None
