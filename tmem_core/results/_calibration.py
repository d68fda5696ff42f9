"""Judge calibration: each judge's verdicts on control answers built from the run's own
questions (`tmem_core.evaluation.ControlPool`: the gold, a paraphrase, another question's
gold, a superseded value, a shifted date, a made-up answer to an unanswerable question, the
right and a wrong letter), before its accuracy is believed.

Per judge and control kind, the rate a reliable judge keeps high: the share judged correct
for a positive kind (TPR), judged wrong for a negative one (TNR). Each (judge, kind) is
`reliable`, `unreliable` (rate below `RELIABLE_RATE`) or `not calibrated` (no scored control
of that kind); a judge is unreliable on a run when any of its kinds is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from tmem_core.evaluation import KINDS

RELIABLE_RATE = 0.8
RELIABLE, UNRELIABLE, NOT_CALIBRATED = "reliable", "unreliable", "not calibrated"
CALIBRATION_COLUMNS = ["run_id", "judge", "control", "expected", "controls", "rate", "status"]


@dataclass(frozen=True)
class KindRate:
    """A judge's rate on one control kind (None: not calibrated)."""

    control: str
    rate: float | None
    controls: int

    @property
    def status(self) -> str:
        if self.rate is None:
            return NOT_CALIBRATED
        return RELIABLE if self.rate >= RELIABLE_RATE else UNRELIABLE

    def describe(self) -> str:
        name = "TPR" if KINDS[self.control] else "TNR"
        rate = "–" if self.rate is None else f"{self.rate:.2f}"
        return f"{self.control} {name} {rate} of {self.controls}"


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
    `expected` verdict, `controls` scored, `rate` (TPR or TNR; null when none) and `status`,
    from the latest successful control records (`run_id, judge, control, score`)."""
    scored = controls.filter(pl.col("score").is_not_null()).join(
        pl.DataFrame({"control": list(KINDS), "expected": list(KINDS.values())}),
        on="control")
    rates = scored.group_by("run_id", "judge", "control").agg(
        pl.len().cast(pl.Int64).alias("controls"),
        (1 - (pl.col("score") - pl.col("expected")).abs()).mean().alias("rate"))
    grid = runs.select("run_id", pl.col("judges").str.split(",").alias("judge")).explode(
        "judge").join(pl.DataFrame({"control": list(KINDS),
                                    "expected": list(KINDS.values())}), how="cross")
    table = grid.join(rates, on=["run_id", "judge", "control"], how="left").with_columns(
        pl.col("controls").fill_null(0))
    status = (pl.when(pl.col("rate").is_null()).then(pl.lit(NOT_CALIBRATED))
              .when(pl.col("rate") >= RELIABLE_RATE).then(pl.lit(RELIABLE))
              .otherwise(pl.lit(UNRELIABLE)))
    order = {kind: i for i, kind in enumerate(KINDS)}
    return (table.with_columns(status.alias("status"),
                               pl.col("control").replace_strict(order).alias("order"))
            .sort("run_id", "judge", "order").select(CALIBRATION_COLUMNS))


def judges_status(table: pl.DataFrame) -> pl.DataFrame:
    """Per run, from `calibration`: `judges_reliable` (no judge unreliable on any kind),
    `unreliable_judges`, and `uncalibrated` (the `judge:kind` pairs without a control)."""
    return table.group_by("run_id", maintain_order=True).agg(
        (pl.col("status") != UNRELIABLE).all().alias("judges_reliable"),
        pl.col("judge").filter(pl.col("status") == UNRELIABLE).unique(maintain_order=True)
        .alias("unreliable_judges"),
        pl.format("{}:{}", "judge", "control").filter(pl.col("status") == NOT_CALIBRATED)
        .alias("uncalibrated"))


def judge_calibrations(controls: pa.Table, judges: Sequence[str]) -> list[JudgeCalibration]:
    """One run's calibration per judge (`judges`), from its latest successful control
    records."""
    frame = pl.DataFrame(controls.select(["run_id", "judge", "control", "score"]))
    runs = pl.DataFrame({"run_id": ["run"], "judges": [",".join(judges)]})
    table = calibration(frame.with_columns(run_id=pl.lit("run")), runs)
    return [JudgeCalibration(judge, tuple(KindRate(r["control"], r["rate"], r["controls"])
                                          for r in group.iter_rows(named=True)))
            for (judge,), group in table.group_by("judge", maintain_order=True)]
