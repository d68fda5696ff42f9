"""The pipeline's stages, run by Ray Data actor pools over batches of questions.

retrieve (CPU: indexes, discovery, offline memory) -> construct (the method's LLM steps) ->
answer -> judge. Every stage writes its records for a batch before returning it, skips
questions it already finished in an earlier attempt (returning the stored record), and turns
a failure into an error record; a question that failed upstream passes through untouched.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tmem_core.benchmarks import get_protocol, read_prepared
from tmem_core.evaluation import (
    answer_prompt,
    choice_correct,
    exact_match,
    gold_strings,
    normalise,
    parse_verdict,
    says_not_available,
    stemmer,
)
from tmem_core.llm import (
    CALLS_SCHEMA,
    BackboneConfig,
    CallRecord,
    ChatRequest,
    EngineCall,
    RequestCache,
    Sampling,
    counter_for,
)
from tmem_core.methods import Evidence, MethodEnv, build_method
from tmem_core.methods._context import Context, ContextMethod, step_record_json
from tmem_core.pipeline._config import RunSpec, import_plugins
from tmem_core.pipeline._engine import (
    EngineProxy,
    FailingProxy,
    local_engine,
    ray_engine,
)
from tmem_core.pipeline._json import to_json
from tmem_core.prompts import Prompt, as_chat, load_prompt
from tmem_core.results import (
    CALIBRATION_STAGE,
    MEMORY_STAGE,
    StageStore,
    calibration_store,
    calls_store,
    conversation_of,
    memory_qid,
    stage_store,
)
from tmem_core.retrieval import conversations_from_table
from tmem_core.schema import (
    Gold,
    Question,
    gold_from_table,
    messages_from_table,
    questions_from_table,
)

FLOW_SCHEMA = pa.schema([
    pa.field("run_id", pa.string()), pa.field("qid", pa.string()),
    pa.field("conv_id", pa.string()), pa.field("ok", pa.bool_()),
    pa.field("error", pa.string()), pa.field("evidence", pa.string()),
    pa.field("context", pa.string()), pa.field("prediction", pa.string()),
])
QUESTION_THREADS = 64  # questions of a batch in flight at once, per stage actor
JUDGE_RETRIES = 1  # an unparseable verdict is asked once more, then becomes an error record
FREE_VERDICT_TOKENS = 256  # a judge prompt without labels: a reason, then the verdict


@dataclass(frozen=True)
class StageJob:
    """Everything a stage actor needs, picklable."""

    run: RunSpec
    run_dir: str
    bench_dir: str
    backbone: BackboneConfig
    judges: tuple[BackboneConfig, ...]
    fault: str = ""  # test-only fault injection, see `Fault`
    local: bool = False  # engines in this process instead of Ray actors (the plain loop)


@dataclass(frozen=True)
class Fault:
    """A fault injected for tests: `stage=<name>,qid=<qid>,kind=exit|llm_error[,once=<file>]`.

    `exit` kills the stage's worker process when it reaches the question (once, if a marker
    file is given); `llm_error` makes every LLM call of that question in that stage fail.
    """

    stage: str
    qid: str
    kind: str
    once: str = ""

    @classmethod
    def parse(cls, spec: str) -> Fault | None:
        return cls(**dict(part.split("=", 1) for part in spec.split(","))) if spec else None

    def hits(self, stage: str, qid: str) -> bool:
        if (self.stage, self.qid) != (stage, qid):
            return False
        if self.once:
            if Path(self.once).exists():
                return False
            Path(self.once).touch()
        return True


@dataclass
class StageResult:
    flow: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    controls: list[dict[str, Any]] = field(default_factory=list)  # the judge's calibration


class Stage:
    """Common machinery: stored records, resume, per-question threads, error records."""

    name = ""

    def __init__(self, job: StageJob) -> None:
        self.job = job
        import_plugins(job.run.plugins)  # the run's own methods and benchmarks, in this actor
        run_dir = Path(job.run_dir)
        self.store = self.store_for(run_dir)
        self.calls = calls_store(run_dir)
        self.done = {r["key"]: r for r in self.store.latest().to_pylist()}
        self.fault = Fault.parse(job.fault)
        self._engines: dict[str, EngineCall] = {}
        self._engines_lock = threading.Lock()
        # a batch's questions run at once (their LLM calls batch in the engine); the threads
        # live as long as the stage: starting them per batch cost more than cached questions
        self._threads = ThreadPoolExecutor(max_workers=QUESTION_THREADS,
                                           thread_name_prefix=self.name)
        try:
            self.warm_up()
        except Exception as exc:  # the first question meets it again and records it
            print(f"[{self.name}] warm-up failed: {type(exc).__name__}: {exc}", flush=True)

    def warm_up(self) -> None:
        """Load what every question needs now, while the upstream stages start."""

    @classmethod
    def store_for(cls, run_dir: Path) -> StageStore:
        return stage_store(run_dir, cls.name)

    @cached_property
    def prepared(self) -> Any:
        return read_prepared(Path(self.job.bench_dir))

    @cached_property
    def questions(self) -> dict[str, Question]:
        return {q.qid: q for q in questions_from_table(self.prepared.questions)}

    def proxy(self, backbone: BackboneConfig, qid: str, stage: str | None = None
              ) -> EngineProxy:
        call = self._engine(backbone)
        stage = stage or self.name
        broken = (self.fault is not None and self.fault.kind == "llm_error"
                  and self.fault.hits(stage, qid))
        conv_id = self.questions[qid].conv_id if qid in self.questions else ""
        return (FailingProxy if broken else EngineProxy)(call, backbone, stage, qid, conv_id,
                                                         self.forbidden.get(conv_id, ()))

    @cached_property
    def forbidden(self) -> dict[str, tuple[str, ...]]:
        """Per conversation, the gold-derived strings no prompt may contain (read here, by
        the harness, to check prompts; never given to a method)."""
        gold = gold_from_table(self.prepared.questions)
        evidence = {e for g in gold.values() for e in g.evidence_ids}
        messages = self.prepared.messages
        chosen = messages.filter(pc.is_in(messages.column("msg_id"),
                                          pa.array(sorted(evidence), pa.string())))
        return gold_strings({m.msg_id: m for m in messages_from_table(chosen)},
                            questions_from_table(self.prepared.questions), gold)

    def _engine(self, backbone: BackboneConfig) -> EngineCall:
        """The backbone's engine, looked up once per stage process."""
        with self._engines_lock:
            if backbone.name not in self._engines:
                self._engines[backbone.name] = (
                    (local_engine if self.job.local else ray_engine)(backbone, RequestCache()))
            return self._engines[backbone.name]

    def __call__(self, batch: pa.Table) -> pa.Table:
        results = list(self._threads.map(self.step, batch.to_pylist()))
        self.write(results)
        self.calls.append(_call_rows(self.job.run.run_id, results))
        return _flow_table(results)

    def write(self, results: list[StageResult]) -> None:
        """The stage's records of a batch, one part file per store."""
        self.store.append(_records(results))

    def step(self, row: dict[str, Any]) -> StageResult:
        """One question through this stage; a failure becomes an error record."""
        if not row["ok"]:
            return StageResult(row)
        if self.fault is not None and self.fault.kind == "exit" and self.fault.hits(
                self.name, row["qid"]):
            os._exit(1)  # a worker dying mid-batch
        started = time.perf_counter()
        try:
            return self.process(row)
        except Exception as exc:  # one question's failure is a record, never a lost batch
            message = f"{type(exc).__name__}: {exc}"
            print(f"[{self.name}] {row['qid']} failed: {message}\n{traceback.format_exc()}",
                  flush=True)
            record = self.record(row, ok=False, error=message,
                                 latency_s=time.perf_counter() - started)
            return StageResult({**row, "ok": False, "error": f"{self.name}: {message}"},
                               [record])

    def record(self, row: dict[str, Any], key: str | None = None, **values: Any
               ) -> dict[str, Any]:
        return {"run_id": self.job.run.run_id, "key": key or row["qid"], "qid": row["qid"],
                "conv_id": row["conv_id"], "ok": True, **values}

    def process(self, row: dict[str, Any]) -> StageResult:
        raise NotImplementedError


