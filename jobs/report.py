"""Report on a sweep: Markdown tables, PNG figures and Parquet summaries.

    python -m jobs.report results/<sweep> [--out DIR] [--baseline results/<other>]

Writes report.md, one PNG per figure and one Parquet file per table into DIR (default
`results/<sweep>/report/`). With --baseline, runs matched by config get deltas against the
other sweep. Table and figure definitions: results/README.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jobs._cli import run_main
from tmem_core.reports import write_report


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path, help="a sweep folder: results/<sweep>")
    parser.add_argument("--out", type=Path, help="output folder (default: <sweep>/report)")
    parser.add_argument("--baseline", type=Path, help="another sweep folder to compare with")
    args = parser.parse_args()
    files = write_report(args.sweep, args.out, args.baseline)
    print(f"wrote {files.markdown} ({len(files.figures)} figures, {len(files.tables)} tables)")
    return 0


if __name__ == "__main__":
    run_main(main)
