"""A question's page: the question, the context as the answer model saw it (forest or steps
drawn), gold evidence marked, prediction and gold answer, verdicts, every LLM call."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from tmem_core.evaluation._basis import UNTRACEABLE
from tmem_core.methods import render_message
from tmem_core.results import MEMORY_STAGE, RECORD_STAGES
from tmem_core.results._evidence import evidence_basis
from tmem_core.results._layout import CALIBRATION_STAGE, MEMORY_QUALITY_STAGE
from tmem_core.schema import Gold, Message
from tmem_core.viewer._data import (
    Benchmark,
    QuestionRecords,
    Record,
    SweepData,
    benchmark,
    question_records,
)
from tmem_core.viewer._evidence import ContextLine, context_lines, panels
from tmem_core.viewer._views import QuestionRow, data_dir, question_rows, run_rows, verdict

CALL_STAGES = (MEMORY_STAGE, *RECORD_STAGES, CALIBRATION_STAGE,  # a call's `stage`, in order
               MEMORY_QUALITY_STAGE)


@dataclass(frozen=True)
class ChatTurn:
    role: str
    content: str


@dataclass(frozen=True)
class GoldEvidence:
    id: str
    in_context: bool | None  # shown or read (see `evidence_basis`); None: not measurable
    text: str


@dataclass(frozen=True)
class Verdict:
    judge: str
    repeat: int
    verdict: str  # correct / wrong
    score: float
    scored_by: str
    raw: str
    f1: float | None
    exact_match: bool | None
    prompt_name: str | None


@dataclass(frozen=True)
class Call:
    stage: str
    backbone: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float
    cached: bool


@dataclass(frozen=True)
class Failure:
    store: str
    stage: str
    error: str
    written_at: float


@dataclass(frozen=True)
class Stale:
    """A record made under dependencies the run no longer has (never scored)."""

    store: str
    key: str
    written_at: float


@dataclass(frozen=True)
class ContextView:
    kind: str  # flat, forest, memory
    tokens: int
    lines: list[ContextLine]
    forest: object | None = None  # T-MEM's (the method's registered view draws it)
    timeline: object | None = None  # T2Mem's steps


@dataclass(frozen=True)
class QuestionView:
    run_id: str
    run_label: str
    method: str
    row: QuestionRow
    conv_id: str
    asking_user: str | None
    question_time: str | None
    answer_kind: str
    evidence_basis: str | None  # shown, read, untraceable; None before the construct stage
    evidence: list[GoldEvidence]
    context: ContextView | None  # None until the construct stage has a record
    prompt: list[ChatTurn]
    verdicts: list[Verdict]
    calls: list[Call]
    failures: list[Failure]
    stale: list[Stale]  # its keys with no record under the run's dependencies now


def question_views(data: SweepData, run_id: str, qids: Collection[str]
                   ) -> dict[str, QuestionView]:
    """The pages of the run's questions `qids` (unknown ones left out)."""
    runs = {r.run_id: r for r in run_rows(data)}
    if run_id not in runs:
        return {}
    rows = {r.qid: r for r in question_rows(data, run_id, qids)}
    wanted = [q for q in qids if q in rows]
    run = _Run(runs[run_id].label, runs[run_id].method, data.results.gold[run_id],
               benchmark(data_dir(data, run_id)))
    records = question_records(data.run_dirs[run_id], wanted, run.bench.data,
                               {q: run.bench.questions[q].conv_id for q in wanted})
    return {q: _view(run_id, run, rows[q], records[q]) for q in wanted}


@dataclass(frozen=True)
class _Run:
    label: str
    method: str
    gold: Mapping[str, Gold]
    bench: Benchmark


def _view(run_id: str, run: _Run, row: QuestionRow, records: QuestionRecords) -> QuestionView:
    question, gold = run.bench.questions[row.qid], run.gold[row.qid]
    construct, answer = _only(records.latest["construct"]), _only(records.latest["answer"])
    basis, linked = (evidence_basis(construct["kind"], construct.get("payload"),
                                    construct.get("trace")) if construct else (None, []))
    traced = {*construct["context_ids"], *linked} if construct else set()
    return QuestionView(
        run_id, run.label, run.method, row, question.conv_id, question.asking_user,
        question.question_time.isoformat() if question.question_time else None,
        gold.answer_kind, basis,
        [GoldEvidence(i, None if basis == UNTRACEABLE else i in traced,
                      _message(run.bench.messages, i)) for i in gold.evidence_ids],
        _context(run.method, construct, run.bench.messages, set(gold.evidence_ids))
        if construct else None,
        _prompt(answer),
        [_verdict(r) for r in sorted(records.latest["judge"],
                                     key=lambda r: (r["judge"], r["repeat"]))],
        [_call(r) for r in sorted(records.latest["calls"], key=_call_order)],
        [Failure(r["store"], r.get("stage") or r["store"], r["error"] or "", r["written_at"])
         for r in records.failed],
        [Stale(r["store"], r["key"], r["written_at"]) for r in records.stale])


def _only(records: list[Record]) -> Record | None:
    """The one record of a stage keyed by qid (retrieve, construct, answer)."""
    return records[0] if records else None


def _prompt(answer: Record | None) -> list[ChatTurn]:
    """The answer stage's chat messages, as sent."""
    if answer is None or not answer["prompt"]:
        return []
    return [ChatTurn(m["role"], m["content"]) for m in json.loads(answer["prompt"])]


def _context(method: str, construct: Record, messages: Mapping[str, Message], gold: set[str]
             ) -> ContextView:
    """The context's lines, and the panel its method's view draws (a forest, a timeline)."""
    text = construct["context"] or ""
    drawn = panels(method, construct.get("payload"), text, messages, gold)
    return ContextView(construct["kind"], construct["tokens"], context_lines(text, gold),
                       **drawn)


def _message(messages: Mapping[str, Message], msg_id: str) -> str:
    m = messages.get(msg_id)
    return "(not in the conversation)" if m is None else render_message(m)


def _verdict(r: Record) -> Verdict:
    return Verdict(r["judge"], r["repeat"], verdict(r["score"]),
                   r["score"], r["scored_by"], r["raw"] or "", r["f1"], r["exact_match"],
                   r["prompt_name"])


def _call(r: Record) -> Call:
    return Call(r["stage"], r["backbone"], r["model"], r["prompt_tokens"],
                r["completion_tokens"], r["latency_s"], r["cost_usd"], r["cached"])


def _call_order(r: Record) -> tuple[int, float]:
    """Pipeline order of the call's stage, then when it was sent."""
    sent = r["finished_at"] - r["latency_s"] if r["finished_at"] else r["written_at"]
    return CALL_STAGES.index(r["stage"]), float(sent)
