"""GroupMemBench as released: messages under `data/final`, questions in a tree of their own.

    <root>/data/final/<Domain>/synthetic_domain_channels_rolevariants_<Domain>.json
        {channel: [message, ...]}, each message's `timestamp` in ISO 8601
    <root>/questions/<Domain>/<qtype>.jsonl     {id, question, answer, asking_user_id}

`--source` is the repository root, its `data/final` folder or one domain folder; the
questions tree is found beside `data/final` (or as `questions/` inside a domain folder).
Only the chat fields in `_CHAT_FIELDS` become message columns: every other message field
(`is_noise`, `is_decision_point`, `decision_type`, ...) is a synthesis annotation, kept out
of the messages and counted in the manifest.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tmem_core import DataError
from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.benchmarks._source import parse_time, read_json, read_jsonl, require
from tmem_core.evaluation import Protocol, one_judge
from tmem_core.schema import Gold, Message, Question

DIALOGUE_FILE = "synthetic_domain_channels_rolevariants_{domain}.json"
QUESTION_TYPES = ("multi_hop", "knowledge_update", "temporal", "user_implicit",
                  "term_ambiguity", "abstention")
_CHAT_FIELDS = {"msg_node", "content", "author", "role", "timestamp", "reply_to", "phase_name",
                "topic"}
_FLAGS = {"is_noise": "noise_messages", "is_decision_point": "decision_point_messages"}
_QUESTION_FIELDS = {"id", "question", "answer", "asking_user_id"}
_EXPECTED = (f"expected GroupMemBench's layout, data/final/<Domain>/"
             f"{DIALOGUE_FILE.format(domain='<Domain>')} with questions/<Domain>/<qtype>.jsonl "
             f"(--source: the repository root, its data/final folder or one domain folder)")

_MessageIds = dict[tuple[str | None, str], str]  # (channel or None, msg_node) -> msg_id


@dataclass(frozen=True)
class _Domain:
    name: str
    dialogue: Path
    questions: Path


@dataclass(frozen=True)
class _Row:
    """One source message and where it was read."""

    when: datetime
    channel: str
    node: str
    msg: dict[str, Any]
    record: str


GROUPMEMBENCH = Protocol(one_judge("judge/groupmembench"), ("judge/groupmembench",),
                         abstention_phrase="No information available.",
                         temporal_categories=frozenset({"temporal"}), judge_notes=(
                             "the release (UCSB-NLP-Chang/GroupMemBench) judges with its own "
                             "system prompt, prompts/hipporag_judge_system.txt, which could "
                             "not be obtained here: the project's judge/groupmembench judges; "
                             "give the official file through judge_prompts to use it",))


@benchmark("groupmembench", protocol=GROUPMEMBENCH,
           description="GroupMemBench multi-party workplace group chats",
           fixtures_only=True)
def load_groupmembench(request: LoadRequest) -> LoadedBenchmark:
    if request.source is None or not request.source.is_dir():
        raise DataError(_EXPECTED, file=str(request.source or ""))
    out = LoadedBenchmark(messages=[], questions=[])
    flags: Counter[str] = Counter()
    withheld: Counter[str] = Counter()
    for domain in _find_domains(request.source):
        _load_messages(domain, out, flags, withheld)
        _load_questions(domain, out)
    out.details.update({name: flags[name] for name in _FLAGS.values()})
    out.details["withheld_message_fields"] = dict(sorted(withheld.items()))
    return out


def _find_domains(source: Path) -> list[_Domain]:
    if (source / DIALOGUE_FILE.format(domain=source.name)).is_file():
        folders = [source]
    else:
        final = source / "data" / "final"
        base = final if final.is_dir() else source
        folders = sorted(p for p in base.iterdir()
                         if (p / DIALOGUE_FILE.format(domain=p.name)).is_file())
    if not folders:
        raise DataError(f"{_EXPECTED}; found no domain file", file=str(source))
    return [_Domain(f.name, f / DIALOGUE_FILE.format(domain=f.name), _questions_dir(f))
            for f in folders]


def _questions_dir(folder: Path) -> Path:
    """`questions/<Domain>` beside `data/final` (up to the repository root), or `questions/`
    inside the domain folder."""
    candidates = [folder / "questions", *(up / "questions" / folder.name
                                          for up in (folder, *list(folder.parents)[:3]))]
    found = next((c for c in candidates if any(c.glob("*.jsonl"))), None)
    if found is None:
        raise DataError(f"no questions for domain {folder.name}: expected "
                        f"questions/{folder.name}/<qtype>.jsonl beside data/final, one file per "
                        f"type ({', '.join(QUESTION_TYPES)})", file=str(folder))
    return found


def _load_messages(domain: _Domain, out: LoadedBenchmark, flags: Counter[str],
                   withheld: Counter[str]) -> None:
    rows = _read_rows(domain.dialogue)
    ids = _message_ids(domain, rows)
    dangling = 0
    for row in sorted(rows, key=lambda r: r.when):  # stable: file order among equal times
        msg = row.msg
        for field, detail in _FLAGS.items():
            flags[detail] += _truthy(msg.get(field))
        withheld.update(k for k in msg if k not in _CHAT_FIELDS)
        reply = _opt(msg.get("reply_to"))
        reply_id = None if reply is None else ids.get((row.channel, reply), ids.get((None, reply)))
        dangling += reply is not None and reply_id is None
        out.messages.append(Message(
            conv_id=domain.name, msg_id=ids[(row.channel, row.node)], seq=len(out.messages),
            timestamp=row.when, channel=row.channel,
            text=str(require(msg, "content", file=domain.dialogue, record=row.record)),
            author=_opt(msg.get("author")), role=_opt(msg.get("role")),
            topic=_opt(msg.get("topic")), phase=_opt(msg.get("phase_name")), reply_to=reply_id,
        ))
    if dangling:
        out.warnings.append(f"{domain.name}: {dangling} reply_to references name no message "
                            f"(left empty)")


def _read_rows(path: Path) -> list[_Row]:
    channels = read_json(path)
    if not isinstance(channels, dict) or not channels:
        raise DataError("expected an object keyed by channel, each a list of messages",
                        file=str(path))
    rows = []
    for channel, messages in channels.items():
        if not isinstance(messages, list):
            raise DataError("a channel must be a list of messages", file=str(path),
                            record=str(channel))
        for pos, msg in enumerate(messages):
            record = f"{channel}[{pos}]"
            node = str(require(msg, "msg_node", file=path, record=record))
            when = parse_time(require(msg, "timestamp", file=path, record=record), file=path,
                              record=record, field="timestamp")
            rows.append(_Row(when, str(channel), node, msg, record))
    if not rows:
        raise DataError("no messages in any channel", file=str(path))
    return rows


def _message_ids(domain: _Domain, rows: list[_Row]) -> _MessageIds:
    """`<Domain>:<msg_node>`; qualified by channel number only if nodes repeat across
    channels. Unique nodes are also reachable without their channel (for `reply_to`)."""
    twice = next((r for r, n in Counter((r.channel, r.node) for r in rows).items() if n > 1),
                 None)
    if twice is not None:
        raise DataError(f"msg_node {twice[1]!r} appears twice in one channel",
                        file=str(domain.dialogue), record=twice[0], field="msg_node")
    nodes = Counter(r.node for r in rows)
    number = {c: i for i, c in enumerate(dict.fromkeys(r.channel for r in rows))}
    unique = max(nodes.values()) == 1
    ids: _MessageIds = {
        (r.channel, r.node): f"{domain.name}:{r.node}" if unique
        else f"{domain.name}:c{number[r.channel]}:{r.node}" for r in rows}
    ids.update({(None, r.node): ids[(r.channel, r.node)] for r in rows if nodes[r.node] == 1})
    return ids


def _load_questions(domain: _Domain, out: LoadedBenchmark) -> None:
    files = sorted(domain.questions.glob("*.jsonl"))
    unknown = next((p for p in files if p.stem not in QUESTION_TYPES), None)
    if unknown is not None:
        raise DataError(f"not a question type file: expected <qtype>.jsonl with qtype one of "
                        f"{', '.join(QUESTION_TYPES)}", file=str(unknown))
    missing = [t for t in QUESTION_TYPES if not (domain.questions / f"{t}.jsonl").exists()]
    if missing:
        out.warnings.append(f"{domain.name}: no question file for {', '.join(missing)}")
    before = len(out.questions)
    for path in files:
        out.questions += [_question(domain.name, path, row, f"line {n}")
                          for n, row in enumerate(read_jsonl(path), 1)]
    if len(out.questions) == before:
        raise DataError(f"no questions for domain {domain.name}", file=str(domain.questions))


def _question(domain: str, path: Path, row: Any, record: str) -> tuple[Question, Gold]:
    qtype = path.stem
    qid = f"{domain}:{qtype}:{require(row, 'id', file=path, record=record)}"
    extra = {k: v for k, v in row.items() if k not in _QUESTION_FIELDS}
    return (
        Question(conv_id=domain, qid=qid, category=qtype,
                 question=str(require(row, "question", file=path, record=qid)),
                 asking_user=_opt(row.get("asking_user_id"))),
        Gold(qid=qid, answer=str(require(row, "answer", file=path, record=qid)),
             answer_kind="abstention" if qtype == "abstention" else "text",
             gold_meta=json.dumps(extra, sort_keys=True) if extra else None),
    )


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in {"true", "1", "yes"}


def _opt(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)
