"""Exp-5's controlled injection: the copy equals the base benchmark except for the injected
messages (asserted message by message), each Knowledge Update question gets up to N
revisions then a rollback, labelled only in its evaluation-only gold; GroupMemBench needs its
original states known first."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import LOCOMO
from tmem_core import DataError
from tmem_core.benchmarks import (
    LoadRequest,
    PreparedBenchmark,
    build,
    get_protocol,
    read_prepared,
    with_revisions,
    write_prepared,
)
from tmem_core.benchmarks._prepare import prepared_variant
from tmem_core.benchmarks._revised_values import dates, numbers
from tmem_core.benchmarks._revisions import CONDITIONS, LLMWriter, chain_lengths, chain_of
from tmem_core.benchmarks._synthetic_vocabulary import slot_values
from tmem_core.evaluation import ControlPool, Rules, normalise
from tmem_core.llm import ChatRequest, ChatResponse, Usage
from tmem_core.schema import Message, gold_from_table, messages_from_table, questions_from_table

REQUEST = LoadRequest(size=2000, seed=4, variant="interleaved")


@pytest.fixture(scope="module")
def base() -> PreparedBenchmark:
    return build("synthetic", REQUEST)


def _check_copy(base: PreparedBenchmark, copy: PreparedBenchmark, condition: int,
                templated: bool = True) -> None:
    """Message by message: every base message unchanged but for its seq (order kept), the
    rest injected as the chains say; questions unchanged but for the chains' labels."""
    base_messages, copied = messages_from_table(base.messages), messages_from_table(copy.messages)
    base_ids = {m.msg_id for m in base_messages}
    kept = [m for m in copied if m.msg_id in base_ids]
    injected = {m.msg_id: m for m in copied if m.msg_id not in base_ids}
    assert len(kept) == len(base_messages)
    for old, new in zip(base_messages, kept, strict=True):
        assert dataclasses.replace(new, seq=old.seq) == old
    assert [m.seq for m in copied] == list(range(len(copied)))
    questions, gold = questions_from_table(copy.questions), gold_from_table(copy.questions)
    assert questions == questions_from_table(base.questions)
    base_gold = gold_from_table(base.questions)
    chains = {q.qid: chain for q in questions if (chain := chain_of(gold[q.qid]))}
    updates = {q.qid for q in questions if q.category == "knowledge_update"
               and base_gold[q.qid].evidence_ids}
    assert set(chains) == updates and updates
    for qid, g in gold.items():
        assert dataclasses.replace(g, gold_meta=base_gold[qid].gold_meta) == base_gold[qid]
    labelled = [i for c in chains.values() for i in (*c["revisions"], c["rollback"])]
    assert sorted(labelled) == sorted(injected)  # every injected message is in one chain
    position = {m.msg_id: k for k, m in enumerate(copied)}
    by_id = {**{m.msg_id: m for m in base_messages}, **injected}
    for qid, chain in chains.items():
        assert 1 <= len(chain["revisions"]) <= condition
        assert sorted(chain["original"]) == sorted(base_gold[qid].evidence_ids)
        state = max((by_id[i] for i in chain["original"]), key=lambda m: position[m.msg_id])
        steps = [injected[i] for i in (*chain["revisions"], chain["rollback"])]
        question = next(q for q in questions if q.qid == qid)
        assert position[state.msg_id] < position[steps[0].msg_id]
        assert [position[m.msg_id] for m in steps] == sorted(position[m.msg_id] for m in steps)
        assert state.timestamp <= steps[0].timestamp
        assert question.question_time is None or steps[-1].timestamp <= question.question_time
        for m in steps:
            assert (m.channel, m.topic, m.phase, m.session_id) == (
                state.channel, state.topic, state.phase, state.session_id)
            assert m.meta is None and m.reply_to is None and m.timestamp.microsecond == 0
        if templated:  # the rollback restores the original by name
            assert gold[qid].answer in steps[-1].text
    facts = copy.manifest["revision_chains"]
    assert facts["condition"] == condition and facts["questions"] == len(chains)
    assert facts["mean_injected_per_question"] == len(injected) / len(chains)
    assert facts["base"]["messages"] == base.messages.num_rows


