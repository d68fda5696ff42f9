"""The data a record depends on: a changed gold answer changes only its question's judge
dependencies, a changed message only its conversation's questions, and a choice question's
options reach the answer and judge stages only."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from tmem_core.results._current import expected_deps, question_data, record_deps
from tmem_core.schema import Gold, Message, Option, Question, messages_to_table, questions_to_table

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
MESSAGES = [Message("conv-26", f"conv-26:D1:{i}", i, WHEN, f"Caroline: message {i}")
            for i in range(1, 4)] + [Message("conv-30", "conv-30:D1:1", 1, WHEN, "Jon: hi")]
OPTIONS = (Option("A", "Sweden"), Option("B", "Norway"))
QUESTIONS = [
    (Question("conv-26", "conv-26:q0", "Where did Caroline move from 4 years ago?", "single-hop"),
     Gold("conv-26:q0", "Sweden", ("conv-26:D1:3",))),
    (Question("conv-26", "conv-26:q1", "Which country?", "single-hop"),
     Gold("conv-26:q1", "A", ("conv-26:D1:2",), "choice", OPTIONS)),
    (Question("conv-30", "conv-30:q0", "When did Jon lose his job?", "temporal"),
     Gold("conv-30:q0", "19 January, 2023", ("conv-30:D1:1",))),
]
STAGES = {"retrieve": {"method version": "1"}, "answer": {"prompt answer/flat": "p"},
          "judge": {"judge writer": "j"}}
STORES = ("retrieve", "answer", "judge", "calibration")


def _deps(messages: list[Message], questions: list[tuple[Question, Gold]]
          ) -> dict[str, dict[str, str]]:
    """Per store, per question, the deps a record must carry."""
    data = question_data(messages_to_table(messages), questions_to_table(questions))
    out = {store: expected_deps(STAGES, store, data) for store in STORES}
    assert all(v is not None for v in out.values())
    return {k: v for k, v in out.items() if v is not None}


def _changed(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]
             ) -> set[tuple[str, str]]:
    return {(store, qid) for store in before for qid in before[store]
            if before[store][qid] != after[store][qid]}


def test_a_changed_gold_answer_changes_only_its_questions_judging() -> None:
    before = _deps(MESSAGES, QUESTIONS)
    edited = [(q, dataclasses.replace(g, answer="Stockholm, Sweden")
               if q.qid == "conv-26:q0" else g) for q, g in QUESTIONS]
    assert _changed(before, _deps(MESSAGES, edited)) == {
        ("judge", "conv-26:q0"), ("calibration", "conv-26:q0")}


def test_a_changed_message_changes_its_conversations_questions_in_every_stage() -> None:
    before = _deps(MESSAGES, QUESTIONS)
    edited = [dataclasses.replace(m, text="Caroline: I moved from Sweden")
              if m.msg_id == "conv-26:D1:3" else m for m in MESSAGES]
    assert _changed(before, _deps(edited, QUESTIONS)) == {
        (store, qid) for store in STORES for qid in ("conv-26:q0", "conv-26:q1")}


def test_options_are_a_dependency_of_the_stages_that_show_them() -> None:
    before = _deps(MESSAGES, QUESTIONS)
    edited = [(q, dataclasses.replace(g, options=(Option("A", "Sweden"), Option("B", "Denmark")))
               if g.options else g) for q, g in QUESTIONS]
    assert _changed(before, _deps(MESSAGES, edited)) == {
        (store, "conv-26:q1") for store in ("answer", "judge", "calibration")}
    answer = json.loads(before["answer"]["conv-26:q1"])
    assert {"data question", "data options", "prompt answer/flat"} == set(answer)
    assert "data options" not in json.loads(before["answer"]["conv-26:q0"])


def test_a_record_of_no_question_and_a_contract_without_deps() -> None:
    assert json.loads(record_deps(STAGES["judge"], "judge", None)) == STAGES["judge"]
    data = question_data(messages_to_table(MESSAGES), questions_to_table(QUESTIONS))
    assert expected_deps(None, "judge", data) is None  # every record counts, as before
    assert expected_deps(STAGES, "construct", data) is None
