"""Records under faults: a double submit, a driver SIGKILL then a re-run, a stage actor SIGKILL.

    PYTHONPATH=. python perf/probe_records.py [--limit 8] [--step-s 0.05]

Starts a Ray head of its own (cluster/start-local.sh, token authentication on, free ports)
and runs one small sweep per case on it (synthetic benchmark, BM25, a `sim` engine with a
fresh seed and a cold request cache), each with `python -m jobs.sweep CONFIG`:

- double: two drivers started together on the same config;
- driver: the driver killed (SIGKILL) once its first judgements are stored, then re-run;
- actor: the stage actor killed (SIGKILL, at the answer stage of the run's second question,
  once) mid-sweep; Ray Data retries its batch.

Per case: the drivers' exit statuses, then from the Parquet records of every stage (retrieve,
construct, answer, judge), per qid and key, the successful records written more than once
(duplicated) and the run's questions with none (lost), the answer and judge records without
their calls on record (calls lost), and whether the run line's tokens and cost (what the
sweep printed) equal the report's (`tmem_core.reports.summarise`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.pipeline.faults import probe_env
from tests.pipeline.test_records import RUN_LINE
from tests.ray_head import PORTS, ROOT, cluster_env, gcs, sweep_env, wait_for
from tmem_core.pipeline import STAGES, STATUS_ENV, load_sweep
from tmem_core.pipeline._data import prepare_benchmark, select_questions
from tmem_core.pipeline._judge_stage import JudgeStage
from tmem_core.reports import read_sweep, summarise
from tmem_core.results import calls_store, run_dirs


@dataclass(frozen=True)
class Case:
    name: str
    exits: list[int]
    duplicated: int
    lost: int
    calls_lost: int
    line: str  # the run line's tokens / cost
    report: str  # the report's
    note: str = ""  # what the fault hit

    def row(self) -> str:
        same = "yes" if self.line == self.report else "NO"
        return (f"{self.name:<8} {','.join(map(str, self.exits)):<9} {self.duplicated:>10} "
                f"{self.lost:>5} {self.calls_lost:>10}  {self.line:<22} {self.report:<22} "
                f"{same:<5} {self.note}")


def _config(tmp: Path, name: str, limit: int, step_s: float) -> Path:
    backbones = tmp / f"{name}-backbones.toml"
    backbones.write_text(f'[backbones.sim]\nbackend = "sim"\nmodel = "sim"\nengine = {{ seed = '
                         f"{uuid.uuid4().int % 10**6}, step_s = {step_s}, max_num_seqs = 4, "
                         "max_output_tokens = 16 }\nprices = { input_per_mtok = 1000.0, "
                         "output_per_mtok = 2000.0 }\n")
    path = tmp / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nresults_dir = "{tmp / "results"}"\nbackbones_file = "{backbones}"\n'
        f'[[benchmarks]]\nname = "synthetic"\nsize = 300\nlimit = {limit}\n'
        '[grid]\nmethods = ["bm25"]\nbackbones = ["sim"]\ntop_k = [8]\nbudget = [512]\n'
        "[resources]\nretrieve_actors = 1\nllm_actors = 1\nbatch_size = 2\n")
    return path


def _driver(config: Path, address: str, tmp: Path, log: Path, **env: str
            ) -> subprocess.Popen[bytes]:
    """`python -m jobs.sweep config`, itself the driver (no supervising parent), cold cache."""
    status = {STATUS_ENV: str(log.with_suffix(".status.json"))}
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
            env=sweep_env(gcs(address), TMEM_CACHE_DIR=str(tmp / "cache"), **status, **env),
            stdout=out, stderr=subprocess.STDOUT)


def _count(config: Path, exits: list[int], logs: list[Path], name: str) -> Case:
    sweep = load_sweep(config)
    root = Path(sweep.results_dir) / sweep.name
    bench = sweep.benchmarks[0]
    qids = {q for q, _ in select_questions(prepare_benchmark(bench, root / "data"), bench)}
    (run_dir,) = run_dirs(root)
    duplicated = lost = calls_lost = 0
    called = {(c["stage"], c["qid"]) for c in calls_store(run_dir).read_all().to_pylist()}
    for stage in STAGES:
        ok = Counter(r["key"] for r in stage.store_for(run_dir).read_all().to_pylist()
                     if r["ok"])
        duplicated += sum(n - 1 for n in ok.values() if n > 1)
        done = {key.split("|")[0] for key in ok}
        lost += len(qids - done)
        if stage.name in ("answer", "judge"):
            calls_lost += len({(stage.name, q) for q in done} - called)
    text = "\n".join(log.read_text() for log in logs)
    lines = list(RUN_LINE.finditer(text))
    line = f"{lines[-1]['tokens']} / ${lines[-1]['cost']}" if lines else "none"
    (row,) = summarise(read_sweep(root)).runs.iter_rows(named=True)
    report = f"{row['tokens']} / ${row['cost_usd']:.4f}"
    return Case(name, exits, duplicated, lost, calls_lost, line, report)


def double(tmp: Path, address: str, limit: int, step_s: float) -> Case:
    config = _config(tmp, "double", limit, step_s)
    logs = [tmp / f"double-{k}.log" for k in range(2)]
    drivers = [_driver(config, address, tmp, log) for log in logs]
    exits = sorted(d.wait(timeout=900) for d in drivers)
    done = [log for log, d in zip(logs, drivers, strict=True) if d.returncode == 0]
    return dataclasses.replace(_count(config, exits, done, "double"),
                               note="one refused" if exits == [0, 2] else "")


def driver_kill(tmp: Path, address: str, limit: int, step_s: float) -> Case:
    config = _config(tmp, "driver", limit, step_s)
    first, again = tmp / "driver-0.log", tmp / "driver-1.log"
    driver = _driver(config, address, tmp, first)
    results = tmp / "results" / "driver"
    wait_for(lambda: any(results.glob("*/judge/part-*.parquet")) or driver.poll() is not None,
             600, "first judgements")
    if driver.poll() is None:
        driver.send_signal(signal.SIGKILL)
    killed = driver.wait()
    (run_dir,) = run_dirs(results)
    judged = len(JudgeStage.store_for(run_dir).done_keys())
    rerun = _driver(config, address, tmp, again)
    case = _count(config, [killed, rerun.wait(timeout=900)], [again], "driver")
    return dataclasses.replace(case, note=f"killed with {judged}/{limit} judged")


def actor_kill(tmp: Path, address: str, limit: int, step_s: float) -> Case:
    config = _config(tmp, "actor", limit, step_s)
    sweep = load_sweep(config)
    bench = sweep.benchmarks[0]
    data = prepare_benchmark(bench, Path(sweep.results_dir) / sweep.name / "data")
    qid = select_questions(data, bench)[1][0]
    marker = tmp / "actor-killed"
    log = tmp / "actor.log"
    driver = _driver(config, address, tmp, log, **probe_env(
        f"stage=answer,qid={qid},kind=kill,once={marker}"))
    code = driver.wait(timeout=900)
    case = _count(config, [code], [log], "actor")
    hit = f"killed at the answer of {qid}" if marker.exists() else "NOT killed"
    return dataclasses.replace(case, note=hit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=8, help="questions per sweep")
    parser.add_argument("--step-s", type=float, default=0.05,
                        help="the sim engine's seconds per decoding step (sets the sweep's pace)")
    args = parser.parse_args()
    env = cluster_env(PORTS)
    subprocess.run([str(ROOT / "cluster" / "start-local.sh")], env=env, check=True,
                   timeout=180, stdout=subprocess.DEVNULL)
    address = f"127.0.0.1:{PORTS['RAY_GCS_PORT']}"
    cases = []
    started = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="probe-records-") as folder:
            tmp = Path(folder)
            for probe in (double, driver_kill, actor_kill):
                cases.append(probe(tmp, address, args.limit, args.step_s))
    finally:
        subprocess.run([str(ROOT / "cluster" / "stop-local.sh")], env=env, timeout=120,
                       check=False, stdout=subprocess.DEVNULL)
    print(f"{args.limit} questions per sweep, sim step {args.step_s}s, "
          f"{time.time() - started:.0f}s in all (pid {os.getpid()})")
    print(f"{'case':<8} {'exits':<9} {'duplicated':>10} {'lost':>5} {'calls lost':>10}  "
          f"{'run line tokens/cost':<22} {'report tokens/cost':<22} equal fault")
    for case in cases:
        print(case.row())


if __name__ == "__main__":
    main()
