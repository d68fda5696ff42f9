"""Results and reports of sweeps: polars tables, Markdown, PNG figures, Parquet summaries.

    files = write_report(Path("results/my-sweep"))            # -> results/my-sweep/report/
    summary = summarise(read_sweep(Path("results/my-sweep")))  # polars frames
"""

from tmem_core.reports._compare import Comparison, compare, compare_sweeps, comparisons
from tmem_core.reports._markdown import Report
from tmem_core.reports._plots import FIGURES, run_labels, write_figures
from tmem_core.reports._report import REPORT_DIR, REPORT_FILE, ReportFiles, write_report
from tmem_core.reports._summary import Summary, summarise
from tmem_core.results import (
    ALL_JUDGES,
    OVERALL,
    SweepResults,
    overall_accuracy,
    read_sweep,
    score_accuracy,
)

__all__ = [
    "ALL_JUDGES",
    "FIGURES",
    "OVERALL",
    "REPORT_DIR",
    "REPORT_FILE",
    "Comparison",
    "Report",
    "ReportFiles",
    "Summary",
    "SweepResults",
    "compare",
    "compare_sweeps",
    "comparisons",
    "overall_accuracy",
    "read_sweep",
    "run_labels",
    "score_accuracy",
    "summarise",
    "write_figures",
    "write_report",
]
