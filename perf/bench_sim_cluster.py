"""Engine utilisation, throughput and prefix affinity of the pipeline on simulated replicas.

    python perf/bench_sim_cluster.py [--size 120000] [--questions 745] [--replicas 1,4,16]
                                     [--methods tmem,t2mem] [--actors 4] [--in-flight 0]
                                     [--step-s 0.02] [--repeats 1] [--work DIR]

GroupMemBench's size: the 120,000-message synthetic benchmark (4 conversations), 745
questions spread evenly over them (`spread = "conversation"`); every backbone a simulated
engine (`sim` backend, continuous batching in virtual time with GPU-like timing).

Per method, a first sweep (on the largest replica count, not measured) stores what retrieval
computed; each measured sweep then resumes it in the same results folder with a fresh engine
revision: the revision changes the backbone's definition, so every record that depends on the
backbone (construction, answers, judgements, and a method's LLM-built memory) is redone
against the new engines, while a retrieval that ranks without an LLM (T-MEM's discovery, the
CPU-bound part) is reused: it is out of the measured window. A revision answers as the first
sweep's engines did, so the texts a method embeds (T2Mem's memory entries) are the first
sweep's too and their embeddings come from the embedding cache: the CPU-bound encoding is out of
the window as well, the memory's LLM calls are in it. Nothing comes from the request cache (new
revision, new keys).

Per measured sweep, over the window of its own LLM calls (first sent to last answered):
questions/s, each replica's busy fraction (a batch running) and sequences per decode step
(how full the batches ran: a step's cost grows slowly with its sequences, so fewer per step
is less work done per busy second), the share of each question's
calls that went to its most used replica, the prefix-cache hit rate the engines report
(cached / prompt tokens), the CPU the replicas' processes used (cores), and the machine's
busy cores over the window with the share of its seconds above 90 % of every core (a sweep
that keeps the machine's cores busy is limited by the machine, not only by the pipeline and
its engines) and the machine's CPU per call answered; for a method with an LLM-built memory,
the build's window and the stretch after its last answer (calls sent, machine CPU): the
questions' chains alone, where a small machine runs out of cores first. Ratios against the
1-replica sweep of the same run: throughput at N / (N x throughput at 1), targets >= 0.8 at
16 replicas, utilisation >= 0.85 mean and >= 0.6 least busy, affinity >= 0.8, hit rate within
10% of 1 replica's. A 16-replica sweep's time varies by several seconds between sweeps of the
same code on a 2-core machine (its processes share the cores), the 1-replica one's by under
0.1 s: `--repeats N` sweeps each replica count above the first N times and adds the median
sweep's figures with their range (the engines' bound is the median sweep's).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import re
import statistics
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import ray

from tmem_core.benchmarks import read_prepared
from tmem_core.llm import BatchModel, Seq, SimEngineConfig
from tmem_core.llm._sim import SimCounters
from tmem_core.pipeline import init_ray, parse_sweep, run_sweep
from tmem_core.pipeline._replicas import ENGINE_PREFIX
from tmem_core.results import MEMORY_STAGE, calls_store, calls_window, memory_qid, run_dirs

SATURATED = 0.9  # of every core busy: a second the machine had no CPU to spare
RUN_LINE = re.compile(r"run \S+: (?P<questions>\d+) questions")
ENGINE = '{ revision = "%s", step_s = %g, max_num_seqs = 128, max_output_tokens = 64 }'


@dataclass(frozen=True)
class Phase:
    """A stretch of a sweep's window: its seconds, the calls sent in it, the machine's busy
    cores and the share of its seconds saturated."""

    seconds: float
    calls: int
    machine: tuple[float, float]

    def line(self) -> str:
        return (f"{self.calls} calls sent in {self.seconds:.1f}s, machine CPU "
                f"{self.machine[0]:.2f} cores ({self.machine[1]:.2f} of its seconds above "
                f"{SATURATED:.0%})")


@dataclass
class Measured:
    method: str
    replicas: int
    questions: int = 0
    wall_s: float = 0.0
    counters: list[SimCounters] = field(default_factory=list)
    affinity: list[float] = field(default_factory=list)  # per question
    memory_s: float = 0.0  # window of the memory-building calls (a method's LLM-built memory)
    calls: list[dict[str, Any]] = field(default_factory=list)  # answered by an engine
    conversations: dict[str, str] = field(default_factory=dict)  # qid -> its conversation
    machine: tuple[float, float] = (0.0, 0.0)  # busy cores, share of seconds saturated
    after_build: Phase | None = None  # from the memory build's last answer to the end

    @property
    def qps(self) -> float:
        return self.questions / self.wall_s

    @property
    def busy(self) -> list[float]:
        return [c.busy_s / self.wall_s for c in self.counters]

    @property
    def hit_rate(self) -> float:
        prompt = sum(c.prompt_tokens for c in self.counters)
        return sum(c.cached_tokens for c in self.counters) / max(prompt, 1)

    @property
    def batch(self) -> float:
        """Sequences per decode step: how full the engines ran while busy."""
        steps = sum(c.steps for c in self.counters)
        return sum(c.completion_tokens for c in self.counters) / max(steps, 1)

    @property
    def cores(self) -> float:
        return sum(c.cpu_s for c in self.counters) / self.wall_s

    @property
    def cpu_per_call_ms(self) -> float:
        """The machine's busy CPU per call answered in the window (every process: stage
        actors, replicas, driver): what one call costs the box the sweep shares."""
        return 1000 * self.machine[0] * self.wall_s / max(len(self.calls), 1)

    def line(self, base: Measured) -> str:
        scaling = self.qps / (self.replicas / base.replicas * base.qps)
        hits = self.hit_rate / base.hit_rate if base.hit_rate else float("nan")
        return (f"{self.method} {self.replicas:>2} replicas: {self.questions} questions in "
                f"{self.wall_s:.1f}s, {self.qps:.3f} q/s, utilisation "
                f"{statistics.mean(self.busy):.2f} (min {min(self.busy):.2f}), "
                f"{self.batch:.1f} sequences per step, throughput / "
                f"({self.replicas // base.replicas} x base) = {scaling:.2f}; affinity "
                f"{statistics.mean(self.affinity):.2f} (p10 {_p10(self.affinity):.2f}); "
                f"prefix hits {self.hit_rate:.3f} ({hits:.2f} x base); replicas' CPU "
                f"{self.cores:.2f} cores; machine CPU {self.machine[0]:.2f} of "
                f"{psutil.cpu_count()} cores ({self.machine[1]:.2f} of its seconds above "
                f"{SATURATED:.0%}), {self.cpu_per_call_ms:.1f} ms of it per call"
                + (f"; memory build {self.memory_s:.1f}s of it" if self.memory_s else "")
                + (f", then {self.after_build.line()}" if self.after_build else ""))


class MachineCpu:
    """The machine's busy CPU seconds (all but idle and I/O wait), sampled every second by a
    thread while a sweep runs."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (time, busy CPU seconds so far)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> MachineCpu:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            times = psutil.cpu_times()
            busy = sum(times) - times.idle - getattr(times, "iowait", 0.0)
            self.samples.append((time.time(), busy))
            if self._stop.wait(1.0):
                return

    def over(self, start: float, end: float) -> tuple[float, float]:
        """Busy cores on average between `start` and `end`, and the share of the seconds
        between them in which more than `SATURATED` of every core was busy."""
        inside = [(t, b) for t, b in self.samples if start <= t <= end]
        if len(inside) < 2:
            return 0.0, 0.0
        steps = [(b1 - b0) / (t1 - t0) for (t0, b0), (t1, b1) in itertools.pairwise(inside)]
        cores = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
        full = SATURATED * (psutil.cpu_count() or 1)
        return cores, sum(step > full for step in steps) / len(steps)


