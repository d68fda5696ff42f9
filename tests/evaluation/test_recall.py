"""Evidence recall: hand-computed values and the aggregate table."""

from __future__ import annotations

import json

import pytest

from tmem_core import DataError
from tmem_core.evaluation import RecallTable, evidence_recall, recall_scorable
from tmem_core.evaluation._recall import evidence_groups
from tmem_core.schema import Gold


def test_recall_is_the_share_of_gold_ids_selected() -> None:
    gold = Gold("q", "a", evidence_ids=("m1", "m2", "m3"))
    assert evidence_recall(["m1", "m9"], gold) == pytest.approx(1 / 3)
    assert evidence_recall(["m3", "m2", "m1", "m1"], gold) == 1.0
    assert evidence_recall([], gold) == 0.0
    with pytest.raises(ValueError):
        evidence_recall(["m1"], Gold("q", "a"))


def test_recall_reads_groups_any_member_recalls_its_group() -> None:
    groups = [["m1", "m4"], ["m2"]]  # m1 and m4 establish the same claim
    gold = Gold("q", "a", evidence_ids=("m1", "m2", "m4"),
                gold_meta=json.dumps({"evidence_groups": groups, "other": 1}))
    assert evidence_groups(gold) == (("m1", "m4"), ("m2",))
    assert evidence_recall(["m4"], gold) == evidence_recall(["m1"], gold) == 0.5
    assert evidence_recall(["m1", "m4"], gold) == 0.5  # one claim, however many restatements
    assert evidence_recall(["m4", "m2"], gold) == 1.0


def test_evidence_without_groups_counts_each_id_as_its_own_group() -> None:
    """Stored gold in the flat format (annotated before groups existed) still loads."""
    flat = Gold("q", "a", evidence_ids=("m1", "m2"),
                gold_meta=json.dumps({"annotation": {"answer": ["m1", "m2"], "anchor": []}}))
    assert evidence_groups(flat) == (("m1",), ("m2",))
    assert evidence_recall(["m2"], flat) == 0.5


@pytest.mark.parametrize(("groups", "message"), [
    ([["m1"]], "exactly the evidence ids"), ([["m1"], []], "non-empty lists"),
    ("m1 m2", "non-empty lists"), ([["m1", "m2", "m9"]], "exactly the evidence ids")])
def test_malformed_groups_fail_with_the_field_named(groups: object, message: str) -> None:
    gold = Gold("q7", "a", evidence_ids=("m1", "m2"),
                gold_meta=json.dumps({"evidence_groups": groups}))
    with pytest.raises(DataError, match=message) as caught:
        evidence_recall(["m1"], gold)
    assert "record q7" in str(caught.value) and "gold_meta.evidence_groups" in str(caught.value)


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
