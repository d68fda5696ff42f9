from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from tmem_core import DataError
from tmem_core.schema import (
    Gold,
    Message,
    Question,
    messages_to_table,
    questions_to_table,
    validate_tables,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _msgs(*specs: tuple[str, str, int, int]) -> pa.Table:
    return messages_to_table(Message(conv_id=c, msg_id=m, seq=s, text="hi",
                                     timestamp=T0 + timedelta(minutes=minute))
                             for c, m, s, minute in specs)


def _qs(evidence: tuple[str, ...] = ("a1",), qid: str = "q1", kind: str = "text") -> pa.Table:
    return questions_to_table([(Question(conv_id="a", qid=qid, question="?", category="x"),
                                Gold(qid=qid, answer="y", evidence_ids=evidence,
                                     answer_kind=kind))])


GOOD = (("a", "a1", 0, 0), ("a", "a2", 1, 1), ("b", "b1", 2, 0))


def test_valid_tables_pass() -> None:
    validate_tables(_msgs(*GOOD), _qs())


@pytest.mark.parametrize(("messages", "questions", "field"), [
    (_msgs(("a", "a1", 0, 0), ("a", "a1", 1, 1)), _qs(), "msg_id"),
    (_msgs(("a", "a1", 1, 0), ("a", "a2", 1, 1)), _qs(), "seq"),
    (_msgs(("a", "a1", 0, 5), ("a", "a2", 1, 1)), _qs(), "timestamp"),
    (_msgs(("a", "a1", 0, 0), ("b", "b1", 1, 1), ("a", "a2", 2, 2)), _qs(), "conv_id"),
    (_msgs(*GOOD), _qs(("b1",)), "evidence_ids"),
    (_msgs(*GOOD), _qs(("zz",)), "evidence_ids"),
    (_msgs(*GOOD), _qs(kind="choice"), "options"),
    (_msgs(*GOOD), _qs(kind="guess"), "answer_kind"),
])
def test_violations_name_the_field(messages: pa.Table, questions: pa.Table, field: str) -> None:
    with pytest.raises(DataError) as err:
        validate_tables(messages, questions, source="unit")
    assert err.value.field == field


def test_naive_timestamps_are_rejected() -> None:
    table = _msgs(*GOOD)
    naive = table.set_column(3, "timestamp", table.column("timestamp").cast(pa.timestamp("us")))
    with pytest.raises(DataError, match="canonical schema"):
        validate_tables(naive, _qs())
