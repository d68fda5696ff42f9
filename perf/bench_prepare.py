"""Prepare-time benchmark: synthetic at 120,000 messages and the shared LoCoMo file.

    python perf/bench_prepare.py [--size 120000] [--locomo PATH]

Each case runs in a fresh subprocess so that peak RSS is its own. Target: 120k messages in
under 30 s and under 2 GiB on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10_dev.json"


def timed(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (GiB) of `python -m jobs.prepare ARGS` in a child process."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "jobs.prepare", *args], cwd=ROOT,
                             stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the maximum of all
    wall = time.perf_counter() - started
    if status:
        raise SystemExit(f"jobs.prepare {' '.join(args)} failed")
    return wall, usage.ru_maxrss / 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=120_000)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        wall, rss = timed(["--benchmark", "synthetic", "--size", str(args.size), "--out", out])
        print(f"synthetic {args.size} messages: {wall:.2f} s wall, peak RSS {rss:.2f} GiB "
              f"(target < 30 s, < 2 GiB): {'OK' if wall < 30 and rss < 2 else 'MISSED'}")
        if args.locomo.exists():
            wall, rss = timed(["--benchmark", "locomo", "--source", str(args.locomo),
                               "--out", out])
            print(f"locomo ({args.locomo.name}): {wall:.2f} s wall, peak RSS {rss:.2f} GiB")


if __name__ == "__main__":
    main()