@pytest.mark.parametrize("condition", [1, 2, 3])
def test_the_copy_equals_the_base_but_for_the_injected_chains(base: PreparedBenchmark,
                                                              condition: int) -> None:
    variant = f"{REQUEST.variant}+revisions={condition}"
    copy = build("synthetic", dataclasses.replace(REQUEST, variant=variant))
    _check_copy(base, copy, condition)
    if condition == 1:  # one revision and the rollback, always
        assert copy.manifest["revision_chains"]["mean_injected_per_question"] == 2.0
    assert build("synthetic", dataclasses.replace(REQUEST, variant=variant)).messages.equals(
        copy.messages)  # stable: the same ids, times and texts again


EVEN = LoadRequest(size=1000, seed=0)  # four Knowledge Update questions


@pytest.mark.parametrize(("condition", "mean"), [(1, 2.0), (2, 2.5), (3, 3.0)])
def test_each_condition_injects_exactly_the_papers_mean_per_question(condition: int,
                                                                     mean: float) -> None:
    """A.5: 2.0 / 2.5 / 3.0 injected messages per question, counted from the copy itself;
    the revision counts are spread evenly over 1..condition."""
    base = build("synthetic", EVEN)
    copy = build("synthetic", dataclasses.replace(EVEN, variant=f"revisions={condition}"))
    chains = [c for g in gold_from_table(copy.questions).values() if (c := chain_of(g))]
    injected = copy.messages.num_rows - base.messages.num_rows
    assert len(chains) == 4 and injected / len(chains) == mean
    assert copy.manifest["revision_chains"]["mean_injected_per_question"] == mean
    counts = Counter(len(c["revisions"]) for c in chains)
    assert set(counts) == set(range(1, condition + 1))
    assert max(counts.values()) - min(counts.values()) <= 1 + (condition == 3)


def test_chain_lengths_average_the_uniform_mean_whatever_the_count() -> None:
    for questions in range(1, 40):
        for condition in (1, 3):
            lengths = chain_lengths(questions, condition)
            assert sum(lengths) == questions * (1 + condition) / 2
            assert min(lengths) >= 1 and max(lengths) <= condition
        odd = sum(chain_lengths(questions, 2)) - 1.5 * questions  # 2.5 needs an even count
        assert odd == (0.5 if questions % 2 else 0)


def test_revised_values_are_of_the_originals_kind_and_never_an_answer(
        base: PreparedBenchmark) -> None:
    """Every revised value lies in its own slot's vocabulary and is no question's answer (nor
    a whole phrase of one), in every condition."""
    answers = {normalise(g.answer or "") for g in gold_from_table(base.questions).values()}
    for condition in CONDITIONS:
        gold = gold_from_table(with_revisions(base, condition, seed=condition).questions)
        chains = {qid: c for qid, g in gold.items() if (c := chain_of(g))}
        assert chains
        for qid, chain in chains.items():
            assert len(chain["values"]) == len(chain["revisions"])
            for value in chain["values"]:
                assert value in slot_values(gold[qid].answer or "")
                assert not any(f" {normalise(value)} " in f" {a} " for a in answers)


def test_a_date_becomes_a_date_and_a_number_a_number() -> None:
    assert dates("on 2024-03-05")[:2] == ["on 2024-03-12", "on 2024-02-27"]
    assert dates("5 March 2024")[0] == "12 March 2024"
    assert dates("March 5, 2024")[1] == "February 27, 2024"
    assert numbers("30 seconds")[:3] == ["45 seconds", "60 seconds", "15 seconds"]
    assert numbers("1,000 rows")[0] == "1,500 rows" and numbers("no digits") == []


