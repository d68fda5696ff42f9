"""Judge calibration: each judge's verdicts on control answers built from the run's own
questions (`tmem_core.evaluation.ControlPool`: the gold, a paraphrase, another question's
gold, a superseded value, a shifted date, a made-up answer to an unanswerable question, the
right and a wrong letter), before its accuracy is believed.

Per judge and control kind, the rate a reliable judge keeps high: the share judged correct
for a positive kind (TPR), judged wrong for a negative one (TNR), with its Wilson 95%
interval. Only the controls the judge's LLM scored count (`scored_by` "llm"): a control
the benchmark scores by rule (LoCoMo's not-mentioned rule on an adversarial question, an
exact option letter) says nothing of the LLM and is counted apart (`rule_controls`,
`rule_rate`), never in its rate.

Each (judge, kind) is `not calibrated` below `MIN_CONTROLS` LLM-scored controls, else
`reliable` when its interval's lower bound reaches `RELIABLE_RATE`, else `unreliable`; a
judge is unreliable on a run when any of its kinds is. The lower bound, not the point
estimate, decides: a judge whose true rate sits just below the bar passes a point-estimate
test about half the time at any n, the lower bound lets it pass at most 2.5% of the time,
and it needs no second, arbitrary minimum n. `MIN_CONTROLS` follows from the bar: the fewest
controls whose lower bound can reach it when every one is right (16 for 0.8), so a kind is
never called unreliable only for having too few controls to pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from tmem_core.evaluation import KINDS
from tmem_core.results._wilson import Z95, wilson

RELIABLE_RATE = 0.8
MIN_CONTROLS = math.ceil(Z95 * Z95 * RELIABLE_RATE / (1 - RELIABLE_RATE))
"""n / (n + z^2), the lower bound of n right of n, reaches RELIABLE_RATE from here on."""
LLM = "llm"  # `scored_by` of a verdict the judge's LLM gave
RELIABLE, UNRELIABLE, NOT_CALIBRATED = "reliable", "unreliable", "not calibrated"
CALIBRATION_COLUMNS = ["run_id", "judge", "control", "expected", "controls", "rate", "ci_low",
                       "ci_high", "status", "rule_controls", "rule_rate"]


def status_of(right: int, controls: int) -> str:
    """A kind's status from its LLM-scored controls and how many of them the judge got
    right (see the module docstring)."""
    if controls < MIN_CONTROLS:
        return NOT_CALIBRATED
    low = wilson(right, controls).low
    return RELIABLE if low is not None and low >= RELIABLE_RATE else UNRELIABLE


@dataclass(frozen=True)
class KindRate:
    """A judge's rate on one control kind: `right` of `controls` LLM-scored ones, with
    `rule_controls` scored by rule apart."""

    control: str
    right: int
    controls: int
    rule_controls: int = 0

    @property
    def rate(self) -> float | None:
        return self.right / self.controls if self.controls else None

    @property
    def status(self) -> str:
        return status_of(self.right, self.controls)

    def describe(self) -> str:
        name = "TPR" if KINDS[self.control] else "TNR"
        ci = wilson(self.right, self.controls)
        rate = ("–" if self.rate is None or ci.low is None or ci.high is None
                else f"{self.rate:.2f} [{ci.low:.2f}, {ci.high:.2f}]")
        ruled = f" (+{self.rule_controls} by rule)" if self.rule_controls else ""
        return f"{self.control} {name} {rate} of {self.controls}{ruled}"


@dataclass(frozen=True)
class JudgeCalibration:
    """One judge's rates on one run's controls, per kind."""

    judge: str
    kinds: tuple[KindRate, ...]

    @property
    def reliable(self) -> bool:
        return all(k.status != UNRELIABLE for k in self.kinds)

    def of(self, status: str) -> list[KindRate]:
        return [k for k in self.kinds if k.status == status]

    def describe(self) -> str:
        shown = self.of(UNRELIABLE) or self.of(RELIABLE)
        return (f"judge {self.judge} {'reliable' if self.reliable else 'UNRELIABLE'}: "
                f"{', '.join(k.describe() for k in shown)}")


def calibration(controls: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Per run, judge (`runs.judges`, comma-joined) and control kind, every kind listed:
    `expected` verdict; `controls` the judge's LLM scored, their `rate` (TPR or TNR; null
    when none) and Wilson interval (`ci_low`, `ci_high`), `status`; `rule_controls` scored
    by rule and their `rule_rate`, apart; from the latest successful control records (`run_id,
    judge, control, score, scored_by`)."""
    table = _counts(controls, runs)
    found = [(wilson(r, n), status_of(r, n))
             for r, n in table.select("right", "controls").iter_rows()]
    order = {kind: i for i, kind in enumerate(KINDS)}
    return table.with_columns(
        pl.when(pl.col("controls") > 0).then(pl.col("right") / pl.col("controls")).alias("rate"),
        pl.Series("ci_low", [ci.low for ci, _ in found], pl.Float64),
        pl.Series("ci_high", [ci.high for ci, _ in found], pl.Float64),
        pl.Series("status", [status for _, status in found], pl.String),
        pl.col("control").replace_strict(order).alias("order"),
    ).sort("run_id", "judge", "order").select(CALIBRATION_COLUMNS)


