"""The leak guards' rules: ids as whole tokens, answer-like `gold_meta` values as answers
(not ids), annotations neither; on the real LoCoMo file no guarded id is a word of its own
conversations."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FIXTURES
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.evaluation._leaks import GUARDED_STAGES, gold_strings, ids_in, meta_kind
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table


def _forbidden(name: str, source: Path) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    prepared = build(name, LoadRequest(source=source))
    messages = messages_from_table(prepared.messages)
    text: dict[str, str] = {}
    for m in messages:
        text[m.conv_id] = text.get(m.conv_id, "") + "\n" + m.text
    return gold_strings({m.msg_id: m for m in messages},
                        questions_from_table(prepared.questions),
                        gold_from_table(prepared.questions)), text


def test_ids_match_as_whole_tokens() -> None:
    ids = ("T001", "conv-26:D1:3", "answer_4be1b6b4_1")
    assert ids_in("task T001, then T0012 and T001_b", ids) == ("T001",)
    assert ids_in("[conv-26:D1:30] and (conv-26:D1:3)", ids) == ("conv-26:D1:3",)
    assert ids_in("answer_4be1b6b4_10", ids) == ()
    assert ids_in("anything", ()) == ()
    # an id inside a longer one is found too, among ids the text does not hold
    assert ids_in("see q7:answer_1:0.", ("E9", "answer_1", "q7:answer_1:0", "answer_10")) == (
        "answer_1", "q7:answer_1:0")


def test_gold_meta_keys_are_ids_answers_or_annotations() -> None:
    assert [meta_kind(k) for k in ("task_id", "answer_session_ids", "id", "topic_id")] == [
        "id"] * 4
    assert [meta_kind(k) for k in ("adversarial_answer", "superseded_answers")] == [
        "answer"] * 2
    assert [meta_kind(k) for k in ("difficulty", "category_number", "references",
                                   "paid")] == [None] * 4


def test_judging_stages_are_not_guarded() -> None:
    assert {"memory", "retrieve", "construct", "answer"} == GUARDED_STAGES
    assert not {"judge", "calibration"} & GUARDED_STAGES


def test_no_locomo_guarded_id_is_a_word_of_its_conversation(locomo_path: Path) -> None:
    forbidden, text = _forbidden("locomo", locomo_path)
    prepared = build("locomo", LoadRequest(source=locomo_path))
    adversarial = {json.loads(g)["adversarial_answer"] for g in
                   prepared.questions.column("gold_meta").to_pylist()
                   if g and "adversarial_answer" in g}
    guarded = {s for strings in forbidden.values() for s in strings}
    assert guarded and adversarial and not guarded & adversarial
    for conv, ids in forbidden.items():
        assert ids_in(text[conv], ids) == (), conv


def test_annotations_are_not_guarded_and_task_ids_are(tmp_path: Path) -> None:
    groupmembench, _ = _forbidden("groupmembench", FIXTURES / "groupmembench")
    assert not any("hard" in ids for ids in groupmembench.values())  # a `difficulty`
    evermembench, _ = _forbidden("evermembench", FIXTURES / "evermembench" / "eval")
    (ids,) = evermembench.values()
    assert "T001" in ids
    assert ids_in("the T0012 review", ids) == () and ids_in("task T001 is late", ids)
