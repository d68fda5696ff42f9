"""LoCoMo: a list of two-speaker conversations with sessions, turns and QA items."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from tmem_core import DataError
from tmem_core.benchmarks._evidence import repair_dialogue_refs
from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.benchmarks._source import json_list, parse_time, require
from tmem_core.evaluation import Protocol, locomo_f1
from tmem_core.schema import Gold, Message, Question

# Undocumented upstream; the mapping its scoring code implies.
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                     5: "adversarial"}
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_IMAGE_FIELDS = ("img_url", "blip_caption", "query", "re-download")


def _locomo_judge(q: Question, _gold: Gold) -> str | None:
    return None if q.category == "adversarial" else "judge/locomo"


# Upstream's answer protocol (task_eval/gpt_utils.py) offers "Not mentioned in the
# conversation" to category 5 (adversarial) alone, as one of two options beside the data's
# adversarial answer; that answer is stored with the gold here and stays out of prompts, so
# the phrase comes as an instruction instead, to adversarial questions only.
LOCOMO = Protocol(_locomo_judge, ("judge/locomo",),
                  abstention_phrase="Not mentioned in the conversation.",
                  abstention_categories=frozenset({"adversarial"}),
                  reports_separately=frozenset({"adversarial"}),
                  temporal_categories=frozenset({"temporal"}), token_f1=locomo_f1,
                  date_tolerance_days=1, judge_notes=(
                      "category 5 (adversarial) is never judged: mem0's evaluation "
                      "(evaluation/evals.py, metrics/llm_judge.py) skips it; here it is "
                      "scored apart by the not-mentioned rule, outside `overall`",))


@benchmark("locomo", protocol=LOCOMO,
           description="LoCoMo long-term two-speaker conversations (real data)")
def load_locomo(request: LoadRequest) -> LoadedBenchmark:
    path, samples = json_list(request.source, "samples")  # locomo10.json or a subset of it
    out = LoadedBenchmark(messages=[], questions=[])
    seen: set[str] = set()
    for index, sample in enumerate(samples):
        conv_id = str(require(sample, "sample_id", file=path, record=f"sample[{index}]"))
        if conv_id in seen:
            raise DataError("duplicate id", file=str(path), record=conv_id, field="sample_id")
        seen.add(conv_id)
        turn_ids = _load_turns(sample, conv_id, path, out)
        _load_questions(sample, conv_id, turn_ids, path, out)
    return out


def _load_turns(sample: Any, conv_id: str, path: Path, out: LoadedBenchmark) -> set[str]:
    conv = require(sample, "conversation", file=path, record=conv_id, kind=dict)
    sessions = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
    turn_ids: set[str] = set()
    seq = len(out.messages)
    for n in sessions:
        key = f"session_{n}_date_time"
        when = parse_time(require(conv, key, file=path, record=conv_id), file=path,
                          record=conv_id, field=key)
        turns = require(conv, f"session_{n}", file=path, record=conv_id, kind=list)
        for pos, turn in enumerate(turns):
            record = f"{conv_id}/session_{n}[{pos}]"
            dia_id = str(require(turn, "dia_id", file=path, record=record))
            if dia_id in turn_ids:
                raise DataError("duplicate id", file=str(path), record=f"{conv_id}/{dia_id}",
                                field="dia_id")
            turn_ids.add(dia_id)
            out.messages.append(_message(turn, conv_id, dia_id, n, seq, when, path, record))
            seq += 1
    return turn_ids


def _message(turn: Any, conv_id: str, dia_id: str, session: int, seq: int, when: datetime,
             path: Path, record: str) -> Message:
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares an image: {caption}]".strip()
    if not text:
        raise DataError("turn has neither text nor an image caption", file=str(path),
                        record=record, field="text")
    extra = {k: turn[k] for k in _IMAGE_FIELDS if k in turn}
    return Message(
        conv_id=conv_id,
        msg_id=f"{conv_id}:{dia_id}",
        seq=seq,
        timestamp=when,
        text=text,
        session_id=f"{conv_id}:S{session}",
        author=str(require(turn, "speaker", file=path, record=record)),
        meta=json.dumps(extra, sort_keys=True) if extra else None,
    )


def _load_questions(sample: Any, conv_id: str, turn_ids: set[str], path: Path,
                    out: LoadedBenchmark) -> None:
    for index, qa in enumerate(require(sample, "qa", file=path, record=conv_id, kind=list)):
        qid = f"{conv_id}:q{index}"
        number = require(qa, "category", file=path, record=qid, kind=int)
        if number not in LOCOMO_CATEGORIES:
            raise DataError(f"unknown category {number}; known {sorted(LOCOMO_CATEGORIES)}",
                            file=str(path), record=qid, field="category")
        repair = repair_dialogue_refs(qa.get("evidence") or [], turn_ids)
        out.warnings += [f"{qid}: evidence {d}" for d in repair.dropped]
        out.repairs += [f"{qid}: evidence {r}" for r in repair.repaired]
        answer = qa.get("answer")
        adversarial = number == 5
        extra: dict[str, object] = {"category_number": number}
        if "adversarial_answer" in qa:
            extra["adversarial_answer"] = qa["adversarial_answer"]
        question = Question(
            conv_id=conv_id,
            qid=qid,
            question=str(require(qa, "question", file=path, record=qid)),
            category=LOCOMO_CATEGORIES[number],
        )
        gold = Gold(
            qid=qid,
            answer=None if answer is None else str(answer),
            evidence_ids=tuple(f"{conv_id}:{e}" for e in repair.ids),
            answer_kind="abstention" if adversarial else "text",
            gold_meta=json.dumps(extra, sort_keys=True),
        )
        if answer is None and not adversarial:
            raise DataError("missing field", file=str(path), record=qid, field="answer")
        out.questions.append((question, gold))
