"""LongMemEval's adapter on a hand-made file in its native shape (GroupMemBench and
EverMemBench: test_groupmembench.py, test_evermembench.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.conftest import source_named
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table


def test_longmemeval_orders_sessions_and_keeps_has_answer_as_gold(fixtures: Path) -> None:
    prepared = source_named(build("longmemeval", LoadRequest(source=fixtures / "longmemeval" /
                                                "longmemeval_mini.json")))
    msgs = messages_from_table(prepared.messages)
    first = [m for m in msgs if m.conv_id == "lme-0"]  # conversations are numbered, not named
    assert {m.conv_id for m in msgs} == {"lme-0", "lme-1"}  # a question id can say "_abs"
    assert [m.session_id for m in first] == ["q_rescue_1:s_a"] * 2 + ["q_rescue_1:s_b"] * 2
    assert all(m.meta is None or "has_answer" not in m.meta for m in msgs)
    gold = gold_from_table(prepared.questions)
    assert gold["q_rescue_1"].evidence_ids == ("q_rescue_1:s_a:0", "q_rescue_1:s_b:0")
    assert gold["q_trip_2_abs"].answer_kind == "abstention"
    q = {q.qid: q for q in questions_from_table(prepared.questions)}["q_rescue_1"]
    assert q.question_time == datetime(2023, 6, 1, 10, 0, tzinfo=UTC)
    assert q.category == "knowledge-update"