def _flow_table(results: list[StageResult]) -> pa.Table:
    return pa.Table.from_pylist([r.flow for r in results], schema=FLOW_SCHEMA)


def _records(results: list[StageResult]) -> list[dict[str, Any]]:
    return [record for result in results for record in result.records]


def _call_rows(run_id: str, results: list[StageResult]) -> list[dict[str, Any]]:
    return [_call_row(run_id, call) for result in results for call in result.calls]


def _call_row(run_id: str, call: CallRecord) -> dict[str, Any]:
    row = {k: getattr(call, k) for k in CALLS_SCHEMA.names}
    # a reused memory call yields to the call that built it, should both be on record
    order = {"written_at": 0.0} if call.reused else {}
    return {**row, **order, "run_id": run_id,
            "key": f"{call.stage}|{call.qid}|{call.request_hash}", "conv_id": None,
            "ok": call.error is None}


def _accounted_memories(run_dir: Path) -> set[str]:
    """Conversations whose memory calls the run has on record (from an earlier attempt)."""
    calls = calls_store(run_dir).read_all()
    owners = calls.filter(pc.equal(calls.column("stage"), MEMORY_STAGE)).column("qid")
    return {conversation_of(q) for q in owners.to_pylist()}


class MethodStage(Stage):
    """Stages that hold the run's method (its indexes load lazily, once per actor).

    A method with offline memory (`prepare(conv_id, llm)`, e.g. T2Mem's metadata) builds it
    for a question's conversation first; it is cached on disk, so after the first stage that
    builds it, later stages and actors only load it. Its calls count as stage "memory".
    """

    def __init__(self, job: StageJob, shares: MethodStage | None = None) -> None:
        """`shares`: another stage of this process whose method (and memory lock) to use."""
        self._prepare_lock: threading.Lock = (shares._prepare_lock if shares
                                              else threading.Lock())
        self._memory_accounted: set[str] = (  # conversations whose memory the run counted
            shares._memory_accounted if shares else _accounted_memories(Path(job.run_dir)))
        if shares is not None:
            self.method = shares.method
        super().__init__(job)  # last: it warms up, which builds the method

    @cached_property
    def method(self) -> ContextMethod:
        run = self.job.run
        env = MethodEnv(conversations_from_table(self.prepared.messages), run.top_k,
                        run.budget)
        return build_method(run.method, env, run.params)

    def warm_up(self) -> None:
        self.method  # noqa: B018 (builds the method)

    def prepare_memory(self, question: Question) -> list[CallRecord]:
        """Offline memory of the question's conversation, if the method has one."""
        prepare: Callable[..., Any] | None = getattr(self.method, "prepare", None)
        if prepare is None:
            return []
        llm = self.proxy(self.job.backbone, question.qid, stage=MEMORY_STAGE)
        with self._prepare_lock:  # the batch's threads share one memory per conversation
            stats = prepare(question.conv_id, llm)
            first = question.conv_id not in self._memory_accounted
            self._memory_accounted.add(question.conv_id)
        owner = memory_qid(question.conv_id)  # the run's memory, not this question's
        # what an earlier build cost, once per run; the calls of this prepare always (they
        # are new: a retry of what failed before, under the failed call's key)
        reused = [dataclasses.replace(c, stage=MEMORY_STAGE) for c in
                  getattr(stats, "reused_calls", ())] if first else []
        return [dataclasses.replace(c, qid=owner) for c in [*llm.records, *reused]]


