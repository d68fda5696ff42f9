"""The stages as Ray Data actors: fused into one actor, or one stage each, serving every run
of the sweep in turn. A fused actor's call takes a block of questions and yields each one
the moment it is through every stage (its records on disk), so a block is no barrier and few
blocks (few Ray Data tasks) keep every question in flight."""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tmem_core.pipeline._answer_stage import AnswerStage
from tmem_core.pipeline._judge_stage import JudgeStage
from tmem_core.pipeline._method_stages import ConstructStage, RetrieveStage
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._stage import (
    Row,
    Stage,
    StageResult,
    flow_schema,
    write_records,
)
from tmem_core.results import calls_store

STAGES: tuple[type[Stage], ...] = (RetrieveStage, ConstructStage, AnswerStage, JudgeStage)
FLOW_SCHEMA = flow_schema(STAGES)
"""The rows that flow through the stages: a question of a run, and what each stage passes on."""
QUESTION_POOL = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="question")
"""The threads of a fused actor's questions in flight (as many as its calls hold: threads
start as needed and stay for the next call)."""
KEEP_RUNS = 4  # runs whose stages an actor keeps built (runs flow through in order)


class FusedStages:
    """Every stage in one actor, as Ray Data fuses map operators: each question goes through
    all stages in one thread, so no question waits at a stage boundary and no flow row
    crosses a process. Records are stored per stage, exactly as unfused."""

    name = "stages"

    def __init__(self, job: Run) -> None:
        retrieve = RetrieveStage(job)
        self.stages = [retrieve, ConstructStage(job, shares=retrieve), AnswerStage(job),
                       JudgeStage(job)]
        self.calls = calls_store(Path(job.run_dir))

    def __call__(self, rows: list[Row]) -> list[Row]:
        per_question = self.stages[0].each(rows, self._through_all)
        self._write(per_question)
        return [results[-1].flow for results in per_question]

    def stream(self, rows: list[Row]) -> Iterator[list[Row]]:
        """The questions' flow rows as they are through every stage, those done together
        at once (a block of Ray Data each, their records written first)."""
        pending = {QUESTION_POOL.submit(self._through_all, row) for row in rows}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            per_question = [future.result() for future in done]
            self._write(per_question)
            yield [results[-1].flow for results in per_question]

    def _write(self, per_question: list[list[StageResult]]) -> None:
        """Each stage's records of the questions, through the process's group commit."""
        write_records(self.calls, self.stages[0].probe, [
            (stage, [results[index] for results in per_question])
            for index, stage in enumerate(self.stages)])

    def _through_all(self, row: Row) -> list[StageResult]:
        results = []
        for stage in self.stages:
            results.append(stage.step(row))
            row = results[-1].flow
        return results


class PerRun:
    """A stage (or the fused stages) for every run of a sweep, in one actor: each row goes to
    its run's instance, built at the run's first batch (the first run's at once, to warm up
    while the pipeline starts). The actor pools live for the whole sweep."""

    def __init__(self, stage: type[Stage] | type[FusedStages], jobs: dict[str, Run]
                 ) -> None:
        self.stage, self.jobs = stage, jobs
        self._runs: OrderedDict[str, Stage | FusedStages] = OrderedDict()
        self._lock = threading.Lock()  # calls run at once: a run's stages are built once
        self._for(next(iter(jobs)))

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        """Fused: the questions as they are done, those done together packed in one row
        (`pack`: Ray Data passes each on as it comes); a single stage: the call's questions
        together."""
        for run_id, part in split_by_run(batch):
            stages = self._for(run_id)
            if isinstance(stages, FusedStages):
                for done in stages.stream(part.to_pylist()):
                    yield pack(pa.Table.from_pylist(done, schema=FLOW_SCHEMA))
            else:
                yield pa.Table.from_pylist(stages(part.to_pylist()), schema=FLOW_SCHEMA)

    def _for(self, run_id: str) -> Stage | FusedStages:
        with self._lock:
            if run_id not in self._runs:
                self._runs[run_id] = self.stage(self.jobs[run_id])
                while len(self._runs) > KEEP_RUNS:
                    self._runs.popitem(last=False)
                _freeze_loaded()
            self._runs.move_to_end(run_id)
            return self._runs[run_id]


def _freeze_loaded() -> None:
    """Freeze what the process holds now, after collecting what dropped runs held.

    What a run's stages load (the benchmark's questions and messages, the method's indexes)
    lives as long as they do; frozen, no full collection traverses it again. Those took
    0.2-1.4 s of a stage actor each, 4-5 s of it in a 50 s sweep of T-MEM at 16 replicas,
    and freed next to nothing."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


PACKED = "questions"
PACKED_SCHEMA = pa.schema([pa.field(PACKED, pa.list_(pa.struct(FLOW_SCHEMA)))])


def pack(rows: pa.Table) -> pa.Table:
    """Flow rows as one row (`PACKED_SCHEMA`). A sweep's blocks are sized to pass on each
    row a fused call yields at once (`STREAMED_BLOCK_BYTES`), which would split its questions
    done together into a block each: a warm-cache run of 300 questions sent 300 blocks and
    ran at 158-167 questions/s once started, packed 268-316."""
    offsets = pa.array([0, rows.num_rows], pa.int32())
    return pa.table({PACKED: pa.ListArray.from_arrays(
        offsets, rows.to_struct_array().combine_chunks())}, schema=PACKED_SCHEMA)


def unpack(batch: pa.Table) -> pa.Table:
    """The flow rows of packed rows (`pack`)."""
    return pa.Table.from_struct_array(pc.list_flatten(batch.column(PACKED)))


def split_by_run(batch: pa.Table) -> list[tuple[str, pa.Table]]:
    """A batch's rows grouped by `run_id`, runs in order of first appearance."""
    run_ids = batch.column("run_id")
    return [(run_id, batch.filter(pc.equal(run_ids, run_id)))
            for run_id in dict.fromkeys(run_ids.to_pylist())]
