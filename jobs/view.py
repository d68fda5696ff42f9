"""Browse a sweep's results in the browser: runs, questions, forests, verdicts, LLM calls.

    python -m jobs.view results/<sweep> [--port 8765]

Serves on 127.0.0.1 only and reads only what the sweep wrote; a sweep still running shows
what has landed. `python -m jobs.report results/<sweep> --html` writes the same pages as one
self-contained file that opens from disk.
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
    parser.add_argument("sweep", type=Path, help="a sweep folder: results/<sweep>")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any)")
    args = parser.parse_args()
    app = viewer_app(args.sweep)
    print(f"viewing {args.sweep} at http://{HOST}:{args.port}/ (Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=HOST, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    run_main(main)
