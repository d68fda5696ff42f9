"""What every stage shares: its job, its stored records, resume, threads and error records.

A stage's actor runs a batch of questions at once. For each question the base looks up the
records the stage keeps for it (`keys`); when all are in force from an earlier attempt (made
under the run's dependencies and the question's data, `tmem_core.results.in_force`, the
rule every reader counts records by) the question passes on with them,
otherwise the stage's `process` makes what is missing or changed. A failure
becomes an error record; a question that failed upstream passes through untouched. A stage
declares the flow columns it reads (`reads`) and those it sets from its record (`writes`):
`process` sees only the columns it reads.
"""

from __future__ import annotations

import functools
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from tmem_core.benchmarks import MANIFEST_FILE, PreparedBenchmark, read_prepared
from tmem_core.evaluation import GUARDED_STAGES, gold_strings, ids_in
from tmem_core.llm import BackboneConfig, RequestCache
from tmem_core.llm._accounting import CALLS_SCHEMA, CallRecord
from tmem_core.llm._request_cache import default_path as default_request_cache_path
from tmem_core.llm._shared import EngineCall
from tmem_core.llm._tokens import counter_for
from tmem_core.pipeline._config_load import import_plugins
from tmem_core.pipeline._engine import EngineProxy, local_engine, ray_engine
from tmem_core.pipeline._probe import Probe, load_probe
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._writer import WRITER, Batch
from tmem_core.results import calls_store, stage_store
from tmem_core.results._current import QuestionData, expected_deps, question_data, record_deps
from tmem_core.results._layout import STAGE_SCHEMAS
from tmem_core.results._store import StageStore
from tmem_core.schema import (
    Gold,
    Question,
    gold_from_table,
    messages_from_table,
    questions_from_table,
)

FLOW_BASE = (pa.field("run_id", pa.string()), pa.field("qid", pa.string()),
             pa.field("conv_id", pa.string()), pa.field("ok", pa.bool_()),
             pa.field("error", pa.string()))
"""The columns of every flow row; each stage adds those it `writes`."""
QUESTION_THREADS = 64  # questions of a batch in flight at once, per stage actor

Row = dict[str, Any]
T = TypeVar("T")


@dataclass
class Output:
    """What a stage made for one question: its records and LLM calls."""

    records: list[Row] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    controls: list[Row] = field(default_factory=list)  # the judge's calibration
    quality: list[Row] = field(default_factory=list)  # the judge's memory-quality scores


@dataclass
class StageResult:
    flow: Row
    output: Output = field(default_factory=Output)


