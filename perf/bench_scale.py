"""A GroupMemBench-size sweep on simulated engines: wall time, per-actor peak memory and where
the time goes.

    python perf/bench_scale.py [--size 120000] [--limit 745] [--methods bm25,tmem,t2mem]
                               [--replicas 16] [--actors 2] [--batch-size 16] [--out DIR]
    python perf/bench_scale.py --report DIR   # the figures of a sweep already run (or killed)

The synthetic benchmark at 120,000 messages (4 conversations) with its first 745 questions,
every method on a `sim` backbone of `--replicas` engine replicas (fresh seed: nothing from the
request cache). While the sweep runs, a thread samples the resident memory of every Ray actor
and of the driver every few seconds and keeps each one's peak in `DIR/memory.json`, so a sweep
stopped early still has its figures. Per run: questions landed, the window of its LLM calls
and questions/s over it, and per stage the median and total stage time per question next to
the LLM time inside it (the rest is the method's own CPU work: retrieval, discovery, parsing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
from collections import defaultdict
from pathlib import Path

import psutil
import ray
from bench_sim_cluster import sim_backbones  # the same simulated engine
from ray._private import state as ray_state

from tmem_core.pipeline import STAGES, init_ray, parse_sweep, run_sweep
from tmem_core.results import calls_store, calls_window, run_dirs

SAMPLE_S = 3.0


class PeakMemory:
    """Each live actor's (and the driver's) peak resident memory, in MiB, kept in a file."""

    def __init__(self, path: Path) -> None:
        self.path, self.peaks = path, defaultdict[str, float](float)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample("driver", os.getpid())
            try:  # from the GCS: a local Ray has no dashboard for the state API
                actors = ray_state.actors().values()
            except Exception:  # the cluster is starting or stopping: sample next time
                continue
            for actor in actors:
                if actor.get("State") == "ALIVE":
                    self._sample(actor.get("Name") or actor["ActorClassName"], actor.get("Pid"))
            self.path.write_text(json.dumps(dict(sorted(self.peaks.items())), indent=1))

    def _sample(self, key: str, pid: int | None) -> None:
        try:
            rss = psutil.Process(pid).memory_info().rss / 2**20 if pid else 0.0
        except psutil.Error:
            return
        self.peaks[key] = max(self.peaks[key], rss)


def run(args: argparse.Namespace) -> Path:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backbones = sim_backbones(out / "backbones.toml")
    config = parse_sweep({
        "name": "scale", "results_dir": str(out / "results"), "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": args.size, "limit": args.limit}],
        "grid": {"methods": args.methods.split(","), "backbones": ["sim"], "top_k": [36],
                 "budget": [4096]},
        "resources": {"llm_actors": args.actors, "retrieve_actors": args.actors,
                      "batch_size": args.batch_size, "engine_replicas": args.replicas},
    })
    init_ray()
    with PeakMemory(out / "memory.json"):
        run_sweep(config, log=lambda line: print(line, flush=True))
    ray.shutdown()
    return out


def report(out: Path) -> None:
    for run_dir in run_dirs(out / "results" / "scale"):
        calls = calls_store(run_dir).read_all().to_pylist()
        landed = set(STAGES[-1].store_for(run_dir).latest().column("qid").to_pylist())
        if not calls:
            continue
        window = calls_window(calls)
        print(f"{run_dir.name}: {len(landed)} questions landed, {len(calls)} LLM calls, "
              f"calls window {window:.0f} s, {len(landed) / window:.3f} q/s")
        llm_s: dict[tuple[str, str], float] = defaultdict(float)
        for c in calls:
            llm_s[c["stage"], c["qid"]] += c["latency_s"]
        built = [c for c in calls if c["stage"] == "memory"]
        if built:
            print(f"  memory building: {len(built)} calls, {calls_window(built):.0f} s from "
                  "the first sent to the last answered")
        for stage in STAGES:
            table = stage.store_for(run_dir).latest()
            if "latency_s" not in table.column_names:
                continue
            rows = table.select(["qid", "latency_s"]).to_pylist()
            times = [r["latency_s"] for r in rows]
            inside = [llm_s.get((stage.name, r["qid"]), 0.0) for r in rows]
            print(f"  {stage.name:<9} per question: median {statistics.median(times):.2f} s, "
                  f"total {sum(times):.0f} s; its LLM calls' latencies sum to {sum(inside):.0f} s "
                  "(a question's parallel calls overlap)")
    peaks = json.loads((out / "memory.json").read_text())
    by_kind: dict[str, list[float]] = defaultdict(list)
    for name, mib in peaks.items():
        by_kind[name.rsplit("-", 1)[0] if name.startswith("tmem-llm-") else name].append(mib)
    print("peak resident memory (MiB):")
    for kind, values in sorted(by_kind.items()):
        print(f"  {kind}: {max(values):.0f}" + (f" (max of {len(values)})"
                                               if len(values) > 1 else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=120_000)
    parser.add_argument("--limit", type=int, default=745, help="questions per run")
    parser.add_argument("--methods", default="bm25,tmem,t2mem")
    parser.add_argument("--replicas", type=int, default=16)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--out", default="/tmp/tmem-bench-scale")
    parser.add_argument("--report", type=Path, help="only report on this earlier --out")
    args = parser.parse_args()
    report(args.report or run(args))


if __name__ == "__main__":
    main()
