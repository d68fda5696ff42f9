"""Comparisons of runs that differ in one config field (or sweep), with deltas."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

CONFIG = ("benchmark", "method", "params", "backbone", "construct_backbone", "judges", "top_k",
          "budget")
COMPARED = ("accuracy", "f1", "recall", "tokens_per_question", "cost_usd", "wall_s")
SWEEP = "sweep"
BASELINE, CURRENT = "baseline", "current"


@dataclass(frozen=True)
class Comparison:
    """Runs that differ only in `axis`, with their metrics and deltas (see `compare`)."""

    name: str  # file stem: compare_<name>.parquet
    title: str
    axis: str
    table: pl.DataFrame


def compare(runs: pl.DataFrame, axis: str, reference: object = None) -> pl.DataFrame:
    """Runs grouped by every config field but `axis`; each with `<metric>_delta` against its
    group's reference run (the one whose `axis` is `reference`, else the smallest value).
    Groups with a single `axis` value compare nothing and are left out."""
    keys = [c for c in CONFIG if c != axis]
    metrics = list(COMPARED)
    ordered = runs.sort(axis)
    refs = (ordered.filter(pl.col(axis) == reference) if reference is not None
            else ordered.group_by(keys, maintain_order=True).first())
    ref_cols = refs.select(*keys, *[pl.col(c).alias(f"{c}_ref") for c in metrics])
    varied = ordered.filter(pl.col(axis).n_unique().over(keys) > 1)
    return varied.join(ref_cols, on=keys, how="inner", nulls_equal=True).select(
        *keys, axis, "run_id", *metrics,
        *[(pl.col(c) - pl.col(f"{c}_ref")).alias(f"{c}_delta") for c in metrics])


def compare_sweeps(current: pl.DataFrame, baseline: pl.DataFrame) -> pl.DataFrame:
    """Runs of two sweeps matched by config; deltas are current minus baseline."""
    both = pl.concat([baseline.with_columns(pl.lit(BASELINE).alias(SWEEP)),
                      current.with_columns(pl.lit(CURRENT).alias(SWEEP))], how="diagonal_relaxed")
    return compare(both, SWEEP, BASELINE).filter(pl.col(SWEEP) == CURRENT)


def comparisons(runs: pl.DataFrame, baseline: pl.DataFrame | None = None) -> list[Comparison]:
    """Across backbones and budgets within the sweep, and against a baseline sweep if given."""
    found = [Comparison("backbone", "Across backbones", "backbone", compare(runs, "backbone")),
             Comparison("budget", "Across token budgets", "budget", compare(runs, "budget"))]
    if baseline is not None:
        found.append(Comparison("baseline", "Against the baseline sweep", SWEEP,
                                compare_sweeps(runs, baseline)))
    return found