def sim_backbones(path: Path, step_s: float) -> Path:
    """A backbones file with one `sim` backbone of GPU-like timing and a fresh revision."""
    path.write_text(f'[backbones.sim]\nbackend = "sim"\nmodel = "sim"\n'
                    f"engine = {ENGINE % (uuid.uuid4().hex[:12], step_s)}\n")
    return path


def sweep(args: argparse.Namespace, method: str, replicas: int, work: Path) -> Measured:
    """One sweep of `method` on `replicas` replicas (resuming the folder's earlier ones)."""
    backbones = sim_backbones(work / f"backbones-{method}-{replicas}.toml", args.step_s)
    config = parse_sweep({
        "name": f"sim-{method}", "results_dir": str(work / "results"),
        "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": args.size, "limit": args.questions,
                        "spread": "conversation"}],
        "grid": {"methods": [method], "backbones": ["sim"], "top_k": [36], "budget": [4096]},
        "resources": {"llm_actors": args.actors, "retrieve_actors": args.actors,
                      "questions_in_flight": args.in_flight, "engine_replicas": replicas},
    })
    measured = Measured(method, replicas)

    def log(line: str) -> None:
        summary = RUN_LINE.match(line)
        if summary:
            measured.questions += int(summary["questions"])
            measured.counters = [_counters(f"{ENGINE_PREFIX}sim-{i}") for i in range(replicas)]
            print(f"  {line}", flush=True)

    started = time.time()
    with MachineCpu() as cpu:
        run_sweep(config, log=log)
    calls = [c for run_dir in run_dirs(work / "results" / config.name)
             for c in calls_store(run_dir).read_all().to_pylist()
             if c["finished_at"] is not None and not c["cached"]
             and c["finished_at"] - c["latency_s"] >= started]
    measured.wall_s = calls_window(calls)
    end = max(c["finished_at"] for c in calls)
    measured.machine = cpu.over(end - measured.wall_s, end)
    measured.calls = calls
    prepared = read_prepared(next((work / "results" / config.name / "data").iterdir()))
    measured.conversations = dict(zip(prepared.questions.column("qid").to_pylist(),
                                      prepared.questions.column("conv_id").to_pylist(),
                                      strict=True))
    measured.affinity = _affinity([c for c in calls if c["stage"] != MEMORY_STAGE])
    memory = [c for c in calls if c["stage"] == MEMORY_STAGE]
    if memory:
        measured.memory_s = calls_window(memory)
        built = max(c["finished_at"] for c in memory)
        measured.after_build = Phase(end - built, sum(
            c["finished_at"] - c["latency_s"] >= built for c in calls), cpu.over(built, end))
    return measured


