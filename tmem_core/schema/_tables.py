from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

SCHEMA_VERSION = 1

_TS = pa.timestamp("us", tz="UTC")

MESSAGES_SCHEMA = pa.schema(
    [
        pa.field("conv_id", pa.string(), nullable=False),
        pa.field("msg_id", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("timestamp", _TS, nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("author", pa.string()),
        pa.field("role", pa.string()),
        pa.field("channel", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("phase", pa.string()),
        pa.field("reply_to", pa.string()),
        pa.field("text", pa.string(), nullable=False),
        pa.field("meta", pa.string()),
    ]
)

_OPTION = pa.struct([pa.field("label", pa.string()), pa.field("text", pa.string())])

PUBLIC_QUESTION_COLUMNS = (
    "conv_id",
    "qid",
    "question",
    "asking_user",
    "question_time",
    "category",
)
GOLD_COLUMNS = ("answer", "evidence_ids", "options", "answer_kind", "gold_meta")

QUESTIONS_SCHEMA = pa.schema(
    [
        pa.field("conv_id", pa.string(), nullable=False),
        pa.field("qid", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("asking_user", pa.string()),
        pa.field("question_time", _TS),
        pa.field("category", pa.string(), nullable=False),
        # evaluation-only from here on: never read by retrieval, memory or answer prompts
        pa.field("answer", pa.string()),
        pa.field("evidence_ids", pa.list_(pa.string()), nullable=False),
        pa.field("options", pa.list_(_OPTION)),
        pa.field("answer_kind", pa.string(), nullable=False),
        pa.field("gold_meta", pa.string()),
    ]
)


@dataclass(frozen=True, slots=True)
class Message:
    """One message (a turn, a chat post) of a conversation, in canonical form."""

    conv_id: str
    msg_id: str
    seq: int
    timestamp: datetime
    text: str
    session_id: str | None = None
    author: str | None = None
    role: str | None = None
    channel: str | None = None
    topic: str | None = None
    phase: str | None = None
    reply_to: str | None = None
    meta: str | None = None  # extra source fields, JSON


@dataclass(frozen=True, slots=True)
class Question:
    """What a memory method may see of a question."""

    conv_id: str
    qid: str
    question: str
    category: str
    asking_user: str | None = None
    question_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class Option:
    label: str
    text: str


@dataclass(frozen=True, slots=True)
class Gold:
    """Evaluation-only fields of a question.

    `answer_kind` is one of: "text", "choice" (answer is an option label),
    "abstention" (the correct response says the information is not available).
    `options` are shown to the answer stage for multiple-choice questions only.
    """

    qid: str
    answer: str | None
    evidence_ids: tuple[str, ...] = ()
    answer_kind: str = "text"
    options: tuple[Option, ...] | None = None
    gold_meta: str | None = None  # extra evaluation-only source fields, JSON


ANSWER_KINDS = ("text", "choice", "abstention")


def messages_to_table(messages: Iterable[Message]) -> pa.Table:
    cols: dict[str, list[object]] = {name: [] for name in MESSAGES_SCHEMA.names}
    for m in messages:
        for name, values in cols.items():
            values.append(getattr(m, name))
    return pa.table(cols, schema=MESSAGES_SCHEMA)


def questions_to_table(items: Sequence[tuple[Question, Gold]]) -> pa.Table:
    cols: dict[str, list[object]] = {name: [] for name in QUESTIONS_SCHEMA.names}
    for q, g in items:
        for name in PUBLIC_QUESTION_COLUMNS:
            cols[name].append(getattr(q, name))
        cols["answer"].append(g.answer)
        cols["evidence_ids"].append(list(g.evidence_ids))
        cols["options"].append(
            None if g.options is None else [{"label": o.label, "text": o.text} for o in g.options]
        )
        cols["answer_kind"].append(g.answer_kind)
        cols["gold_meta"].append(g.gold_meta)
    return pa.table(cols, schema=QUESTIONS_SCHEMA)


def messages_from_table(table: pa.Table) -> list[Message]:
    return [Message(**row) for row in table.select(MESSAGES_SCHEMA.names).to_pylist()]


def questions_from_table(table: pa.Table) -> list[Question]:
    """Public question fields only; gold columns are not even read."""
    return [Question(**row) for row in table.select(list(PUBLIC_QUESTION_COLUMNS)).to_pylist()]


def gold_from_table(table: pa.Table) -> dict[str, Gold]:
    out: dict[str, Gold] = {}
    for row in table.select(["qid", *GOLD_COLUMNS]).to_pylist():
        options = row["options"]
        out[row["qid"]] = Gold(
            qid=row["qid"],
            answer=row["answer"],
            evidence_ids=tuple(row["evidence_ids"]),
            answer_kind=row["answer_kind"],
            options=None if options is None else tuple(Option(**o) for o in options),
            gold_meta=row["gold_meta"],
        )
    return out

