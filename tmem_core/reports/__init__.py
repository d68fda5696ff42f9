"""Results and reports of sweeps: polars tables, Markdown, PNG figures, Parquet summaries.

    files = write_report(Path("results/my-sweep"))            # -> results/my-sweep/report/
    summary = summarise(read_sweep(Path("results/my-sweep")))  # polars frames
"""

from tmem_core.reports._plots import FIGURES, run_labels
from tmem_core.reports._report import REPORT_DIR, write_report
from tmem_core.reports._summary import Summary, summarise
from tmem_core.results._sweep import read_sweep

__all__ = [
    "FIGURES",
    "REPORT_DIR",
    "Summary",
    "read_sweep",
    "run_labels",
    "summarise",
    "write_report",
]
