"""GroupMemBench: per-domain multi-channel group chats and per-type question files.

Expected layout (one folder per domain, any file names):
    <source>/<Domain>/*.json     {channel: [message, ...]}
    <source>/<Domain>/*.jsonl    questions; the file name contains the question type
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.benchmarks._source import parse_time, read_json, read_jsonl, require
from tmem_core.evaluation import Protocol, one_judge
from tmem_core.schema import DataError, Gold, Message, Question

QUESTION_TYPES = ("multi_hop", "knowledge_update", "temporal", "user_implicit",
                  "term_ambiguity", "abstention")
_KNOWN_FIELDS = {"msg_node", "content", "author", "role", "timestamp", "reply_to", "phase_name",
                 "topic", "is_noise"}


GROUPMEMBENCH = Protocol(one_judge("judge/groupmembench"), ("judge/groupmembench",),
                         abstention_phrase="No information available.",
                         temporal_categories=frozenset({"temporal"}))


@benchmark("groupmembench", protocol=GROUPMEMBENCH,
           description="GroupMemBench multi-party workplace group chats",
           fixtures_only=True)
def load_groupmembench(request: LoadRequest) -> LoadedBenchmark:
    if request.source is None or not request.source.is_dir():
        raise DataError("groupmembench needs --source DIR with one folder per domain",
                        file=str(request.source or ""))
    out = LoadedBenchmark(messages=[], questions=[])
    domains = sorted(p for p in request.source.iterdir() if p.is_dir())
    if not domains:
        raise DataError("no domain folders found", file=str(request.source))
    noise = 0
    for domain in domains:
        noise += _load_domain_messages(domain, out)
        _load_domain_questions(domain, out)
    out.details["noise_messages"] = noise
    return out


def _load_domain_messages(domain: Path, out: LoadedBenchmark) -> int:
    dialogue_files = sorted(domain.glob("*.json"))
    if len(dialogue_files) != 1:
        raise DataError(f"expected one dialogue .json file, found {len(dialogue_files)}",
                        file=str(domain))
    path = dialogue_files[0]
    channels = read_json(path)
    if not isinstance(channels, dict):
        raise DataError("expected an object keyed by channel", file=str(path))
    rows: list[tuple[datetime, int, str, Any, str]] = []
    for channel, messages in channels.items():
        if not isinstance(messages, list):
            raise DataError("a channel must be a list of messages", file=str(path),
                            record=str(channel))
        for pos, msg in enumerate(messages):
            record = f"{channel}[{pos}]"
            when = parse_time(require(msg, "timestamp", file=path, record=record), file=path,
                              record=record, field="timestamp")
            rows.append((when, len(rows), str(channel), msg, record))
    noise = 0
    conv_id = domain.name
    for when, _, channel, msg, record in sorted(rows, key=lambda r: (r[0], r[1])):
        node = str(require(msg, "msg_node", file=path, record=record))
        noise += bool(msg.get("is_noise"))  # evaluation annotation: never exposed to methods
        extra = {k: v for k, v in msg.items() if k not in _KNOWN_FIELDS}
        reply = msg.get("reply_to")
        out.messages.append(Message(
            conv_id=conv_id, msg_id=f"{conv_id}:{node}", seq=len(out.messages), timestamp=when,
            text=str(require(msg, "content", file=path, record=record)), channel=channel,
            author=_opt(msg.get("author")), role=_opt(msg.get("role")),
            topic=_opt(msg.get("topic")), phase=_opt(msg.get("phase_name")),
            reply_to=None if reply in (None, "") else f"{conv_id}:{reply}",
            meta=json.dumps(extra, sort_keys=True) if extra else None,
        ))
    return noise


def _load_domain_questions(domain: Path, out: LoadedBenchmark) -> None:
    for path in sorted(domain.glob("*.jsonl")):
        qtype = next((t for t in QUESTION_TYPES if t in path.stem), None)
        if qtype is None:
            raise DataError(f"cannot tell the question type from the file name; expected one "
                            f"of {', '.join(QUESTION_TYPES)}", file=str(path))
        for lineno, row in enumerate(read_jsonl(path), 1):
            record = f"line {lineno}"
            qid = f"{domain.name}:{require(row, 'id', file=path, record=record)}"
            asking = row.get("asking_user_id")
            out.questions.append((
                Question(conv_id=domain.name, qid=qid,
                         question=str(require(row, "question", file=path, record=qid)),
                         category=qtype, asking_user=_opt(asking)),
                Gold(qid=qid, answer=str(require(row, "answer", file=path, record=qid)),
                     answer_kind="abstention" if qtype == "abstention" else "text"),
            ))


def _opt(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)
