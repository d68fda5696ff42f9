from __future__ import annotations

import statistics
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmem_core import DataError
from tmem_core.benchmarks import LoadRequest, build, prepare
from tmem_core.benchmarks._synthetic import ABSTAIN
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table

KINDS = {"multi_hop", "knowledge_update", "temporal", "user_implicit", "term_ambiguity",
         "abstention"}


@pytest.mark.parametrize("variant", ["base", "interleaved+native-revisions",
                                     "interleaved+revisions=2"])
def test_same_seed_same_bytes(tmp_path: Path, variant: str) -> None:
    a = prepare("synthetic", LoadRequest(size=1500, seed=7, variant=variant), tmp_path / "a")
    b = prepare("synthetic", LoadRequest(size=1500, seed=7, variant=variant), tmp_path / "b")
    c = prepare("synthetic", LoadRequest(size=1500, seed=8, variant=variant), tmp_path / "c")
    for name in ("messages.parquet", "questions.parquet", "manifest.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a / "messages.parquet").read_bytes() != (c / "messages.parquet").read_bytes()


@settings(max_examples=8, deadline=None)
@given(size=st.integers(min_value=200, max_value=4000), seed=st.integers(0, 10_000),
       variant=st.sampled_from(["base", "interleaved=2", "interleaved=6+no-metadata"]))
def test_exact_size_and_valid_tables(size: int, seed: int, variant: str) -> None:
    prepared = build("synthetic", LoadRequest(size=size, seed=seed, variant=variant))  # validates
    assert prepared.messages.num_rows == size
    assert prepared.questions.num_rows >= 6


def test_structure_of_a_workspace() -> None:
    prepared = build("synthetic", LoadRequest(size=3000, seed=1))
    msgs = messages_from_table(prepared.messages)
    assert len({m.channel for m in msgs}) >= 4 and len({m.author for m in msgs}) >= 5
    assert len({m.role for m in msgs}) >= 4 and len({m.phase for m in msgs}) == 5
    questions = questions_from_table(prepared.questions)
    assert {q.category for q in questions} == KINDS
    gold = gold_from_table(prepared.questions)
    abstain = [g for g in gold.values() if g.answer_kind == "abstention"]
    assert abstain and all(g.answer == ABSTAIN and not g.evidence_ids for g in abstain)
    assert all(g.evidence_ids for g in gold.values() if g.answer_kind != "abstention")
    implicit = [q for q in questions if q.category == "user_implicit"]
    by_id = {m.msg_id: m for m in msgs}
    for q in implicit:  # "what did I propose": the asker wrote the evidence
        assert by_id[gold[q.qid].evidence_ids[0]].author == q.asking_user


@pytest.mark.parametrize("variant", ["base", "interleaved"])
def test_topics_recur_in_dense_episodes_separated_by_long_gaps(variant: str) -> None:
    msgs = messages_from_table(build("synthetic", LoadRequest(size=3000, seed=2,
                                                              variant=variant)).messages)
    gaps_in, gaps_between = [], []
    by_topic = defaultdict(list)
    for m in msgs:
        if m.topic and m.reply_to:
            by_topic[m.topic].append(m)
    for topic_msgs in by_topic.values():
        stamps = [m.timestamp for m in topic_msgs]
        for a, b in pairwise(stamps):
            (gaps_in if (b - a).total_seconds() < 3 * 3600 else gaps_between).append(
                (b - a).total_seconds())
    assert gaps_in and gaps_between
    assert max(gaps_in) < 3 * 3600 and min(gaps_between) > 2 * 86400


@pytest.mark.parametrize("variant", ["native-revisions", "native-revisions+interleaved"])
def test_revision_variant_ends_chains_with_a_rollback(variant: str) -> None:
    prepared = build("synthetic", LoadRequest(size=3000, seed=3, variant=variant))
    msgs = {m.msg_id: m for m in messages_from_table(prepared.messages)}
    gold = gold_from_table(prepared.questions)
    updates = [q for q in questions_from_table(prepared.questions)
               if q.category == "knowledge_update"]
    assert updates
    for q in updates:
        original, rollback = (msgs[e] for e in gold[q.qid].evidence_ids)
        assert "roll back" in rollback.text and original.timestamp < rollback.timestamp
        assert gold[q.qid].answer in original.text  # rolled back to the original state


@pytest.mark.parametrize("variant", ["no-metadata+native-revisions", "no-metadata+interleaved=3"])
def test_metadata_can_be_withheld(variant: str) -> None:
    prepared = build("synthetic", LoadRequest(size=800, seed=0, variant=variant))
    assert prepared.messages.column("topic").null_count == prepared.messages.num_rows
    assert prepared.messages.column("phase").null_count == prepared.messages.num_rows
    assert pc.count_distinct(prepared.messages.column("channel")).as_py() > 1


def _burst_traffic(variant: str) -> tuple[list[int], float, int]:
    """For each knowledge-update answer: how many other channels carry other topics within
    30 minutes of it; the median number of workspace messages between consecutive messages
    of one episode; the most channels any topic's episodes used."""
    prepared = build("synthetic", LoadRequest(size=3000, seed=1, variant=variant))
    msgs = messages_from_table(prepared.messages)
    by_id = {m.msg_id: m for m in msgs}
    gold = gold_from_table(prepared.questions)
    crowd = []
    for q in questions_from_table(prepared.questions):
        if q.category == "knowledge_update":
            answer = by_id[gold[q.qid].evidence_ids[-1]]
            crowd.append(len({m.channel for m in msgs if m.topic != answer.topic and abs(
                (m.timestamp - answer.timestamp).total_seconds()) <= 1800} - {answer.channel}))
    steps, channels = [], defaultdict(set)
    for n, m in enumerate(msgs):
        if m.reply_to:  # a reply and its parent belong to one episode
            parent = next(k for k in range(n - 1, -1, -1) if msgs[k].msg_id == m.reply_to)
            steps.append(n - parent)
            channels[m.topic].add(m.channel)
            assert m.channel == by_id[m.reply_to].channel  # an episode stays in its channel
    return crowd, statistics.median(steps), max(len(c) for c in channels.values())


def test_interleaving_fills_the_hours_of_an_answer_with_other_channels() -> None:
    base, base_steps, base_channels = _burst_traffic("base")
    two, two_steps, _ = _burst_traffic("interleaved=2")
    six, six_steps, six_channels = _burst_traffic("interleaved=6")
    assert base_channels == 1 < six_channels  # topics recur across channels only when on
    assert statistics.median(base) < statistics.median(two) <= statistics.median(six)
    assert min(six) >= 3  # every answer's burst shares its hour with >= 3 other channels
    assert base_steps < two_steps < six_steps  # the degree spreads an episode's messages


def test_large_sizes_split_into_workspaces() -> None:
    prepared = build("synthetic", LoadRequest(size=61_000, seed=0))
    assert prepared.messages.num_rows == 61_000
    assert len(prepared.manifest["conversations"]) == 2


@pytest.mark.parametrize("request_", [LoadRequest(size=10), LoadRequest(variant="noisy"),
                                      LoadRequest(variant="interleaved=1"),
                                      LoadRequest(variant="interleaved=7"),
                                      LoadRequest(variant="interleaved=x"),
                                      LoadRequest(variant="interleaved=2+interleaved=3")])
def test_bad_parameters(request_: LoadRequest) -> None:
    with pytest.raises(DataError):
        build("synthetic", request_)
