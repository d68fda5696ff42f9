"""Report on a sweep: Markdown tables, PNG figures and Parquet summaries.

    python -m jobs.report results/<sweep> [--out DIR] [--baseline results/<other>] [--html]

Writes report.md, one PNG per figure and one Parquet file per table into DIR (default
`results/<sweep>/report/`). With --baseline, runs matched by config get deltas against the
other sweep. With --html, also viewer.html: the results viewer (`jobs.view`) as one
self-contained file that opens from disk. Table and figure definitions: results/README.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jobs._cli import run_main
from tmem_core.reports import write_report
from tmem_core.viewer import VIEWER_FILE, export_html


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path, help="a sweep folder: results/<sweep>")
    parser.add_argument("--out", type=Path, help="output folder (default: <sweep>/report)")
    parser.add_argument("--baseline", type=Path, help="another sweep folder to compare with")
    parser.add_argument("--html", action="store_true",
                        help=f"also write {VIEWER_FILE}, the viewer as one self-contained file")
    args = parser.parse_args()
    files = write_report(args.sweep, args.out, args.baseline)
    print(f"wrote {files.markdown} ({len(files.figures)} figures, {len(files.tables)} tables)")
    if args.html:
        folder = files.markdown.parent
        print(f"wrote {export_html(args.sweep, folder / VIEWER_FILE, folder)}")
    return 0


if __name__ == "__main__":
    run_main(main)
