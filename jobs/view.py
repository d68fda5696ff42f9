"""Browse a sweep's results in the browser: runs, questions, forests, verdicts, LLM calls.

    python -m jobs.view results/<sweep> [--port 8765]
    python -m jobs.view --audit results/annotation/<name>   # the evidence audit page

Serves on 127.0.0.1 only and reads only what the sweep wrote; a sweep still running shows
what has landed. `python -m jobs.report results/<sweep> --html` writes the same pages as one
self-contained file that opens from disk. `--audit FOLDER` adds the audit page of a
`jobs.annotate` folder at /audit: its low-confidence evidence units, each accepted or rejected,
every decision written into the folder's audit.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import uvicorn

from jobs._cli import run_main
from tmem_core.viewer import HOST, viewer_app


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.view", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path, nargs="?", help="a sweep folder: results/<sweep>")
    parser.add_argument("--audit", type=Path, help="an annotation folder (jobs.annotate)")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any)")
    args = parser.parse_args()
    if args.sweep is None and args.audit is None:
        parser.error("give a sweep folder, --audit FOLDER, or both")
    app = viewer_app(args.sweep, args.audit)
    shown = " and ".join(str(p) for p in (args.sweep, args.audit) if p is not None)
    print(f"viewing {shown} at http://{HOST}:{args.port}/ (Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=HOST, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    run_main(main)
