"""Write a sweep's report folder: report.md, one PNG per figure, Parquet summaries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tmem_core.reports._compare import comparisons
from tmem_core.reports._markdown import Report
from tmem_core.reports._plots import write_figures
from tmem_core.reports._summary import summarise
from tmem_core.results._sweep import read_sweep

REPORT_DIR = "report"
REPORT_FILE = "report.md"


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    figures: dict[str, Path]
    tables: dict[str, Path]


def write_report(sweep: Path, out: Path | None = None, baseline: Path | None = None
                 ) -> ReportFiles:
    """Report on the sweep folder `sweep` into `out` (default `<sweep>/report/`)."""
    out = out or sweep / REPORT_DIR
    results = read_sweep(sweep)
    summary = summarise(results)
    base_runs = summarise(read_sweep(baseline)).runs if baseline else None
    compared = comparisons(summary.runs, base_runs)
    tables = summary.write_parquet(out)
    for c in compared:
        tables[f"compare_{c.name}"] = out / f"compare_{c.name}.parquet"
        c.table.write_parquet(tables[f"compare_{c.name}"])
    figures = write_figures(summary, out)
    title = f"Sweep {results.name}"
    header = [f"`{sweep}`, {summary.runs.height} runs, generated "
              f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"]
    if baseline:
        header.append(f"baseline: `{baseline}`")
    markdown = out / REPORT_FILE
    markdown.write_text(Report(summary, title).render(figures, compared, header))
    return ReportFiles(markdown, figures, tables)
