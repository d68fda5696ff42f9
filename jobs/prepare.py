"""Convert a benchmark into canonical Parquet: messages, questions and a manifest.

    python -m jobs.prepare --benchmark locomo --source ../shared/datasets/locomo/locomo10_dev.json
    python -m jobs.prepare --benchmark synthetic --size 2000 --seed 0 \\
        [--variant native-revisions|revisions=2]
    python -m jobs.prepare --benchmark longmemeval --source longmemeval_s.json --variant revisions=2

A variant is written beside its base, never over it: `datasets/prepared/longmemeval-revisions-2`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from jobs._cli import add_source_args, load_request, run_main
from tmem_core.benchmarks import DEFAULT_OUT, prepare, read_prepared


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.prepare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_args(parser)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output root folder")
    parser.add_argument("--name", help="folder name under --out (default: the benchmark name, "
                                       "and its variant unless base: synthetic-revisions-2)")
    args = parser.parse_args()
    started = time.perf_counter()
    target = prepare(args.benchmark, load_request(args), args.out, folder=args.name)
    print_summary(target, time.perf_counter() - started)
    return 0


def print_summary(target: Path, seconds: float) -> None:
    manifest = read_prepared(target).manifest
    print(f"{manifest['benchmark']}: {manifest['messages']} messages, {manifest['questions']} "
          f"questions, {len(manifest['conversations'])} conversations -> {target} "
          f"({seconds:.1f}s)")
    print("  categories: " + ", ".join(f"{k}={v}" for k, v in manifest["categories"].items()))
    chains = manifest.get("revision_chains")
    if chains:
        written = chains["writer_stats"]
        cost = (f", {written['calls']} calls, {written['prompt_tokens']} + "
                f"{written['completion_tokens']} tokens, {written['failed']} chains fell back "
                f"to templates" if written else "")
        print(f"  revision chains (condition {chains['condition']}, {chains['writer']}{cost}): "
              f"{chains['questions']} questions, {chains['injected']} injected messages, "
              f"{chains['mean_injected_per_question']:.2f} per question; "
              f"{len(chains['skipped'])} skipped (no gold evidence)")
    if manifest["repairs"]:
        print(f"  repaired references: {len(manifest['repairs'])}")
    for warning in manifest["warnings"][:10]:
        print(f"  warning: {warning}")
    if len(manifest["warnings"]) > 10:
        print(f"  ... {len(manifest['warnings']) - 10} more warnings in manifest.json")


if __name__ == "__main__":
    run_main(main)