def _counts(controls: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Per run, judge and kind: `controls` scored by the LLM, `right` of them, and those
    scored by rule apart (`rule_controls`, `rule_rate`); records of unknown `scored_by` (written
    before it was recorded) in neither."""
    kinds = pl.DataFrame({"control": list(KINDS), "expected": list(KINDS.values())})
    scored = controls.filter(pl.col("score").is_not_null()).join(kinds, on="control")
    right = pl.col("score") == pl.col("expected")
    by_llm, by_rule = pl.col("scored_by") == LLM, pl.col("scored_by") != LLM
    counts = scored.group_by("run_id", "judge", "control").agg(
        by_llm.sum().cast(pl.Int64).alias("controls"),
        right.filter(by_llm).sum().cast(pl.Int64).alias("right"),
        by_rule.sum().cast(pl.Int64).alias("rule_controls"),
        right.filter(by_rule).mean().alias("rule_rate"))
    grid = runs.select("run_id", pl.col("judges").str.split(",").alias("judge")).explode(
        "judge").join(kinds, how="cross")
    return grid.join(counts, on=["run_id", "judge", "control"], how="left",
                     maintain_order="left").with_columns(
        pl.col("controls", "right", "rule_controls").fill_null(0))


def judges_status(table: pl.DataFrame) -> pl.DataFrame:
    """Per run, from `calibration`: `judges_reliable` (no judge unreliable on any kind),
    `unreliable_judges`, and `uncalibrated` (the `judge:kind` pairs with too few LLM-scored
    controls)."""
    return table.group_by("run_id", maintain_order=True).agg(
        (pl.col("status") != UNRELIABLE).all().alias("judges_reliable"),
        pl.col("judge").filter(pl.col("status") == UNRELIABLE).unique(maintain_order=True)
        .alias("unreliable_judges"),
        pl.format("{}:{}", "judge", "control").filter(pl.col("status") == NOT_CALIBRATED)
        .alias("uncalibrated"))


def judge_calibrations(controls: pa.Table, judges: Sequence[str]) -> list[JudgeCalibration]:
    """One run's calibration per judge (`judges`), from its latest successful control
    records."""
    frame = pl.DataFrame(controls.select(["run_id", "judge", "control", "score", "scored_by"]))
    runs = pl.DataFrame({"run_id": ["run"], "judges": [",".join(judges)]})
    table = _counts(frame.with_columns(run_id=pl.lit("run")), runs)
    return [JudgeCalibration(judge, tuple(
                KindRate(r["control"], r["right"], r["controls"], r["rule_controls"])
                for r in group.iter_rows(named=True)))
            for (judge,), group in table.group_by("judge", maintain_order=True)]
