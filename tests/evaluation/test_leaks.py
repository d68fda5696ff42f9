"""The leak guards' rules: ids as whole tokens, answer-like `gold_meta` values as answers
(not ids), annotations neither; on the real LoCoMo file no guarded id is a word of its own
conversations, and a gold answer planted in an answer prompt is found whatever its context
(empty, one message, many) and whichever instruction words contain it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tmem_core.benchmarks import LoadRequest, build, get_protocol
from tmem_core.evaluation import answer_prompt
from tmem_core.evaluation._leaks import (
    GUARDED_STAGES,
    gold_leaks,
    gold_strings,
    ids_in,
    meta_kind,
)
from tmem_core.evaluation._metrics import normalise
from tmem_core.methods._context import render_message
from tmem_core.schema import (
    Gold,
    Message,
    Question,
    gold_from_table,
    messages_from_table,
    questions_from_table,
)


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


@dataclass(frozen=True)
class Locomo:
    questions: dict[str, Question]
    gold: dict[str, Gold]
    messages: dict[str, Message]


@pytest.fixture(scope="module")
def locomo(locomo_path: Path) -> Locomo:
    prepared = build("locomo", LoadRequest(source=locomo_path))
    return Locomo({q.qid: q for q in questions_from_table(prepared.questions)},
                  gold_from_table(prepared.questions),
                  {m.msg_id: m for m in messages_from_table(prepared.messages)})


def _context(locomo: Locomo, qid: str, size: str) -> str:
    """An evidence context as the answer model sees it: none, the question's first gold
    evidence message (which holds the answer), or 60 messages of its conversation around
    that one."""
    evidence = locomo.messages[locomo.gold[qid].evidence_ids[0]]
    if size == "empty":
        return ""
    if size == "short":
        return render_message(evidence)
    around = [m for m in locomo.messages.values() if m.conv_id == evidence.conv_id
              and abs(m.seq - evidence.seq) <= 30]
    return "\n".join(render_message(m) for m in around)


# LoCoMo questions whose gold answer the bare answer prompt holds: inside a longer word ("sage"
# in "messages") or as a word of its own (the question "Does John live close to a beach or the
# mountains?" holds its answer "beach")
INSIDE_WORDS = {"conv-43:q104": "sage"}
AS_A_WORD = {"conv-41:q41": "beach"}


@pytest.mark.parametrize("size", ["empty", "short", "long"])
def test_a_gold_answer_planted_in_an_answer_prompt_is_found(locomo: Locomo, size: str) -> None:
    protocol = get_protocol("locomo")
    for qid in ["conv-26:q0", *INSIDE_WORDS, *AS_A_WORD]:
        question, gold = locomo.questions[qid], locomo.gold[qid]
        context = _context(locomo, qid, size)
        bare, _ = answer_prompt(question, "flat", "", protocol)
        shown = " ".join(m["content"] for m in bare)
        clean, _ = answer_prompt(question, "flat", context, protocol)
        assert gold_leaks(clean, context, shown, gold) == [], (qid, size)
        hint = {"role": "user", "content": f"(The answer is {gold.answer}.)"}
        for planted in ([*clean, hint], [hint, *clean]):
            assert gold_leaks(planted, context, shown, gold) == [
                f"{qid}: gold answer {gold.answer!r} in prompt"], (qid, size)


def test_the_planted_answers_are_words_the_bare_prompt_holds(locomo: Locomo) -> None:
    for qid, answer in {**INSIDE_WORDS, **AS_A_WORD}.items():
        bare, _ = answer_prompt(locomo.questions[qid], "flat", "", get_protocol("locomo"))
        shown = f" {normalise(' '.join(m['content'] for m in bare))} "
        word = f" {normalise(answer)} "
        assert locomo.gold[qid].answer == answer
        assert normalise(answer) in shown and (word in shown) is (qid in AS_A_WORD)


def test_a_context_repeated_outside_its_place_is_found() -> None:
    """A context of one word, the gold answer itself: taken out where it stands, its copy in
    a hint still counts."""
    gold = Gold("conv-47:q79", "Ned", evidence_ids=("m3541",))
    messages = [{"role": "user", "content": "Evidence:\nNed\n\nQuestion: the pup's name?"},
                {"role": "user", "content": "Hint: Ned"}]
    assert gold_leaks(messages[:1], "Ned", "Question: the pup's name?", gold) == []
    assert gold_leaks(messages, "Ned", "Question: the pup's name?", gold) == [
        "conv-47:q79: gold answer 'Ned' in prompt"]
