from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tmem_core import DataError
from tmem_core.schema._tables import ANSWER_KINDS, MESSAGES_SCHEMA, QUESTIONS_SCHEMA


def validate_tables(messages: pa.Table, questions: pa.Table, *, source: str = "") -> None:
    """Check the invariants every stage relies on; raise DataError on the first violation.

    - both tables carry exactly the canonical schemas (timestamps are UTC);
    - msg_id and qid are unique;
    - within a conversation, rows are ordered by `seq`, `seq` strictly increases and
      timestamps never go backwards;
    - every question's conversation exists and every gold evidence id is a message of it;
    - answer kinds are known, and choice questions carry options.
    """
    _check_schema(messages, MESSAGES_SCHEMA, "messages", source)
    _check_schema(questions, QUESTIONS_SCHEMA, "questions", source)
    _check_unique(messages, "msg_id", source)
    _check_unique(questions, "qid", source)
    _check_order(messages, source)
    _check_questions(messages, questions, source)


def _check_schema(table: pa.Table, schema: pa.Schema, name: str, source: str) -> None:
    if not table.schema.equals(schema):
        diff = [
            f"{f.name}: {f.type}"
            for f in table.schema
            if f.name not in schema.names or schema.field(f.name).type != f.type
        ]
        missing = [n for n in schema.names if n not in table.schema.names]
        raise DataError(
            f"{name} table does not match the canonical schema "
            f"(unexpected {diff}, missing {missing})",
            file=source,
        )
    for f in schema:
        if not f.nullable and table.column(f.name).null_count:
            row = table.column(f.name).to_pylist().index(None)
            raise DataError("required value is missing", file=source, record=f"{name}[{row}]",
                            field=f.name)


def _check_unique(table: pa.Table, column: str, source: str) -> None:
    values = table.column(column)
    if pc.count_distinct(values).as_py() != len(values):
        counts = pc.value_counts(values)
        dup = next(c["values"] for c in counts.to_pylist() if c["counts"] > 1)
        raise DataError("duplicate id", file=source, record=str(dup), field=column)


def _check_order(messages: pa.Table, source: str) -> None:
    convs = messages.column("conv_id").to_pylist()
    seqs = messages.column("seq").to_pylist()
    stamps = messages.column("timestamp").cast(pa.int64()).to_pylist()
    ids = messages.column("msg_id").to_pylist()
    seen_done: set[str] = set()
    for i in range(len(convs)):
        if i and convs[i] == convs[i - 1]:
            if seqs[i] <= seqs[i - 1]:
                raise DataError(f"seq {seqs[i]} does not increase (previous {seqs[i - 1]})",
                                file=source, record=ids[i], field="seq")
            if stamps[i] < stamps[i - 1]:
                raise DataError("timestamp goes backwards in seq order", file=source,
                                record=ids[i], field="timestamp")
        elif convs[i] in seen_done:
            raise DataError("messages of one conversation are not contiguous", file=source,
                            record=ids[i], field="conv_id")
        elif i:
            seen_done.add(convs[i - 1])


def _check_questions(messages: pa.Table, questions: pa.Table, source: str) -> None:
    msg_conv = dict(
        zip(messages.column("msg_id").to_pylist(), messages.column("conv_id").to_pylist(),
            strict=True)
    )
    conv_ids = set(msg_conv.values())
    for row in questions.select(["qid", "conv_id", "evidence_ids", "answer_kind", "options"]
                                ).to_pylist():
        qid = row["qid"]
        if row["conv_id"] not in conv_ids:
            raise DataError(f"unknown conversation {row['conv_id']!r}", file=source, record=qid,
                            field="conv_id")
        for ev in row["evidence_ids"]:
            if msg_conv.get(ev) != row["conv_id"]:
                raise DataError(f"evidence id {ev!r} is not a message of {row['conv_id']}",
                                file=source, record=qid, field="evidence_ids")
        if row["answer_kind"] not in ANSWER_KINDS:
            raise DataError(f"unknown answer kind {row['answer_kind']!r}; allowed {ANSWER_KINDS}",
                            file=source, record=qid, field="answer_kind")
        if row["answer_kind"] == "choice" and not row["options"]:
            raise DataError("a choice question needs options", file=source, record=qid,
                            field="options")