class RetrieveStage(MethodStage):
    name = "retrieve"
    def process(self, row: dict[str, Any]) -> StageResult:
        if (stored := self.done.get(row["qid"])) is not None:
            return StageResult({**row, "evidence": _evidence_json(stored)})
        question = self.questions[row["qid"]]
        calls = self.prepare_memory(question)
        started = time.perf_counter()
        evidence = self.method.retrieve(question)
        record = self.record(row, evidence_ids=list(evidence.ids), trace=to_json(evidence.trace),
                             latency_s=time.perf_counter() - started)
        return StageResult({**row, "evidence": _evidence_json(record)}, [record], calls)


def _evidence_json(record: dict[str, Any]) -> str:
    return json.dumps({"ids": record["evidence_ids"], "trace": record["trace"]})


class ConstructStage(MethodStage):
    name = "construct"
    def process(self, row: dict[str, Any]) -> StageResult:
        if (stored := self.done.get(row["qid"])) is not None:
            return StageResult({**row, "context": _context_json(stored)})
        question = self.questions[row["qid"]]
        raw = json.loads(row["evidence"])
        trace = json.loads(raw["trace"]) if raw["trace"] else None
        evidence = Evidence(question.qid, self.job.run.method, tuple(raw["ids"]), trace)
        memory_calls = self.prepare_memory(question)
        llm = self.proxy(self.job.backbone, question.qid)
        started = time.perf_counter()
        context = self.method.construct(question, evidence, llm, self.job.run.budget,
                                        counter_for(self.job.backbone))
        record = self.record(row, **_context_values(context),
                             latency_s=time.perf_counter() - started)
        return StageResult({**row, "context": _context_json(record)}, [record],
                           memory_calls + llm.records)