def test_bad_conditions_and_a_second_injection_are_refused(base: PreparedBenchmark) -> None:
    for variant in ("revisions=4", "revisions=x", "revisions=1+revisions=2"):
        with pytest.raises(DataError, match="revisions=N takes one N of 1, 2, 3"):
            build("synthetic", LoadRequest(size=400, variant=variant))
    with pytest.raises(DataError, match="native-revisions"):
        build("synthetic", LoadRequest(size=400, variant="revisions"))
    with pytest.raises(DataError, match="already holds revision chains"):
        with_revisions(with_revisions(base, 1), 2)
    with pytest.raises(DataError, match="no knowledge_update questions"):
        build("locomo", LoadRequest(source=LOCOMO, variant="revisions=2"))


def test_groupmembench_needs_its_original_states_known(fixtures: Path) -> None:
    source = fixtures / "groupmembench"
    with pytest.raises(DataError, match="annotate the benchmark first"):
        build("groupmembench", LoadRequest(source=source, variant="revisions=2"))
    annotated = _with_two_annotated_updates(build("groupmembench", LoadRequest(source=source)))
    copy = with_revisions(annotated, 2, seed=1)
    _check_copy(annotated, copy, 2)
    chains = [c for g in gold_from_table(copy.questions).values() if (c := chain_of(g))]
    texts = {m.msg_id: m.text for m in messages_from_table(copy.messages)}
    answers = {g.answer for g in gold_from_table(annotated.questions).values()}
    for chain in chains:  # a budget revised to another budget, never the other's answer
        assert chain["values"] and not set(chain["values"]) & answers
        for value, msg_id in zip(chain["values"], chain["revisions"], strict=True):
            assert re.fullmatch(r"\d+k", value) and value in texts[msg_id]


def _with_two_annotated_updates(prepared: PreparedBenchmark) -> PreparedBenchmark:
    """The fixture as an annotation would leave it: its Knowledge Update question and a
    second one (45k and 60k budgets) with evidence ids."""
    rows = prepared.questions.to_pylist()
    messages = messages_from_table(prepared.messages)
    finance = [m.msg_id for m in messages if m.conv_id == "Finance"]
    update = next(r for r in rows if r["category"] == "knowledge_update")
    update["evidence_ids"] = finance[-2:]
    rows.append({**update, "qid": f"{update['qid']}-b", "answer": "60k",
                 "evidence_ids": finance[:1]})
    table = pa.Table.from_pylist(rows, schema=prepared.questions.schema)
    return dataclasses.replace(prepared, questions=table)


class _Scripted:
    """A backbone that writes good chains for some questions and junk for the others."""

    def __init__(self, junk: set[str]) -> None:
        self.junk = junk
        self.requests: list[ChatRequest] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.requests += requests
        out = []
        for r in requests:
            count = r.schema["properties"]["revisions"]["minItems"]  # type: ignore[index]
            parsed = ({"revisions": ["no"]} if r.qid in self.junk else
                      {"revisions": [f"LLM revision {k}" for k in range(count)],
                       "rollback": "LLM rollback"})
            out.append(ChatResponse(json.dumps(parsed), parsed, Usage(40, 12)))
        return out


def test_a_backbone_writes_the_texts_and_its_junk_falls_back_to_templates(
        base: PreparedBenchmark) -> None:
    updates = [q.qid for q in questions_from_table(base.questions)
               if q.category == "knowledge_update"]
    llm = _Scripted({updates[0]})
    writer = LLMWriter(llm, "scripted", seed=0)
    copy = with_revisions(base, 3, writer=writer)
    _check_copy(base, copy, 3, templated=False)
    stats = copy.manifest["revision_chains"]["writer_stats"]
    assert stats["calls"] == len(updates) == len(llm.requests)
    assert stats["fallbacks"] == [updates[0]] and stats["prompt_tokens"] == 40 * len(updates)
    for request in llm.requests:  # the writer sees the state it revises, never a label
        assert "Messages that established it" in request.messages[-1].content
    texts = {m.msg_id: m.text for m in messages_from_table(copy.messages)}
    gold = gold_from_table(copy.questions)
    for qid in updates:
        chain = chain_of(gold[qid])
        assert chain is not None
        rollback = texts[chain["rollback"]]
        assert (rollback == "LLM rollback") == (qid != updates[0])


