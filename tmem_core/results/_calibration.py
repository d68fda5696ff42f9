"""Judge calibration: each judge's verdicts on control answers built from the run's own
questions, before its accuracy is believed.

For every judged question, each judge also scores two controls: the question's gold answer
given as the prediction (`gold`: must be judged correct) and the gold answer of another
question whose normalised text differs, of the same category where the benchmark has one
(`other`: must be judged wrong).
A judge whose true-positive or true-negative rate is below `RELIABLE_RATE` is unreliable.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pyarrow as pa

RELIABLE_RATE = 0.8
CONTROLS = ("gold", "other")
CALIBRATION_COLUMNS = ["run_id", "judge", "tpr", "positives", "tnr", "negatives", "reliable"]


@dataclass(frozen=True)
class JudgeCalibration:
    """One judge's rates on one run's controls (None where it had no control of a kind)."""

    judge: str
    tpr: float | None
    positives: int
    tnr: float | None
    negatives: int

    @property
    def reliable(self) -> bool:
        return all(rate is None or rate >= RELIABLE_RATE for rate in (self.tpr, self.tnr))

    def describe(self) -> str:
        return (f"judge {self.judge} {'reliable' if self.reliable else 'UNRELIABLE'}: "
                f"{_rate('TPR', self.tpr, self.positives)}, "
                f"{_rate('TNR', self.tnr, self.negatives)}")


def calibration(controls: pl.DataFrame) -> pl.DataFrame:
    """Per run and judge, from the latest successful control records (`run_id, judge,
    control, score`): `tpr` over `positives` gold controls, `tnr` over `negatives` others."""
    scored = controls.filter(pl.col("score").is_not_null())
    rates = scored.group_by("run_id", "judge").agg(
        pl.col("score").filter(pl.col("control") == "gold").mean().alias("tpr"),
        (pl.col("control") == "gold").sum().cast(pl.Int64).alias("positives"),
        (1 - pl.col("score").filter(pl.col("control") == "other")).mean().alias("tnr"),
        (pl.col("control") == "other").sum().cast(pl.Int64).alias("negatives"))
    reliable = (pl.col("tpr").fill_null(1.0) >= RELIABLE_RATE) & (
        pl.col("tnr").fill_null(1.0) >= RELIABLE_RATE)
    return rates.with_columns(reliable.alias("reliable")).select(CALIBRATION_COLUMNS).sort(
        "run_id", "judge")


def judge_calibrations(controls: pa.Table) -> list[JudgeCalibration]:
    """One run's calibration per judge, from its latest successful control records."""
    frame = pl.DataFrame(controls.select(["run_id", "judge", "control", "score"]))
    return [JudgeCalibration(r["judge"], r["tpr"], r["positives"], r["tnr"], r["negatives"])
            for r in calibration(frame).iter_rows(named=True)]


def _rate(name: str, rate: float | None, count: int) -> str:
    return f"{name} {'–' if rate is None else f'{rate:.2f}'} of {count}"