def _context_values(context: Context) -> dict[str, Any]:
    return {"kind": context.kind, "context": context.text, "context_ids": list(context.ids),
            "tokens": context.tokens, "trace": to_json(context.trace),
            "degradation": json.dumps(context.trace.get("degradation", {}), sort_keys=True),
            "steps": step_record_json(context)}


def _context_json(record: dict[str, Any]) -> str:
    return json.dumps({k: record[k] for k in ("kind", "context", "context_ids", "tokens")})


class GoldStage(Stage):
    """Stages allowed to read gold: options for choice questions, answers for the judge."""

    @cached_property
    def gold(self) -> dict[str, Gold]:
        return gold_from_table(self.prepared.questions)


class AnswerStage(GoldStage):
    name = "answer"
    def process(self, row: dict[str, Any]) -> StageResult:
        if (stored := self.done.get(row["qid"])) is not None:
            return StageResult({**row, "prediction": stored["prediction"]})
        question = self.questions[row["qid"]]
        context = json.loads(row["context"])
        gold = self.gold[question.qid]
        messages, prompt = answer_prompt(
            question, context["kind"], context["context"],
            get_protocol(self.job.run.benchmark.name),
            gold.options if gold.answer_kind == "choice" else None)
        llm = self.proxy(self.job.backbone, question.qid)
        request = ChatRequest(as_chat(messages))
        (response,) = llm.generate([request])
        values: dict[str, Any] = {"prompt_name": prompt.name, "prompt_sha256": prompt.sha256,
                                  "prompt": json.dumps(messages),
                                  "latency_s": response.latency_s}
        if not response.ok:
            record = self.record(row, ok=False, error=response.error, prediction=None, **values)
            return StageResult({**row, "ok": False, "error": f"answer: {response.error}"},
                               [record], llm.records)
        prediction = response.text.strip()
        record = self.record(row, prediction=prediction, **values)
        return StageResult({**row, "prediction": prediction}, [record], llm.records)


@dataclass(frozen=True)
class Verdict:
    score: float | None
    scored_by: str  # "llm", "choice" (exact letter) or "rule" (LoCoMo's not-mentioned rule)
    raw: str = ""
    prompt_name: str | None = None
    prompt_sha256: str | None = None
    error: str | None = None


