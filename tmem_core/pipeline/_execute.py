"""Executing the planned runs: every run through one Ray Data pipeline of stage actor pools
(sized here), or the same stages in this process."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import ray
from ray.data import ActorPoolStrategy
from ray.data.context import DEFAULT_TARGET_MAX_BLOCK_SIZE

from tmem_core.llm._backends import get_backend
from tmem_core.pipeline._actors import (
    FLOW_SCHEMA,
    STAGES,
    FusedStages,
    PerRun,
    split_by_run,
    unpack,
)
from tmem_core.pipeline._capacity import questions_in_flight
from tmem_core.pipeline._config import Resources
from tmem_core.pipeline._method_stages import RetrieveStage
from tmem_core.pipeline._progress import Progress
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._stage import Stage
from tmem_core.results._layout import merge_run_levels

Finished = Callable[[Run], None]


def flow_rows(run: Run) -> list[dict[str, Any]]:
    """The run's questions as the rows that flow through the stages (`FLOW_SCHEMA`)."""
    empty = dict.fromkeys(FLOW_SCHEMA.names)
    return [{**empty, "run_id": run.run_id, "qid": q, "conv_id": c, "ok": True}
            for q, c in run.questions]


def run_plain(runs: list[Run], resources: Resources, progress: Progress,
              finished: Finished) -> None:
    """The same stages in this process without Ray: a debugging aid and the overhead baseline
    (each run's questions in chunks of the questions in flight)."""
    for run in runs:
        stages = FusedStages(run)
        rows = flow_rows(run)
        chunk = questions_in_flight(run.backbones, resources, len(rows))
        for start in range(0, len(rows), chunk):
            out = stages(rows[start:start + chunk])
            progress.add(run, pa.Table.from_pylist(out, schema=FLOW_SCHEMA))
            merge_run_levels(run.run_dir)
        finished(run)


def stream(runs: list[Run], resources: Resources, progress: Progress,
           finished: Finished) -> None:
    """All runs through one Ray Data pipeline (fed in grid order, which Ray Data need not
    keep); a run is finished when its last question comes out of the last stage."""
    for run in [r for r in runs if not r.questions]:
        finished(run)
    runs = [r for r in runs if r.questions]
    if not runs:
        return
    ds = _pipeline(runs, resources)
    by_id = {run.run_id: run for run in runs}
    merged: dict[str, float] = {}  # when each run's stores were last merged
    # no prefetch: with it, Ray Data hands each batch over only once the next one is done,
    # so every progress line and run summary would wait for the following batch
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0):
        for run_id, part in split_by_run(unpack(batch) if resources.fuse_stages else batch):
            run = by_id[run_id]
            progress.add(run, part)
            if progress.done_of(run) == len(run.questions):
                finished(run)
            elif time.monotonic() - merged.get(run_id, 0.0) >= MERGE_EVERY_S:
                merge_run_levels(run.run_dir)  # its stores keep few parts while it streams
                merged[run_id] = time.monotonic()
    # a call retried after its actor died yields its questions again, in the order they end,
    # and Ray drops what it yielded before by position: one may show twice and another not
    # at all; every record is on disk once the stream is done
    for run in runs:
        if progress.done_of(run) < len(run.questions):
            finished(run)


def _pipeline(runs: list[Run], resources: Resources) -> ray.data.Dataset:
    """The runs' questions through a pool of actors per stage (one when they are fused)."""
    rows = [row for run in runs for row in flow_rows(run)]
    pools = stage_pools(runs, resources)
    in_flight = questions_in_flight([b for r in runs for b in r.backbones], resources,
                                    len(rows))
    size = block_size(resources, len(rows), pools[0][1], in_flight)
    # a block per stage call (`size` questions): blocks are Ray Data's unit of scheduling,
    # and they spread over all of a stage's actors (from_items builds the blocks here;
    # from_arrow_refs would start a task per block); what a fused call yields is passed on
    # at once (STREAMED_BLOCK_BYTES), one pool per stage keeps a call's questions one block
    ray.data.DataContext.get_current().target_max_block_size = (
        STREAMED_BLOCK_BYTES if resources.fuse_stages else DEFAULT_TARGET_MAX_BLOCK_SIZE)
    ds: ray.data.Dataset = ray.data.from_items(rows, override_num_blocks=-(-len(rows) // size))
    jobs = {run.run_id: run for run in runs}
    for stage, actors, cpus in pools:
        # enough calls at once per actor (threads of its own) to keep `in_flight` questions
        # in the pool; no more queued at an actor than it runs, so a question waits for an
        # actor rather than behind another question
        calls = max(1, -(-in_flight // (actors * size)))
        pool = ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=calls,
                                 max_concurrent_calls_per_actor=calls,
                                 enable_true_multi_threading=True)
        with warnings.catch_warnings():
            # retries can only be bounded through the deprecated remote args (Ray Data's own
            # default retries a batch that kills its worker forever)
            warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
            ds = ds.map_batches(
                PerRun, fn_constructor_kwargs={"stage": stage, "jobs": jobs}, batch_size=None,
                batch_format="pyarrow", compute=pool, num_cpus=cpus, max_restarts=-1,
                max_task_retries=resources.max_task_retries)
    return ds


MERGE_EVERY_S = 2.0
"""How often the driver merges a streaming run's store parts (`merge_run_levels`): a
question out of the stages used to merge each time, 1.3 ms each, 0.4 s of a 4.5 s warm-cache
run of 300 questions. The parts written meanwhile are bounded by the writers' group commits
in that time."""
BLOCK_MAX = 32
BLOCKS_PER_ACTOR = 4
STREAMED_BLOCK_BYTES = 1
"""Ray Data's target block size in a sweep: a block is passed on as soon as it holds
anything, so each packed row a fused call yields (its questions done together) moves on
alone (by default Ray Data gathers a call's outputs up to 128 MiB, here until the call ends,
and it splits a larger block into rows)."""


def block_size(resources: Resources, questions: int, actors: int, in_flight: int) -> int:
    """Questions per stage call: `resources.batch_size`, else at most BLOCK_MAX, few enough
    for BLOCKS_PER_ACTOR calls per actor, and no more than an actor's share of the questions
    `in_flight` (the calls run at once are counted to hold those). A fused call yields each
    question when it is done, so a call is no barrier: fewer, larger calls cost Ray Data
    fewer tasks (745 one-question tasks took 3.3 s to start half their questions in a
    16-replica sweep, 32-question calls 1.6 s, with a third less of the machine's CPU over
    the sweep)."""
    if resources.batch_size:
        return resources.batch_size
    return max(1, min(BLOCK_MAX, -(-questions // (actors * BLOCKS_PER_ACTOR)),
                      -(-in_flight // actors)))


def stage_pools(runs: list[Run], resources: Resources
                ) -> list[tuple[type[Stage] | type[FusedStages], int, float]]:
    """(stage class, actors, CPUs per actor) of each actor pool, in flow order."""
    if resources.fuse_stages:
        actors = max(resources.retrieve_actors, resources.llm_actors)
        return [(FusedStages, actors, resources.cpus_per_actor)]
    in_process = any(get_backend(run.method_backbone.backend).in_process
                     or get_backend(run.backbone.backend).in_process for run in runs)
    llm_cpus = resources.cpus_per_actor if in_process else 0.1  # else they wait on the engine
    return [(stage, resources.retrieve_actors, resources.cpus_per_actor)
            if stage is RetrieveStage else (stage, resources.llm_actors, llm_cpus)
            for stage in STAGES]
