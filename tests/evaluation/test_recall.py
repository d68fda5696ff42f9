"""Evidence recall: hand-computed values and the aggregate table."""

from __future__ import annotations

import pytest

from tmem_core.evaluation import RecallTable, evidence_recall, recall_scorable
from tmem_core.schema import Gold


def test_recall_is_the_share_of_gold_ids_selected() -> None:
    gold = Gold("q", "a", evidence_ids=("m1", "m2", "m3"))
    assert evidence_recall(["m1", "m9"], gold) == pytest.approx(1 / 3)
    assert evidence_recall(["m3", "m2", "m1", "m1"], gold) == 1.0
    assert evidence_recall([], gold) == 0.0
    with pytest.raises(ValueError):
        evidence_recall(["m1"], Gold("q", "a"))


def test_only_questions_with_evidence_and_no_abstention_are_scored() -> None:
    assert recall_scorable(Gold("q", "a", evidence_ids=("m1",)))
    assert not recall_scorable(Gold("q", "a"))
    assert not recall_scorable(Gold("q", None, evidence_ids=("m1",), answer_kind="abstention"))


def test_table_means_overall_and_by_category() -> None:
    table = RecallTable()
    # hand example: q1 (temporal) 1/2, q2 (temporal) 1, q3 (multi-hop) 0 at k=5
    for category, value in (("temporal", 0.5), ("temporal", 1.0), ("multi-hop", 0.0)):
        table.add("bm25", 5, category, value)
    assert table.overall() == {"bm25": {5: pytest.approx(0.5)}}
    assert table.by_category()["bm25"][5] == {"multi-hop": 0.0, "temporal": 0.75}
    payload = table.to_json()
    assert payload["bm25"] == {"5": 0.5}
    assert payload["by_category"] == {"bm25": {"5": {"multi-hop": 0.0, "temporal": 0.75}}}
    assert payload["questions"] == {"multi-hop": 1, "temporal": 2}