class JudgeStage(GoldStage):
    name = "judge"
    def warm_up(self) -> None:
        stemmer()

    def __init__(self, job: StageJob) -> None:
        super().__init__(job)
        self.calibration = calibration_store(Path(job.run_dir))
        self.done_controls = {r["key"]: r for r in self.calibration.latest().to_pylist()}

    def write(self, results: list[StageResult]) -> None:
        super().write(results)
        self.calibration.append([c for result in results for c in result.controls])

    def process(self, row: dict[str, Any]) -> StageResult:
        question, gold = self.questions[row["qid"]], self.gold[row["qid"]]
        result = StageResult(row)
        scores = []
        for judge in self.job.judges:
            for repeat in range(self.job.run.judge_repeats):
                key = f"{row['qid']}|{judge.name}|{repeat}"
                stored = self.done.get(key)
                if stored is None:
                    llm = self.proxy(judge, question.qid)
                    stored = self._judge(row, key, question, gold, judge.name, repeat, llm)
                    result.records.append(stored)
                    result.calls.extend(llm.records)
                if stored["ok"]:
                    scores.append(stored["score"])
        for judge in self.job.judges:
            result.controls += self._controls(row, question, gold, judge, result.calls)
        failed = [r for r in result.records if not r["ok"]]
        if failed:
            result.flow = {**row, "ok": False, "error": f"judge: {failed[0]['error']}"}
        return result

    def _judge(self, row: dict[str, Any], key: str, question: Question, gold: Gold,
               judge: str, repeat: int, llm: EngineProxy) -> dict[str, Any]:
        prediction = row["prediction"] or ""
        verdict = self._verdict(question, gold, prediction, repeat, llm)
        token_f1 = get_protocol(self.job.run.benchmark.name).token_f1
        f1 = token_f1(prediction, gold.answer, question.category) if token_f1 else None
        em = (exact_match(prediction, gold.answer)
              if gold.answer is not None and gold.answer_kind == "text" else None)
        return self.record(
            row, key=key, ok=verdict.error is None, error=verdict.error, judge=judge,
            repeat=repeat, category=question.category, answer_kind=gold.answer_kind,
            scored_by=verdict.scored_by, score=verdict.score, f1=f1, exact_match=em,
            raw=verdict.raw, prompt_name=verdict.prompt_name,
            prompt_sha256=verdict.prompt_sha256)

    def _controls(self, row: dict[str, Any], question: Question, gold: Gold,
                  judge: BackboneConfig, calls: list[CallRecord]) -> list[dict[str, Any]]:
        """The judge's verdicts on this question's control answers not yet recorded."""
        if get_protocol(self.job.run.benchmark.name).judge_for(question, gold) is None:
            return []  # scored without an LLM: nothing to calibrate
        records = []
        for control, prediction, other in self._control_answers(question, gold):
            key = f"{question.qid}|{judge.name}|{control}"
            if key in self.done_controls:
                continue
            llm = self.proxy(judge, question.qid, CALIBRATION_STAGE)
            verdict = self._verdict(question, gold, prediction, 0, llm)
            calls.extend(llm.records)
            records.append(self.record(
                row, key=key, ok=verdict.error is None, error=verdict.error, judge=judge.name,
                control=control, other_qid=other, category=question.category,
                expected=1.0 if control == "gold" else 0.0, score=verdict.score,
                raw=verdict.raw, prompt_name=verdict.prompt_name,
                prompt_sha256=verdict.prompt_sha256))
        return records

    def _control_answers(self, question: Question, gold: Gold
                         ) -> list[tuple[str, str, str | None]]:
        """(control, prediction, other qid): the gold answer, then another question's."""
        if not gold.answer:
            return []
        controls: list[tuple[str, str, str | None]] = [("gold", gold.answer, None)]
        other = self._other_gold(question, gold)
        if other is not None:
            controls.append(("other", other.answer or "", other.qid))
        return controls

    def _other_gold(self, question: Question, gold: Gold) -> Gold | None:
        """Another question's gold answer that differs once normalised: the next question by
        qid (wrapping) of the same category, else of any category."""
        by_qid = sorted(self.questions.values(), key=lambda q: q.qid)
        start = next(i for i, q in enumerate(by_qid) if q.qid == question.qid)
        ring = by_qid[start + 1:] + by_qid[:start]
        for candidate in sorted(ring, key=lambda q: q.category != question.category):
            other = self.gold[candidate.qid]
            if other.answer and normalise(other.answer) != normalise(gold.answer or ""):
                return other
        return None

    def _verdict(self, question: Question, gold: Gold, prediction: str, repeat: int,
                 llm: EngineProxy) -> Verdict:
        protocol = get_protocol(self.job.run.benchmark.name)
        prompt_ref = protocol.judge_for(question, gold)
        if prompt_ref is None:
            if gold.answer_kind == "choice":
                labels = tuple(o.label for o in gold.options or ())
                return Verdict(float(choice_correct(prediction, gold.answer or "", labels)),
                               "choice")
            return Verdict(float(says_not_available(prediction)), "rule")
        prompt = load_prompt(self.job.run.judge_prompts.get(prompt_ref, prompt_ref))
        raw = ""
        for attempt in range(1 + JUDGE_RETRIES):
            request = judge_request(prompt, question, gold, prediction, repeat, attempt)
            (response,) = llm.generate([request])
            if not response.ok:
                return Verdict(None, "llm", raw, prompt.name, prompt.sha256, response.error)
            raw = response.text
            label = response.parsed["verdict"] if response.parsed else raw
            parsed = parse_verdict(str(label))
            if parsed is not None:
                return Verdict(float(parsed), "llm", raw, prompt.name, prompt.sha256)
        return Verdict(None, "llm", raw, prompt.name, prompt.sha256,
                       f"unparseable verdict after {1 + JUDGE_RETRIES} attempts: {raw[:120]!r}")


