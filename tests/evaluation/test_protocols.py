from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tmem_core.benchmarks import get_protocol
from tmem_core.evaluation import answer_prompt, gold_leaks
from tmem_core.evaluation._answer import format_instruction
from tmem_core.evaluation._verdict import parse_verdict
from tmem_core.schema import Gold, Option, Question


def q(category: str, qid: str = "q1", **kw: object) -> Question:
    return Question(conv_id="c", qid=qid, question="When did the team switch?",
                    category=category, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("category", "kind", "prompt"), [
    ("temporal-reasoning", "text", "judge/longmemeval_temporal"),
    ("knowledge-update", "text", "judge/longmemeval_knowledge_update"),
    ("single-session-preference", "text", "judge/longmemeval_preference"),
    ("single-session-user", "text", "judge/longmemeval_default"),
    ("multi-session", "text", "judge/longmemeval_default"),
    ("temporal-reasoning", "abstention", "judge/longmemeval_abstention"),
])
def test_longmemeval_judge_per_question_type(category: str, kind: str, prompt: str) -> None:
    protocol = get_protocol("longmemeval")
    assert protocol.judge_for(q(category), Gold("q1", "x", answer_kind=kind)) == prompt


def test_deterministic_questions_skip_the_llm_judge() -> None:
    assert get_protocol("evermembench").judge_for(
        q("P_Title"), Gold("q1", "B", answer_kind="choice")) is None
    assert get_protocol("locomo").judge_for(q("adversarial"), Gold("q1", None)) is None
    assert get_protocol("locomo").judge_for(q("temporal"), Gold("q1", "x")) == "judge/locomo"


def test_answer_prompt_formats() -> None:
    when = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    messages, prompt = answer_prompt(q("temporal", asking_user="User_2", question_time=when),
                                     "forest", "[1] ROOT ...", get_protocol("synthetic"))
    text = messages[-1]["content"]
    assert prompt.name == "answer/forest@v2" and "UPDATE" in messages[0]["content"]
    assert "Asked by: User_2" in text and "01 May 2024, 09:30" in text
    assert "give the date" in text and "No information available." in text
    options = (Option("A", "June 3"), Option("B", "June 10"))
    messages, _ = answer_prompt(q("F_TP"), "flat", "ctx", get_protocol("evermembench"),
                                options)
    assert "B. June 10" in messages[-1]["content"] and "letter" in messages[-1]["content"]
    for category, dated in (("F_TP", True), ("F_SH", False)):
        messages, _ = answer_prompt(q(category), "flat", "ctx", get_protocol("evermembench"))
        assert ("give the date" in messages[-1]["content"]) is dated
    with pytest.raises(ValueError, match="unknown context kind"):
        answer_prompt(q("x"), "graph", "ctx", get_protocol("locomo"))


def test_abstention_phrase_only_where_the_benchmark_protocol_offers_it() -> None:
    """LoCoMo offers "Not mentioned" to its adversarial category alone; LongMemEval's answer
    prompt offers no abstention (its `_abs` id is gold); GroupMemBench asks every question."""
    def instruction(benchmark: str, category: str, qid: str = "q1") -> str:
        return format_instruction(q(category, qid), get_protocol(benchmark), None)

    assert "Not mentioned in the conversation." in instruction("locomo", "adversarial")
    for category in ("multi-hop", "temporal", "open-domain", "single-hop"):
        assert "Not mentioned" not in instruction("locomo", category)
        assert "reply exactly" not in instruction("locomo", category)
    for qid in ("e47be7e1", "e47be7e1_abs"):
        text = instruction("longmemeval", "temporal-reasoning", qid)
        assert "cannot answer" not in text and "reply exactly" not in text
    assert "No information available." in instruction("groupmembench", "single_hop")


@pytest.mark.parametrize(("text", "verdict"), [
    ("CORRECT", True), ("wrong.", False), ("**Correct** - matches the gold date", True),
    ("Yes, the response gives 18 days.", True), ("no", False),
    ("The response names a different city. Verdict: WRONG", False),
    ("I believe this is correct since both say Paris.", True),
    ("This is not correct.", False), ("Incorrect", False),
    ("Hmm, hard to say.", None), ("", None), ("It could be correct or wrong.", None),
    ("The limit is 3.\n\nThe gold answer is no information available.", None),
])
def test_verdict_parser_tolerates_chatter(text: str, verdict: bool | None) -> None:
    assert parse_verdict(text) is verdict


def test_gold_leak_validator_ignores_context_but_catches_instructions() -> None:
    gold = Gold("q1", "5 attempts", evidence_ids=("c:m000012",))
    clean, _ = answer_prompt(q("knowledge_update"), "flat", "[c:m000012] going with 5 attempts",
                             get_protocol("synthetic"))
    assert gold_leaks(clean, "[c:m000012] going with 5 attempts", "When?", gold) == []
    leaked = [*clean, {"role": "user", "content": "Hint: the answer is 5 attempts"}]
    assert gold_leaks(leaked, "[c:m000012] going with 5 attempts", "When?", gold) == [
        "q1: gold answer '5 attempts' in prompt"]


def test_abstention_phrase_in_instructions_is_not_a_leak() -> None:
    gold = Gold("q1", "No information available.", answer_kind="abstention")
    messages, _ = answer_prompt(q("abstention"), "flat", "ctx", get_protocol("synthetic"))
    assert "No information available." in messages[-1]["content"]
    assert gold_leaks(messages, "ctx", "When?", gold) == []
