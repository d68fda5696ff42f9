"""Cells of the Markdown report's tables: numbers, signed deltas, values with intervals."""

from __future__ import annotations

import math

import polars as pl


def fmt(value: object) -> str:
    """A table cell: 4 significant digits below 100, whole numbers above, `–` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.4g}"


def with_ci(value: float | None, low: float | None, high: float | None,
            sign: bool = False) -> str:
    """`value [low, high]`, signed with `sign` (no interval: the value alone)."""
    show = signed if sign else fmt
    if value is None or low is None or high is None:
        return show(value)
    return f"{show(value)} [{show(low)}, {show(high)}]"


def ci_cell(value: str, low: str = "ci_low", high: str = "ci_high") -> pl.Expr:
    """The column `value` with its interval, as text."""
    return pl.struct(value, low, high).map_elements(
        lambda s: with_ci(s[value], s[low], s[high]), return_dtype=pl.String)


def markdown_table(frame: pl.DataFrame) -> list[str]:
    if frame.is_empty():
        return ["(none)", ""]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * frame.width]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.iter_rows()]
    return [*lines, ""]