def judge_request(prompt: Prompt, question: Question, gold: Gold, prediction: str, repeat: int,
                  attempt: int) -> ChatRequest:
    """A judge's call: greedy on the first attempt of the first repeat, sampled otherwise; a
    prompt without labels (an upstream file, which may ask for a reason first) gets room for
    a sentence before its verdict."""
    messages = prompt.chat(question=question.question, answer=gold.answer or "",
                           response=prediction)
    sampling = Sampling(temperature=0.0 if repeat == 0 and attempt == 0 else 0.7,
                        max_tokens=32 if prompt.labels else FREE_VERDICT_TOKENS,
                        seed=repeat * 100 + attempt)
    return ChatRequest(messages, sampling, schema=prompt.verdict_schema())


STAGES: tuple[type[Stage], ...] = (RetrieveStage, ConstructStage, AnswerStage, JudgeStage)


class FusedStages:
    """Every stage in one actor, as Ray Data fuses map operators: each question of a batch
    goes through all stages in one thread, so no batch waits at a stage boundary and no
    flow row crosses a process. Records are stored per stage, exactly as unfused."""

    name = "stages"

    def __init__(self, job: StageJob) -> None:
        retrieve = RetrieveStage(job)
        self.stages = [retrieve, ConstructStage(job, shares=retrieve), AnswerStage(job),
                       JudgeStage(job)]
        self.run_id = job.run.run_id
        self.calls = calls_store(Path(job.run_dir))
        self._threads = ThreadPoolExecutor(max_workers=QUESTION_THREADS,
                                           thread_name_prefix=self.name)

    def __call__(self, batch: pa.Table) -> pa.Table:
        per_question = list(self._threads.map(self._through_all, batch.to_pylist()))
        for index, stage in enumerate(self.stages):
            stage.write([results[index] for results in per_question])
        self.calls.append(_call_rows(self.run_id, [r for rs in per_question for r in rs]))
        return _flow_table([results[-1] for results in per_question])

    def _through_all(self, row: dict[str, Any]) -> list[StageResult]:
        results = []
        for stage in self.stages:
            results.append(stage.step(row))
            row = results[-1].flow
        return results


KEEP_RUNS = 4  # runs whose stages an actor keeps built (runs flow through in order)


class PerRun:
    """A stage (or the fused stages) for every run of a sweep, in one actor: each row goes to
    its run's instance, built at the run's first batch (the first run's at once, to warm up
    while the pipeline starts). The actor pools live for the whole sweep."""

    def __init__(self, stage: type[Stage] | type[FusedStages], jobs: dict[str, StageJob]
                 ) -> None:
        self.stage, self.jobs = stage, jobs
        self._runs: OrderedDict[str, Stage | FusedStages] = OrderedDict()
        self._for(next(iter(jobs)))

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.concat_tables([self._for(run_id)(rows) for run_id, rows in split_by_run(batch)])

    def _for(self, run_id: str) -> Stage | FusedStages:
        if run_id not in self._runs:
            self._runs[run_id] = self.stage(self.jobs[run_id])
            while len(self._runs) > KEEP_RUNS:
                self._runs.popitem(last=False)
        self._runs.move_to_end(run_id)
        return self._runs[run_id]


def split_by_run(batch: pa.Table) -> list[tuple[str, pa.Table]]:
    """A batch's rows grouped by `run_id`, runs in order of first appearance."""
    run_ids = batch.column("run_id")
    return [(run_id, batch.filter(pc.equal(run_ids, run_id)))
            for run_id in dict.fromkeys(run_ids.to_pylist())]
