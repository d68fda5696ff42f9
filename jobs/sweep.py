"""Run a sweep: every run of a config's grid through the Ray pipeline.

    python -m jobs.sweep jobs/configs/default.toml
    ray job submit --working-dir . -- python -m jobs.sweep jobs/configs/default.toml

With no RAY_ADDRESS a local Ray starts; with one the sweep joins that cluster. A re-run of
the same config skips what already succeeded and retries what failed. One driver writes a
sweep at a time: a second one started while the first runs refuses (exit status 2). However
the driver ends (its cluster lost, a signal), its last line says which questions landed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from jobs._cli import run_main
from tmem_core import ConfigError
from tmem_core.llm import EngineUnavailable
from tmem_core.pipeline import STATUS_ENV, load_sweep, run_sweep, supervise
from tmem_core.results import LeaseHeld


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path, help="sweep config (TOML or YAML)")
    parser.add_argument("--local", action="store_true",
                        help="run the stages in this process, without Ray (debugging)")
    args = parser.parse_args()
    try:
        config = load_sweep(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.local and STATUS_ENV not in os.environ:  # this process watches the driver
        return supervise([sys.executable, "-m", "jobs.sweep", *sys.argv[1:]])
    print(f"sweep {config.name}: {len(config.runs())} runs -> "
          f"{Path(config.results_dir) / config.name}", flush=True)
    try:
        summaries = run_sweep(config, log=lambda line: print(line, flush=True),
                              local=args.local)
    except (EngineUnavailable, LeaseHeld) as exc:
        # an engine of the sweep that did not start, or another driver writing the sweep
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = sum(sum(s.stage_errors.values()) for s in summaries)
    print(f"sweep {config.name} done: {len(summaries)} runs, {failed} error records", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
