"""Engine utilisation and throughput of the pipeline on simulated engine replicas.

    python perf/bench_sim_cluster.py [--size 120000] [--limit 64] [--replicas 1,4,16]
                                     [--methods tmem,t2mem] [--actors 4] [--batch-size 16]

One sweep per replica count on the synthetic benchmark (120,000 messages: 4 conversations,
GroupMemBench's size), every backbone a simulated engine (`sim` backend) with GPU-like
timing, a fresh seed per sweep so that nothing comes from the request cache. Per sweep:
questions/s over the window of its LLM calls (first sent to last answered: the stage actors'
start-up and index loading come before it), and each replica's busy time (a batch running)
over that window. Ratios against the 1-replica sweep of the same
run: throughput at N replicas / (N x throughput at 1), the target being >= 0.8 at 16.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from tmem_core.pipeline import init_ray, parse_sweep, run_sweep
from tmem_core.pipeline._engine import ENGINE_PREFIX
from tmem_core.results import calls_store, calls_window, run_dirs

ENGINE = "{ seed = %d, step_s = 0.02, max_num_seqs = 128, max_output_tokens = 64 }"


@dataclass
class Measured:
    replicas: int
    questions: int = 0
    wall_s: float = 0.0
    busy_s: list[float] = field(default_factory=list)

    @property
    def qps(self) -> float:
        return self.questions / self.wall_s

    @property
    def utilisation(self) -> float:
        return statistics.mean(self.busy_s) / self.wall_s


def sim_backbones(path: Path) -> Path:
    """A backbones file with one `sim` backbone of GPU-like timing and a fresh seed (so that
    nothing comes from the request cache)."""
    path.write_text(f'[backbones.sim]\nbackend = "sim"\nmodel = "sim"\n'
                    f"engine = {ENGINE % (uuid.uuid4().int % 10**6)}\n")
    return path


def sweep(args: argparse.Namespace, replicas: int, work: Path) -> Measured:
    backbones = sim_backbones(work / f"backbones-{replicas}.toml")
    config = parse_sweep({
        "name": f"sim-{replicas}", "results_dir": str(work / "results"),
        "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": args.size, "limit": args.limit}],
        "grid": {"methods": args.methods.split(","), "backbones": ["sim"], "top_k": [36],
                 "budget": [4096]},
        "resources": {"llm_actors": args.actors, "retrieve_actors": args.actors,
                      "batch_size": args.batch_size, "engine_replicas": replicas},
    })
    measured = Measured(replicas)

    def log(line: str) -> None:
        if line.startswith("run "):
            measured.questions += int(line.split(": ", 1)[1].split(" ", 1)[0])
            measured.busy_s = [_busy(f"{ENGINE_PREFIX}sim-{i}") for i in range(replicas)]
            print(f"  {line}", flush=True)

    run_sweep(config, log=log)
    measured.wall_s = _calls_window(work / "results" / config.name)
    return measured


def _calls_window(sweep_dir: Path) -> float:
    """Seconds from the sweep's first LLM call sent to its last answered (the actors' start-up,
    index loading included, comes before it)."""
    return calls_window(c for run_dir in run_dirs(sweep_dir)
                        for c in calls_store(run_dir).read_all().to_pylist())


def _busy(name: str) -> float:
    counters: Any = ray.get(ray.get_actor(name).counters.remote())
    return float(counters.busy_s) if counters is not None else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=120_000)
    parser.add_argument("--limit", type=int, default=64, help="questions per run")
    parser.add_argument("--replicas", default="1,4,16")
    parser.add_argument("--methods", default="tmem,t2mem")
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    init_ray()
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for replicas in (int(r) for r in args.replicas.split(",")):
            print(f"{replicas} replicas:", flush=True)
            results.append(sweep(args, replicas, Path(tmp)))
    base = results[0]
    for m in results:
        scaling = m.qps / (m.replicas / base.replicas * base.qps)
        print(f"{m.replicas:>3} replicas: {m.questions} questions in {m.wall_s:.1f}s, "
              f"{m.qps:.3f} q/s, utilisation {m.utilisation:.2f} "
              f"(min {min(m.busy_s) / m.wall_s:.2f}), throughput / "
              f"({m.replicas // base.replicas} x base) = {scaling:.2f}")


if __name__ == "__main__":
    main()