class Stage:
    """Common machinery: stored records, resume, per-question threads, error records."""

    name: ClassVar[str] = ""
    reads: ClassVar[tuple[str, ...]] = ()  # flow columns `process` reads
    writes: ClassVar[tuple[str, ...]] = ()  # flow columns set from the question's record

    def __init__(self, job: Run) -> None:
        self.job = job
        import_plugins(job.spec.plugins)  # the run's own methods and benchmarks, in this actor
        run_dir = Path(job.run_dir)
        self.store = self.store_for(run_dir)
        self.calls = calls_store(run_dir)
        self.done = self.stored()
        self.probe = load_probe(job.probe)
        self._engines: dict[str, EngineCall] = {}
        self._engines_lock = threading.Lock()
        self.request_cache = process_request_cache()
        # a batch's questions run at once (their LLM calls batch in the engine); the threads
        # live as long as the stage: starting them per batch cost more than cached questions
        self._threads = ThreadPoolExecutor(max_workers=QUESTION_THREADS,
                                           thread_name_prefix=self.name)
        try:
            self.warm_up()
        except Exception as exc:  # the first question meets it again and records it
            print(f"[{self.name}] warm-up failed: {type(exc).__name__}: {exc}", flush=True)

    def warm_up(self) -> None:
        """Load what every question needs now, while the upstream stages start (a question
        that met it first would build it while every other one waited)."""
        self.questions  # noqa: B018 (loads it)
        for backbone in self.job.backbones:  # a tokenizer's vocabulary loads in 0.3 s
            counter_for(backbone)
        for ids in self.forbidden.values():  # each conversation's id pattern, compiled once
            ids_in("", ids)  # (its questions meet it at once, each compiling it otherwise)

    @classmethod
    def store_for(cls, run_dir: Path) -> StageStore:
        return stage_store(run_dir, cls.name)

    def stored(self) -> dict[str, Row]:
        """The records of earlier attempts that this run may reuse, by key."""
        return self.reusable(self.store)

    def reusable(self, store: StageStore) -> dict[str, Row]:
        """A store's successful records in force, by key."""
        expected = expected_deps(self.job.deps, store.stage, self.data)
        return {r["key"]: r for r in store.latest(expected).to_pylist()}

    def deps_of(self, qid: str) -> str:
        """The `deps` of this stage's records of question `qid`."""
        return record_deps(self.job.deps.get(self.name, {}), self.name, self.data.get(qid))

    def keys(self, qid: str) -> list[str]:
        """The keys of the records this stage keeps for a question."""
        return [qid]

    @cached_property
    def prepared(self) -> PreparedBenchmark:
        return shared_prepared(Path(self.job.bench_dir))

    @cached_property
    def data(self) -> dict[str, QuestionData]:
        """Per question, the hashes of the data its records are made from."""
        return shared_data(Path(self.job.bench_dir))

    @cached_property
    def questions(self) -> dict[str, Question]:
        return {q.qid: q for q in questions_from_table(self.prepared.questions)}

    def proxy(self, backbone: BackboneConfig, qid: str, stage: str | None = None
              ) -> EngineProxy:
        stage = stage or self.name
        conv_id = self.questions[qid].conv_id if qid in self.questions else ""
        guarded = self.forbidden.get(conv_id, ()) if stage in GUARDED_STAGES else ()
        return self.probe.llm(EngineProxy(self._engine(backbone), backbone, stage, qid, conv_id,
                                          guarded, self.job.order.get(qid, 0)))

    @cached_property
    def forbidden(self) -> dict[str, tuple[str, ...]]:
        """Per conversation, the gold-derived ids no guarded prompt may contain (read here,
        by the harness, to check prompts; never given to a method)."""
        gold = gold_from_table(self.prepared.questions)
        evidence = {e for g in gold.values() for e in g.evidence_ids}
        messages = self.prepared.messages
        chosen = messages.filter(pc.is_in(messages.column("msg_id"),
                                          pa.array(sorted(evidence), pa.string())))
        return gold_strings({m.msg_id: m for m in messages_from_table(chosen)},
                            self.questions.values(), gold)

    def _engine(self, backbone: BackboneConfig) -> EngineCall:
        """The backbone's engine, looked up once per stage process."""
        with self._engines_lock:
            if backbone.name not in self._engines:
                self._engines[backbone.name] = (
                    (local_engine if self.job.local else ray_engine)(
                        backbone, self.request_cache))
            return self._engines[backbone.name]

    def __call__(self, rows: list[Row]) -> list[Row]:
        """A call's flow rows through this stage, its records and calls written before they
        move on (a streaming actor runs several calls at once)."""
        results = self.each(rows, self.step)
        write_records(self.calls, self.probe, [(self, results)])
        return [r.flow for r in results]

    def each(self, rows: list[Row], step: Callable[[Row], T]) -> list[T]:
        """`step` over a call's rows: in this thread for one, at once in the stage's threads
        for several."""
        return [step(row) for row in rows] if len(rows) == 1 else list(
            self._threads.map(step, rows))

    def records(self, results: list[StageResult]) -> list[tuple[StageStore, list[Row]]]:
        """The stage's records of a call's results, per store."""
        return [(self.store, [record for r in results for record in r.output.records])]

    def step(self, row: Row) -> StageResult:
        """One question through this stage; a failure becomes an error record."""
        if not row["ok"]:
            return StageResult(row)
        self.probe.question(self.name, row["qid"])
        keys = self.keys(row["qid"])
        stored = {k: self.done[k] for k in keys if k in self.done}
        if len(stored) == len(keys):  # finished in an earlier attempt
            return StageResult(self.passed(row, stored.values()))
        read = {k: row[k] for k in (*(f.name for f in FLOW_BASE), *self.reads)}
        started = time.perf_counter()
        try:
            output = self.process(read, stored)
        except Exception as exc:  # one question's failure is a record, never a lost batch
            message = f"{type(exc).__name__}: {exc}"
            print(f"[{self.name}] {row['qid']} failed: {message}\n{traceback.format_exc()}",
                  flush=True)
            output = Output([self.record(row, ok=False, error=message,
                                         latency_s=time.perf_counter() - started)])
        return StageResult(self.passed(row, output.records), output)

    def passed(self, row: Row, records: Iterable[Row]) -> Row:
        """The flow row after this stage: its columns from the question's record, or the
        first failure."""
        records = list(records)
        failed = [r for r in records if not r["ok"]]
        if failed:
            return {**row, "ok": False, "error": f"{self.name}: {failed[0]['error']}"}
        own = next((r for r in records if r["key"] == row["qid"]), {})
        return {**row, **{column: own[column] for column in self.writes}}

    def record(self, row: Mapping[str, Any], key: str | None = None, **values: Any) -> Row:
        return {"run_id": self.job.run_id, "key": key or row["qid"], "qid": row["qid"],
                "conv_id": row["conv_id"], "ok": True, "deps": self.deps_of(row["qid"]),
                "code": self.job.code, **values}

    def process(self, row: Row, stored: Mapping[str, Row]) -> Output:
        """The question's records not in `stored` (the flow `row` holds what it `reads`)."""
        raise NotImplementedError


