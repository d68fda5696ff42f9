"""LongMemEval: one haystack of user/assistant sessions per question (`_s`, `_m`, `_oracle`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tmem_core import DataError
from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.benchmarks._source import json_list, parse_time, require
from tmem_core.evaluation import Protocol
from tmem_core.schema import Gold, Message, Question

ABSTENTION_SUFFIX = "_abs"


_LME_TYPES = {
    "temporal-reasoning": "judge/longmemeval_temporal",
    "knowledge-update": "judge/longmemeval_knowledge_update",
    "single-session-preference": "judge/longmemeval_preference",
}


def _longmemeval_judge(q: Question, g: Gold) -> str | None:
    if g.answer_kind == "abstention":
        return "judge/longmemeval_abstention"
    return _LME_TYPES.get(q.category, "judge/longmemeval_default")


# Upstream's answer prompt (src/generation/run_generation.py) asks no question to abstain:
# an `_abs` question is told apart by its id, part of the gold, and only its judge knows.
LONGMEMEVAL = Protocol(
    _longmemeval_judge,
    ("judge/longmemeval_abstention", "judge/longmemeval_default", *_LME_TYPES.values()),
    temporal_categories=frozenset({"temporal-reasoning"}), date_tolerance_days=1,
    judge_notes=("a question whose id ends in _abs is judged by the abstention template, "
                 "every other by its question type's, as src/evaluation/evaluate_qa.py does",))


@benchmark("longmemeval", protocol=LONGMEMEVAL,
           description="LongMemEval user-assistant chat histories",
           fixtures_only=True)
def load_longmemeval(request: LoadRequest) -> LoadedBenchmark:
    path, instances = json_list(request.source, "instances")  # longmemeval_s.json or similar
    out = LoadedBenchmark(messages=[], questions=[])
    for index, inst in enumerate(instances):
        qid = str(require(inst, "question_id", file=path, record=f"instance[{index}]"))
        conv_id = f"lme-{index}"  # not the question id: its `_abs` marks abstention
        evidence = _load_haystack(inst, qid, conv_id, path, out)
        out.questions.append(_question(inst, qid, conv_id, evidence, path))
    return out


def _load_haystack(inst: Any, qid: str, conv_id: str, path: Path, out: LoadedBenchmark
                   ) -> list[str]:
    """Sessions in date order (stable); returns ids of turns marked `has_answer` (gold only)."""
    ids = require(inst, "haystack_session_ids", file=path, record=qid, kind=list)
    dates = require(inst, "haystack_dates", file=path, record=qid, kind=list)
    sessions = require(inst, "haystack_sessions", file=path, record=qid, kind=list)
    if not len(ids) == len(dates) == len(sessions):
        raise DataError("haystack_session_ids, haystack_dates and haystack_sessions differ in "
                        "length", file=str(path), record=qid, field="haystack_sessions")
    stamped = [
        (parse_time(d, file=path, record=f"{qid}/{sid}", field="haystack_dates"), i, str(sid))
        for i, (sid, d) in enumerate(zip(ids, dates, strict=True))
    ]
    evidence: list[str] = []
    for when, i, sid in sorted(stamped):
        if not isinstance(sessions[i], list):
            raise DataError("a session must be a list of turns", file=str(path),
                            record=f"{qid}/{sid}", field="haystack_sessions")
        for pos, turn in enumerate(sessions[i]):
            record = f"{qid}/{sid}[{pos}]"
            msg_id = f"{qid}:{sid}:{pos}"
            role = str(require(turn, "role", file=path, record=record))
            out.messages.append(Message(
                conv_id=conv_id, msg_id=msg_id, seq=len(out.messages), timestamp=when,
                text=str(require(turn, "content", file=path, record=record)),
                session_id=f"{qid}:{sid}", author=role, role=role,
            ))
            if turn.get("has_answer"):
                evidence.append(msg_id)
    return evidence


def _question(inst: Any, qid: str, conv_id: str, evidence: list[str], path: Path
              ) -> tuple[Question, Gold]:
    question_time = None
    if inst.get("question_date"):
        question_time = parse_time(inst["question_date"], file=path, record=qid,
                                   field="question_date")
    abstention = qid.endswith(ABSTENTION_SUFFIX)
    extra = {"answer_session_ids": inst.get("answer_session_ids") or []}
    return (
        Question(conv_id=conv_id, qid=qid,
                 question=str(require(inst, "question", file=path, record=qid)),
                 category=str(require(inst, "question_type", file=path, record=qid)),
                 asking_user="user", question_time=question_time),
        Gold(qid=qid, answer=str(require(inst, "answer", file=path, record=qid)),
             evidence_ids=tuple(evidence), answer_kind="abstention" if abstention else "text",
             gold_meta=json.dumps(extra, sort_keys=True)),
    )
