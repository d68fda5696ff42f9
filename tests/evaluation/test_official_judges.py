"""The official judges as shipped: each template equals its source's text (kept in
`upstream_judges` with its repository, path and commit), the judge's call is sent as its
source sends it (roles, temperature, max_tokens, response format) and real-shaped replies are
read as its source reads them."""

from __future__ import annotations

import pytest

from tests.evaluation.upstream_judges import (
    EVERMEMBENCH_SOURCE,
    EVERMEMBENCH_SYSTEM,
    EVERMEMBENCH_USER,
    LONGMEMEVAL,
    LONGMEMEVAL_SOURCE,
    MEM0_ACCURACY_PROMPT,
    MEM0_SOURCE,
)
from tmem_core.benchmarks import get_protocol
from tmem_core.evaluation import JudgeCall
from tmem_core.pipeline._judge_stage import judge_request
from tmem_core.prompts import load_prompt
from tmem_core.schema import Gold, Question

LME_PROMPTS = {"single-session-user": "judge/longmemeval_default",
               "temporal-reasoning": "judge/longmemeval_temporal",
               "knowledge-update": "judge/longmemeval_knowledge_update",
               "single-session-preference": "judge/longmemeval_preference",
               "abstention": "judge/longmemeval_abstention"}
QUESTION = Question("c1", "q1", "When did Mel paint the sunrise?", "temporal")
GOLD = Gold("q1", "7 May 2023", ())


def _source(prompt: str) -> str | None:
    return load_prompt(prompt).header("source")


@pytest.mark.parametrize("task", list(LME_PROMPTS))
def test_longmemeval_templates_are_upstream_s(task: str) -> None:
    prompt = load_prompt(LME_PROMPTS[task])
    assert prompt.name == f"{LME_PROMPTS[task]}@v2"
    assert (prompt.system, prompt.user) == ("", LONGMEMEVAL[task])
    repo, path, commit = LONGMEMEVAL_SOURCE
    assert all(part in (_source(LME_PROMPTS[task]) or "") for part in (repo, path, commit))
    filled = prompt.render(question="Q?", answer="A", response="R")
    assert filled == [{"role": "user", "content": LONGMEMEVAL[task].format("Q?", "A", "R")}]


def test_longmemeval_questions_get_the_template_of_their_type() -> None:
    protocol = get_protocol("longmemeval")
    for task, prompt in LME_PROMPTS.items():
        abstains = task == "abstention"
        question = Question("c", "q_abs" if abstains else "q", "?", "multi-session"
                            if abstains else task)
        gold = Gold(question.qid, "x", (), answer_kind="abstention" if abstains else "text")
        assert protocol.judge_for(question, gold) == prompt
    other = Question("c", "q", "?", "single-session-assistant")
    assert protocol.judge_for(other, GOLD) == "judge/longmemeval_default"


def test_locomo_and_evermembench_templates_are_upstream_s() -> None:
    locomo, evermem = load_prompt("judge/locomo"), load_prompt("judge/evermembench_open")
    assert (locomo.name, locomo.system, locomo.user) == ("judge/locomo@v2", "",
                                                         MEM0_ACCURACY_PROMPT)
    assert (evermem.system, evermem.user) == (EVERMEMBENCH_SYSTEM, EVERMEMBENCH_USER)
    for prompt, (repo, path, commit) in (("judge/locomo", MEM0_SOURCE),
                                         ("judge/evermembench_open", EVERMEMBENCH_SOURCE)):
        assert all(part in (_source(prompt) or "") for part in (repo, path, commit))
    sent = evermem.render(question="Q?", answer="A", response="R")
    assert sent == [{"role": "system", "content": EVERMEMBENCH_SYSTEM},
                    {"role": "user", "content": EVERMEMBENCH_USER.format(
                        question="Q?", golden_answer="A", generated_answer="R")}]
    assert '{"label": "CORRECT"}' in sent[1]["content"]  # upstream's {{ }} filled as { }


def test_the_project_paraphrases_stay_selectable_by_name() -> None:
    for ref in ("judge/locomo", "judge/evermembench_open", *LME_PROMPTS.values()):
        project = load_prompt(f"{ref}@v1")
        assert project.labels and project.header("variant") is None  # the project's
        assert load_prompt(ref).header("variant") == "official"


@pytest.mark.parametrize(("ref", "roles", "max_tokens", "schema"), [
    ("judge/longmemeval_temporal", ["user"], 10, None),
    ("judge/locomo", ["user"], 256, "json"),
    ("judge/evermembench_open", ["system", "user"], 256, None),
    ("judge/locomo@v1", ["system", "user"], 32, "verdict"),
])
def test_the_judge_call_is_sent_as_its_source_sends_it(
        ref: str, roles: list[str], max_tokens: int, schema: str | None) -> None:
    call = JudgeCall(load_prompt(ref))
    first = judge_request(call, QUESTION, GOLD, "On 7 May.", repeat=0, attempt=0)
    assert [m.role for m in first.messages] == roles
    assert first.sampling is not None
    assert (first.sampling.temperature, first.sampling.max_tokens) == (0.0, max_tokens)
    assert "On 7 May." in first.messages[-1].content
    assert "7 May 2023" in first.messages[-1].content
    properties = list((first.schema or {}).get("properties", {}))
    assert properties == {None: [], "json": ["reason", "label"], "verdict": ["verdict"]}[schema]
    again = judge_request(call, QUESTION, GOLD, "On 7 May.", repeat=0, attempt=1)
    assert again.sampling is not None and again.sampling.temperature == 0.7  # a retry
    described = call.describe()
    assert (described["roles"], described["max_tokens"]) == (roles, max_tokens)
    if described["variant"] == "official":
        assert any("asked once more" in h for h in described["harness"])


@pytest.mark.parametrize(("ref", "reply", "verdict"), [
    ("judge/longmemeval_default", "Yes.", True),
    ("judge/longmemeval_default", "yes, because the response names the same city", True),
    ("judge/longmemeval_default", "No.", False),
    ("judge/longmemeval_default", "", False),  # upstream: no 'yes', not correct
    ("judge/locomo", 'The answer names the same day. {"label": "CORRECT"}', True),
    ("judge/locomo", '{"reason": "Another day.", "label": "WRONG"}', False),
    ("judge/locomo", '```json\n{"label": "CORRECT"}\n```', True),
    ("judge/locomo", '{"label": "correct"}', False),  # mem0 compares exactly
    ("judge/locomo", "CORRECT", None),  # no JSON: mem0's json.loads fails, so it is unread
    ("judge/evermembench_open", 'Same date in another format.\n{"label": "CORRECT"}', True),
    ("judge/evermembench_open", '```json\n{"label": " correct "}\n```', True),
    ("judge/evermembench_open", '{"reason": "x"}', False),  # no label: WRONG
    ("judge/evermembench_open", "It is CORRECT.", True),  # no JSON: the words decide
    ("judge/evermembench_open", "CORRECT or WRONG", False),
    ("judge/evermembench_open", "[1, 2]", None),  # JSON, but no object: asked again
    ("judge/locomo@v1", '{"verdict": "CORRECT"}', True),
])
def test_replies_are_read_as_the_source_reads_them(ref: str, reply: str,
                                                   verdict: bool | None) -> None:
    call = JudgeCall(load_prompt(ref))
    parsed = {"verdict": "CORRECT"} if ref.endswith("@v1") else None
    assert call.read(reply, parsed) is verdict