def engines_alone(calls: list[dict[str, Any]], conversations: dict[str, str], replicas: int,
                  config: SimEngineConfig, hit_rate: float) -> float:
    """Seconds the engines alone need for a sweep's calls: each question's calls in the rounds
    they were sent in (a round: the calls of one batch), every question in flight from the
    start and a question's first round once its conversation's memory is built, each round the
    moment the one before is answered (no pipeline between them), on the least busy replica,
    waiting by question; `hit_rate` of each prompt found in the prefix cache."""
    sent: defaultdict[str, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
    for call in calls:
        sent[call["qid"]].append((call["finished_at"] - call["latency_s"], call))
    for pairs in sent.values():
        pairs.sort(key=lambda pair: pair[0])
    chains = {q: _rounds(pairs) for q, pairs in sent.items()}
    priority = {q: rank for rank, q in enumerate(sorted(chains, key=lambda q: sent[q][0][0]))}
    gates = {q: memory_qid(conversations[q]) for q in chains if q in conversations}
    waiting = defaultdict(list)  # memory chain -> questions that wait for it
    models = [BatchModel(config) for _ in range(replicas)]
    left: dict[str, int] = {}

    def send(qid: str, position: int, now: float) -> None:
        left[qid] = len(chains[qid][position])
        for call in chains[qid][position]:
            model = min(models, key=lambda m: len(m.running) + m.waiting)
            model.submit(Seq(call["prompt_tokens"], max(1, call["completion_tokens"]),
                             int(call["prompt_tokens"] * hit_rate), priority[qid],
                             tag=(qid, position)), now)

    for qid in chains:
        if gates.get(qid) in chains:
            waiting[gates[qid]].append(qid)
        else:
            send(qid, 0, 0.0)
    now = 0.0
    while events := [t for m in models if (t := m.next_event()) is not None]:
        now = max(now, min(events))
        for seq in [seq for m in models for seq in m.advance(now)]:
            qid, position = seq.tag
            left[qid] -= 1
            if left[qid]:
                continue
            if position + 1 < len(chains[qid]):
                send(qid, position + 1, now)
            for gated in waiting.pop(qid, []):
                send(gated, 0, now)
    return now


def _rounds(sent: list[tuple[float, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """A question's calls (by send time) in the rounds they went out in: a call sent before
    any call of the current round was answered belongs to it (the parts of one batch reach
    their replicas a little apart), one sent later starts the next."""
    rounds: list[list[dict[str, Any]]] = []
    answered = float("-inf")  # the current round's first answer
    for at, call in sent:
        if not rounds or at >= answered:
            rounds.append([])
            answered = float("inf")
        rounds[-1].append(call)
        answered = min(answered, call["finished_at"])
    return rounds


def bound(measured: Measured, step_s: float) -> str:
    """The engines' own limit on the measured sweep's calls (`engines_alone`) at 1 and at its
    replicas, beside what the sweep took."""
    config = SimEngineConfig(step_s=step_s, max_num_seqs=128)
    alone = [engines_alone(measured.calls, measured.conversations, n, config,
                           measured.hit_rate) for n in (1, measured.replicas)]
    return (f"{measured.method}: the engines alone take {alone[0]:.1f}s on 1 replica and "
            f"{alone[1]:.1f}s on {measured.replicas} for these calls: at most "
            f"{alone[0] / (measured.replicas * alone[1]):.2f} of linear with every question in "
            f"flight; the sweep took {measured.wall_s:.1f}s, "
            f"{alone[1] / measured.wall_s:.2f} of the engines' own speed")


def median_run(runs: list[Measured]) -> Measured:
    """The run of median wall time (the slower middle one of an even count)."""
    return sorted(runs, key=lambda m: m.wall_s)[len(runs) // 2]


def spread(runs: list[Measured], base: Measured) -> str:
    """Repeated sweeps at one replica count: the median run's figures and their range."""
    def ranged(values: list[float], digits: int = 2) -> str:
        return (f"{statistics.median(values):.{digits}f} "
                f"({min(values):.{digits}f}-{max(values):.{digits}f})")

    scaling = [m.qps / (m.replicas / base.replicas * base.qps) for m in runs]
    hits = [m.hit_rate / base.hit_rate if base.hit_rate else float("nan") for m in runs]
    return (f"{base.method} {runs[0].replicas:>2} replicas, median of {len(runs)} sweeps "
            f"(range): {ranged([m.wall_s for m in runs], 1)}s, throughput / "
            f"({runs[0].replicas // base.replicas} x base) = {ranged(scaling)}, utilisation "
            f"{ranged([statistics.mean(m.busy) for m in runs])} (min "
            f"{ranged([min(m.busy) for m in runs])}), affinity p10 "
            f"{ranged([_p10(m.affinity) for m in runs])}, prefix hits {ranged(hits)} x base")


def _affinity(calls: list[dict[str, Any]]) -> list[float]:
    """Per question, the share of its calls answered by its most used replica."""
    replicas: defaultdict[str, Counter[Any]] = defaultdict(Counter)
    for call in calls:
        replicas[call["qid"]][call["replica"]] += 1
    return [max(c.values()) / sum(c.values()) for c in replicas.values()]


def _counters(name: str) -> SimCounters:
    counters: Any = ray.get(ray.get_actor(name).counters.remote())
    return counters if counters is not None else SimCounters()


def _p10(values: list[float]) -> float:
    return sorted(values)[len(values) // 10]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=120_000)
    parser.add_argument("--questions", type=int, default=745, help="questions per run")
    parser.add_argument("--replicas", default="1,4,16")
    parser.add_argument("--methods", default="tmem,t2mem")
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=0,
                        help="resources.questions_in_flight (0: derived from the engines)")
    parser.add_argument("--step-s", type=float, default=0.02, help="a decode step's time")
    parser.add_argument("--repeats", type=int, default=1,
                        help="sweeps per replica count above the first (the base, whose "
                             "time varies by under 0.1 s between sweeps, runs once): their "
                             "median and range (a 16-replica sweep varies by several "
                             "seconds on a 2-core machine)")
    parser.add_argument("--work", type=Path, default=None,
                        help="a folder kept between runs: its first sweep (per method and "
                             "question count) is made once, later runs only measure")
    args = parser.parse_args()
    counts = [int(r) for r in args.replicas.split(",")]
    init_ray()
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        work.mkdir(parents=True, exist_ok=True)
        for method in args.methods.split(","):
            first = work / f"first-{method}-{args.size}-{args.questions}"
            if not first.exists():
                print(f"{method}: first sweep ({max(counts)} replicas, stores retrieval)",
                      flush=True)
                sweep(args, method, max(counts), work)
                first.touch()
            runs: dict[int, list[Measured]] = {}
            for replicas in counts:
                for attempt in range(1 if replicas == counts[0] else args.repeats):
                    print(f"{method}, {replicas} replicas"
                          + (f" ({attempt + 1} of {args.repeats})" if args.repeats > 1
                             and replicas != counts[0] else "") + ":", flush=True)
                    runs.setdefault(replicas, []).append(sweep(args, method, replicas, work))
            base = runs[counts[0]][0]
            for measured in (m for ms in runs.values() for m in ms):
                print(measured.line(base), flush=True)
            for repeated in list(runs.values())[1:]:
                if len(repeated) > 1:
                    print(spread(repeated, base), flush=True)
            print(bound(median_run(runs[counts[-1]]), args.step_s), flush=True)


if __name__ == "__main__":
    main()