def test_chain_messages_carry_no_label_a_method_could_read(base: PreparedBenchmark) -> None:
    copy = with_revisions(base, 2)
    fields = [f.name for f in dataclasses.fields(Message) if f.name not in ("text", "msg_id")]
    base_ids = set(base.messages.column("msg_id").to_pylist())
    injected = [m for m in messages_from_table(copy.messages) if m.msg_id not in base_ids]
    words = ("revision", "rollback", "injected", "exp5")
    assert injected and all(not any(w in str(getattr(m, f)).lower() for w in words
                                    for f in fields) for m in injected)


def _superseded_controls(prepared: PreparedBenchmark, name: str) -> dict[str, str]:
    """qid -> the prediction of its `superseded` control, for every question that has one."""
    questions, gold = questions_from_table(prepared.questions), gold_from_table(prepared.questions)
    pool = ControlPool([(q, gold[q.qid]) for q in questions], Rules.of(get_protocol(name)))
    return {q.qid: c.prediction for q in questions for c in pool.controls(q, gold[q.qid])
            if c.kind == "superseded"}


@pytest.mark.parametrize("name", ["groupmembench", "synthetic"])
def test_a_revisions_variant_yields_superseded_controls(base: PreparedBenchmark, fixtures: Path,
                                                        name: str) -> None:
    """Each chained question's `superseded` control is its chain's last revised value (the
    value the rollback undid), as its revision message states it; GroupMemBench states no
    superseded value of its own, so its chained questions gain the control."""
    before = (_with_two_annotated_updates(build(name, LoadRequest(source=fixtures / name)))
              if name == "groupmembench" else base)
    copy = with_revisions(before, 3, seed=2)
    texts = {m.msg_id: m.text for m in messages_from_table(copy.messages)}
    gold = gold_from_table(copy.questions)
    chains = {qid: chain for qid, g in gold.items() if (chain := chain_of(g))}
    controls = _superseded_controls(copy, name)
    assert chains and set(chains) <= set(controls)
    if name == "groupmembench":
        assert _superseded_controls(before, name) == {}
    for qid, chain in chains.items():
        value = controls[qid]
        assert value != gold[qid].answer and value in texts[chain["revisions"][-1]]
        assert gold[qid].answer in texts[chain["rollback"]]


def test_a_prepared_base_gets_its_revisions_variant_made_once(base: PreparedBenchmark,
                                                              tmp_path: Path) -> None:
    """A sweep's `prepared` base with `variant = "revisions=N"`: the variant is written once
    under the sweep's data folder, named by the base's content, and reused."""
    folder, data = tmp_path / "annotated", tmp_path / "data"
    write_prepared(base, folder)
    assert prepared_variant(folder, "base", 0, data) == folder
    made = prepared_variant(folder, "revisions=2", 0, data)
    assert made.parent == data and read_prepared(made).manifest["revision_chains"][
        "condition"] == 2
    stamp = (made / "manifest.json").stat().st_mtime_ns
    assert prepared_variant(folder, "revisions=2", 0, data) == made
    assert (made / "manifest.json").stat().st_mtime_ns == stamp
    assert prepared_variant(folder, "revisions=3", 0, data) != made
    with pytest.raises(DataError, match="a prepared benchmark takes only revisions=N"):
        prepared_variant(folder, "no-metadata+revisions=2", 0, data)
