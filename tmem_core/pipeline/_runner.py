"""The driver: a sweep from its config to its runs' summaries. Each step is a module of its
own: the lease (`_lease`), the data (`_data`), planning (`_planning`), Ray (`_ray_start`),
the engines (`_sweep_engines`), execution (`_execute`) and the summary (`_summary`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import ray

from tmem_core.llm import check_tokenizers, load_backbones
from tmem_core.llm._tokens import expected_tokenizers
from tmem_core.pipeline._capacity import check_sweep_gpus, with_replicas
from tmem_core.pipeline._config import SweepConfig
from tmem_core.pipeline._data import prepare_benchmark
from tmem_core.pipeline._deps import run_dependencies
from tmem_core.pipeline._execute import run_plain, stream
from tmem_core.pipeline._lease import sweep_lease
from tmem_core.pipeline._planning import check_changed, in_order, plan_run
from tmem_core.pipeline._progress import Progress
from tmem_core.pipeline._ray_start import init_ray, ray_job
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._summary import RunSummary, finish_run
from tmem_core.pipeline._sweep_engines import sweep_engines
from tmem_core.pipeline._watch import ClusterWatch
from tmem_core.results._layout import SWEEP_FILE, write_atomic

Log = Callable[[str], None]


def run_sweep(config: SweepConfig, log: Log = print, local: bool = False
              ) -> list[RunSummary]:
    """Every run of the grid, through one pipeline whose actors serve all runs in turn (so
    runs neither start actors nor drain the pipeline at their boundaries); each run's summary
    is logged as soon as its last question is out. `local` runs the stages in this process."""
    backbones = {name: with_replicas(b, config.resources)
                 for name, b in load_backbones(config.backbones_file).items()}
    check_sweep_gpus(config)
    check_tokenizers(backbones[n] for n in config.backbone_names)
    root = Path(config.results_dir).absolute() / config.name
    with sweep_lease(root, log) as lease:
        specs = config.runs()
        deps = {spec.run_id: run_dependencies(spec, backbones) for spec in specs}
        # the data first: a source that cannot be read ends the sweep before anything
        # else is written (a prepared copy is named by its content: no run reads it yet)
        bench_dirs = {b: prepare_benchmark(b, root / "data") for b in config.benchmarks}
        check_changed(specs, deps, {s.run_id: bench_dirs[s.benchmark] for s in specs}, root,
                      config.on_changed, log)  # before any record or contract changes
        write_atomic(root / SWEEP_FILE, json.dumps(_sweep_json(config), indent=2, default=str))
        if not local:  # every worker checks that it counts tokens as this node does
            init_ray(env=expected_tokenizers(backbones[n] for n in config.backbone_names))
            lease.note(ray_job())
        runs = in_order([plan_run(spec, bench_dirs[spec.benchmark], backbones, root, local,
                                  deps[spec.run_id], config.resources) for spec in specs])
        return execute(config, runs, log, local)


def execute(config: SweepConfig, runs: list[Run], log: Log, local: bool) -> list[RunSummary]:
    """The planned runs through the stages, their engines up meanwhile; each run finished
    (validated, its contract closed, summarised) as soon as its last question is out."""
    summaries: list[RunSummary] = []
    started = 0.0  # when the stages start: each summary says when its run was done after it

    def finished(run: Run) -> None:
        summaries.append(finish_run(run, time.time() - started))
        log(summaries[-1].line())

    with sweep_engines(runs, config, local) as check:
        started = time.time()
        progress = Progress(runs, log, check)
        if local:
            run_plain(runs, config.resources, progress, finished)
        else:
            with ClusterWatch(ray.get_runtime_context().gcs_address, progress.landed):
                stream(runs, config.resources, progress, finished)
    return summaries


def _sweep_json(config: SweepConfig) -> dict[str, Any]:
    return {**asdict(config), "runs": [r.run_id for r in config.runs()]}