class GoldStage(Stage):
    """Stages allowed to read gold: options for choice questions, answers for the judge."""

    def warm_up(self) -> None:
        super().warm_up()
        self.gold  # noqa: B018

    @cached_property
    def gold(self) -> dict[str, Gold]:
        return gold_from_table(self.prepared.questions)


def shared_prepared(bench_dir: Path) -> PreparedBenchmark:
    """The prepared benchmark in `bench_dir`, read once per process while it is unchanged
    (every stage of every run on it shares the tables)."""
    manifest = bench_dir / MANIFEST_FILE
    return _read_prepared(str(bench_dir), manifest.stat().st_mtime_ns if manifest.exists()
                          else 0)


@lru_cache(maxsize=4)
def _read_prepared(bench_dir: str, _changed: int) -> PreparedBenchmark:
    return read_prepared(Path(bench_dir))


def shared_data(bench_dir: Path) -> dict[str, QuestionData]:
    """`question_data` of the prepared benchmark in `bench_dir`, once per process while it
    is unchanged."""
    manifest = bench_dir / MANIFEST_FILE
    return _question_data(str(bench_dir), manifest.stat().st_mtime_ns if manifest.exists()
                          else 0)


@lru_cache(maxsize=4)
def _question_data(bench_dir: str, changed: int) -> dict[str, QuestionData]:
    prepared = _read_prepared(bench_dir, changed)
    return question_data(prepared.messages, prepared.questions)


def flow_schema(stages: Iterable[type[Stage]]) -> pa.Schema:
    """The flow rows' columns: the base ones, then what each stage writes, in flow order."""
    return pa.schema([*FLOW_BASE, *(STAGE_SCHEMAS[s.name].field(column)
                                    for s in stages for column in s.writes)])


def process_request_cache() -> RequestCache:
    """The request cache of this process's stages (at the default path as it is now): one,
    written behind their calls (a call never waits for another process's write) and flushed
    before the records of the questions that made them (`write_records`)."""
    return _request_cache(default_request_cache_path())


@functools.cache
def _request_cache(path: Path) -> RequestCache:
    return RequestCache(path, write_behind=True)


def write_records(calls: StageStore, probe: Probe,
                  results: list[tuple[Stage, list[StageResult]]]) -> None:
    """The stages' results of one call on disk, with those of the process's other calls
    that end meanwhile (`WRITER`): calls first, so a record on disk always has its calls (a
    kill in between redoes the question, whose calls then count once, by identity), and the
    answers of those calls in the request cache before either."""
    for cache in dict.fromkeys(stage.request_cache for stage, _ in results):
        cache.flush()
    WRITER.write(Batch(
        calls, [row for stage, done in results
                for row in call_rows(stage.job.run_id, done, stage.deps_of)],
        [(stage.name, r.flow["qid"]) for stage, done in results for r in done],
        [append for stage, done in results for append in stage.records(done)], probe))


def call_rows(run_id: str, results: Iterable[StageResult], deps_of: Callable[[str], str]
              ) -> list[Row]:
    """The calls rows of a stage's results; `deps_of(qid)`: the `deps` of the stage's
    records of a question, so that the count can tell a redone record's calls from those
    it replaced (a memory call's, of its run's memory `memory:<conv_id>`: the stage's own,
    whichever question's batch recorded it)."""
    return [_call_row(run_id, call, deps_of(call.qid))
            for result in results for call in result.output.calls]


def _call_row(run_id: str, call: CallRecord, deps: str) -> Row:
    row = {k: getattr(call, k) for k in CALLS_SCHEMA.names}
    # a reused memory call yields to the call that built it, should both be on record
    order = {"written_at": 0.0} if call.reused else {}
    return {**row, **order, "run_id": run_id,
            "key": f"{call.stage}|{call.qid}|{call.request_hash}", "conv_id": None,
            "ok": call.error is None, "deps": deps}
