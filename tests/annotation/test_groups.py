"""Evidence groups: restated evidence annotated through real indexes (MiniLM + BM25) and a
scripted filter becomes one group that either member recalls; redundancy is capped; a
person's decision on a group reaches its audited members."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tmem_core import DataError
from tmem_core.annotation import (
    AnnotateConfig,
    annotate,
    annotated_variant,
    candidate_groups,
    read_audit,
    record_decision,
    write_units,
)
from tmem_core.annotation._annotate import reverse_retrieval
from tmem_core.annotation._groups import required, same_claim
from tmem_core.annotation._units import Unit, judged
from tmem_core.benchmarks import PreparedBenchmark
from tmem_core.evaluation import evidence_recall
from tmem_core.evaluation._recall import evidence_groups
from tmem_core.llm import ChatRequest, ChatResponse, Usage
from tmem_core.retrieval import IndexStore, conversations_from_table
from tmem_core.schema import (
    Gold,
    Message,
    Question,
    gold_from_table,
    messages_to_table,
    questions_to_table,
)

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
ANSWER = "an append-only completion log"
TEXTS = {
    3: "Decision: we replace the LMS export with an append-only completion log.",
    9: "To restate for the notes: the append-only completion log replaces the LMS export.",
    5: "Priya owns the migration and reviews the schema on Friday.",
}
QUESTION = Question("c", "c:q1", "What replaces the LMS export?", "knowledge_update")


def _base() -> PreparedBenchmark:
    texts = {k: f"Standup note {k}: the cafeteria menu changes to soup {k}." for k in
             range(1, 15)} | TEXTS
    messages = [Message("c", f"c:{k}", k, T0 + timedelta(minutes=k), text, author="Dana")
                for k, text in sorted(texts.items())]
    gold = Gold(QUESTION.qid, ANSWER, evidence_ids=("c:3",))
    return PreparedBenchmark("toy", messages_to_table(messages),
                             questions_to_table([(QUESTION, gold)]), {"source": "test"})


class _Filter:
    """ANSWER for every message naming the completion log, NONE for the rest."""

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return [self._one(r) for r in requests]

    @staticmethod
    def _one(request: ChatRequest) -> ChatResponse:
        lines = [line for line in request.messages[-1].content.splitlines()
                 if line.startswith("[m")]
        labels = {line[1:].split("]", 1)[0]: "ANSWER" if "completion log" in line else "NONE"
                  for line in lines}
        return ChatResponse(json.dumps({"labels": labels}), {"labels": labels}, Usage(50, 10))


def test_restated_evidence_is_one_group_recalled_by_either_member() -> None:
    base = _base()
    store = IndexStore(conversations_from_table(base.messages))
    gold = gold_from_table(base.questions)
    done = annotate(store, [QUESTION], gold, _Filter(), AnnotateConfig(depth=10, batch=10))
    accepted = sorted(u.msg_id for u in done.units if u.status == "accepted")
    assert accepted == ["c:3", "c:9"]  # both restatements pass the filter ...
    variant = annotated_variant(base, done.units, {}, done.stats)
    new = gold_from_table(variant.questions)[QUESTION.qid]
    assert evidence_groups(new) == (("c:3", "c:9"),)  # ... as one claim
    assert evidence_recall(["c:3"], new) == evidence_recall(["c:9"], new) == 1.0
    assert evidence_recall(["c:5"], new) == 0.0
    meta = json.loads(new.gold_meta or "{}")
    assert meta["annotation"]["groups"][0]["claim"] == ["append", "completion", "log"]
    assert meta["base_evidence_ids"] == ["c:3"]
    assert variant.manifest["annotation"]["groups"] == {
        "required": 1, "capped": 0, "required_units": 2, "max_groups": 4,
        "rule": "same kind, and the same reference words or at least 60% of their words in "
                "common"}
    assert done.stats["retrieval"] == "pooled"


def test_pooled_reverse_retrieval_takes_bm25_and_dense_in_turn() -> None:
    base = _base()
    store = IndexStore(conversations_from_table(base.messages))
    index = store.index("c", False)
    query = f"{QUESTION.question} {ANSWER}"
    bm25, dense = index.ranking(query, "bm25", 6), index.ranking(query, "dense", 6)
    pooled = [index.conversation.position[m.msg_id]
              for m in reverse_retrieval(store, QUESTION, ANSWER, 6)]
    assert len(pooled) == len(set(pooled)) == 6 and set(pooled) <= set(bm25) | set(dense)
    assert len(bm25) < 6  # BM25 ranks only messages sharing a word; dense fills the rest
    for k in (1, 2):  # the first k of each run are in the pool's first 2k
        assert set(bm25[:k]) | set(dense[:k]) <= set(pooled[:2 * k])


def _unit(msg: str, text: str, label: str = "ANSWER", rank: int = 0,
          answer: str = ANSWER, lexical: float = 0.9) -> Unit:
    return judged(QUESTION.qid, "c", QUESTION.question, answer, msg, text, rank,
                  label, lexical)  # type: ignore[arg-type]


def test_the_same_claim_rule() -> None:
    first, restated = _unit("c:3", TEXTS[3]), _unit("c:9", TEXTS[9])
    other = _unit("c:5", TEXTS[5])
    assert same_claim(first, restated) and not same_claim(first, other)
    copy = _unit("c:6", TEXTS[5] + " Noted.", "BRIDGE")
    assert not same_claim(other, copy)  # near copies, but one is an anchor
    assert same_claim(_unit("c:7", TEXTS[5] + " Noted.", rank=2), other)  # a near copy


def test_redundancy_is_capped_at_max_groups_best_first() -> None:
    claims = ["Paris", "Berlin", "Madrid", "Lisbon", "Vienna", "Prague"]
    answer = " ".join(claims)
    units = [_unit(f"c:{k}", f"{city} was chosen on day {k}.", rank=k, answer=answer)
             for k, city in enumerate(claims)]
    groups = candidate_groups(units)
    assert len(groups) == 6
    chosen, capped = required(groups, units, max_groups=4)
    assert [g.units[0].msg_id for g in chosen] == ["c:0", "c:1", "c:2", "c:3"]
    assert [g.units[0].msg_id for g in capped] == ["c:4", "c:5"]


def test_a_group_decision_reaches_its_audited_members(tmp_path: Path) -> None:
    base = _base()
    units = [_unit("c:3", TEXTS[3]), _unit("c:9", TEXTS[9], rank=15, lexical=0.0),  # the
             _unit("c:10", TEXTS[9] + " Again.", "NONE", rank=2)]  # filter alone; all but it
    assert [u.status for u in units] == ["accepted", "audit", "audit"]
    write_units(tmp_path, units)
    (group,) = candidate_groups(units)
    record_decision(tmp_path, group.key, "accept")
    record_decision(tmp_path, "c:q1|c:10", "reject")  # a unit's own decision wins
    with pytest.raises(DataError, match="no low-confidence unit or group"):
        record_decision(tmp_path, "c:q1|group-9", "accept")
    variant = annotated_variant(base, units, read_audit(tmp_path), {})
    new = gold_from_table(variant.questions)[QUESTION.qid]
    assert evidence_groups(new) == (("c:3", "c:9"),)
    assert variant.manifest["annotation"]["audit"]["group_decisions"] == 1
