"""Adapters of unobtainable benchmarks, on hand-made files in their native shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from tmem_core.benchmarks import LoadRequest, build
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table


def test_longmemeval_orders_sessions_and_keeps_has_answer_as_gold(fixtures: Path) -> None:
    prepared = build("longmemeval", LoadRequest(source=fixtures / "longmemeval" /
                                                "longmemeval_mini.json"))
    msgs = messages_from_table(prepared.messages)
    first = [m for m in msgs if m.conv_id == "q_rescue_1"]
    assert [m.session_id for m in first] == ["q_rescue_1:s_a"] * 2 + ["q_rescue_1:s_b"] * 2
    assert all(m.meta is None or "has_answer" not in m.meta for m in msgs)
    gold = gold_from_table(prepared.questions)
    assert gold["q_rescue_1"].evidence_ids == ("q_rescue_1:s_a:0", "q_rescue_1:s_b:0")
    assert gold["q_trip_2_abs"].answer_kind == "abstention"
    q = {q.qid: q for q in questions_from_table(prepared.questions)}["q_rescue_1"]
    assert q.question_time == datetime(2023, 6, 1, 10, 0, tzinfo=UTC)
    assert q.category == "knowledge-update"


def test_groupmembench_merges_channels_in_time_and_hides_noise_flags(fixtures: Path) -> None:
    prepared = build("groupmembench", LoadRequest(source=fixtures / "groupmembench"))
    msgs = [m for m in messages_from_table(prepared.messages) if m.conv_id == "Finance"]
    assert [m.msg_id for m in msgs] == [f"Finance:F{i}" for i in range(1, 6)]
    f3 = msgs[2]
    assert (f3.channel, f3.topic, f3.phase, f3.role) == ("#budget", "vendor budget",
                                                        "planning", "Controller")
    assert f3.reply_to == "Finance:F1"
    assert json.loads(msgs[3].meta or "{}") == {"mood": "happy"}
    assert all("is_noise" not in (m.meta or "") for m in msgs)
    assert prepared.manifest["noise_messages"] == 2
    healthcare = [m for m in messages_from_table(prepared.messages) if m.conv_id == "Healthcare"]
    assert healthcare[0].reply_to is None
    questions = {q.qid: q for q in questions_from_table(prepared.questions)}
    assert questions["Finance:ku_1"].category == "knowledge_update"
    assert questions["Finance:ku_1"].asking_user == "User_3"
    assert gold_from_table(prepared.questions)["Finance:abs_1"].answer_kind == "abstention"


def test_evermembench_joins_profiles_and_reads_choices(fixtures: Path) -> None:
    prepared = build("evermembench", LoadRequest(source=fixtures / "evermembench"))
    msgs = messages_from_table(prepared.messages)
    assert [m.text[:6] for m in msgs] == ["Launch", "Mornin", "The la", "Noted,"]
    assert msgs[0].timestamp == datetime(2024, 5, 1, 17, 0, tzinfo=UTC)
    assert (msgs[0].author, msgs[0].role, msgs[0].channel) == ("Alice", "Product manager",
                                                                "Group_A")
    assert msgs[1].role == "Engineer"
    questions = {q.qid: q for q in questions_from_table(prepared.questions)}
    assert questions["evermembench:F_Temp_001"].category == "F_Temp"
    gold = gold_from_table(prepared.questions)
    assert gold["evermembench:F_Temp_001"].evidence_ids == ("evermembench:1", "evermembench:3")
    choice = gold["evermembench:P_Role_002"]
    assert choice.answer_kind == "choice" and choice.answer == "B"
    assert choice.options is not None and choice.options[1].text == "Product manager"
    assert any("MA_U_003" in w for w in prepared.manifest["warnings"])
