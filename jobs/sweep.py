"""Run a sweep: every run of a config's grid through the Ray pipeline.

    python -m jobs.sweep jobs/configs/default.toml
    ray job submit --working-dir . -- python -m jobs.sweep jobs/configs/default.toml

With no RAY_ADDRESS a local Ray starts; with one the sweep joins that cluster. A re-run of
the same config skips what already succeeded and retries what failed; a stored record whose
dependencies changed since (a backbone's definition, a prompt file, the method's version or
parameters) is redone, or, with `--on-changed refuse` (or `on_changed = "refuse"` in the
config), the sweep refuses to start (exit status 2) naming the run, stage and dependency.
One driver writes a sweep at a time: a second one started while the first runs refuses (exit
status 2). However the driver ends (its cluster lost, a signal), its last line says which
questions landed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from jobs._cli import check_sweep_tokenizers, run_main
from tmem_core.pipeline import STATUS_ENV, load_sweep, run_sweep, supervise
from tmem_core.pipeline._paths import read_paths_from


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path, help="sweep config (TOML or YAML)")
    parser.add_argument("--local", action="store_true",
                        help="run the stages in this process, without Ray (debugging)")
    parser.add_argument("--paths-from", type=Path, metavar="DIR",
                        help="read the config's relative paths (results_dir, benchmark "
                             "sources, backbones and prompt files) from DIR: for `ray job "
                             "submit --working-dir .`, the submitter's checkout (--paths-from "
                             "\"$PWD\"), since the job runs in a copy Ray deletes")
    parser.add_argument("--on-changed", choices=("redo", "refuse"),
                        help="stored records whose dependencies changed: redo them, or refuse "
                             "to run (default: the config's on_changed, else redo)")
    args = parser.parse_args()
    path = args.config.absolute()  # the config itself is where the command names it
    if args.paths_from is not None:
        sys.argv[sys.argv.index(str(args.config))] = str(path)  # for the driver child
        read_paths_from(args.paths_from.absolute())
    config = load_sweep(path)
    check_sweep_tokenizers(config)
    if args.on_changed:
        config = dataclasses.replace(config, on_changed=args.on_changed)
    if not args.local and STATUS_ENV not in os.environ:  # this process watches the driver
        return supervise([sys.executable, "-m", "jobs.sweep", *sys.argv[1:]])
    folder = Path(config.results_dir).absolute() / config.name
    print(f"sweep {config.name}: {len(config.runs())} runs -> {folder}", flush=True)
    summaries = run_sweep(config, log=lambda line: print(line, flush=True), local=args.local)
    failed = sum(sum(s.stage_errors.values()) for s in summaries)
    print(f"sweep {config.name} done: {len(summaries)} runs, {failed} error records; report: "
          f"python -m jobs.report {folder}", flush=True)
    return 0


if __name__ == "__main__":
    # engines that do not fit, start or place, another driver writing the sweep, or stored
    # records made otherwise that the sweep refuses to redo
    run_main(main)
