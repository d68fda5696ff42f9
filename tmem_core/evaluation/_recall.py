"""Evidence recall@k (the papers' Exp-2): the share of a question's gold evidence selected.

Gold evidence is a list of groups of interchangeable messages (paper A.4: alternatives that
independently establish the same claim; finding one suffices): a group is recalled when any
of its members is selected. A benchmark's gold carries its groups in `gold_meta`
(`evidence_groups`, a list of lists of evidence ids: the annotated variants of
`jobs.annotate`); evidence without groups counts each id as a group of its own.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import fmean

from tmem_core import DataError
from tmem_core.schema import Gold

GROUPS_KEY = "evidence_groups"
Groups = tuple[tuple[str, ...], ...]


def recall_scorable(gold: Gold) -> bool:
    """Questions with gold evidence count; abstentions and evidence-less ones do not."""
    return bool(gold.evidence_ids) and gold.answer_kind != "abstention"


def evidence_recall(selected: Iterable[str], gold: Gold) -> float:
    """Fraction of the gold evidence groups with a member among `selected`."""
    groups = evidence_groups(gold)
    if not groups:
        raise ValueError(f"question {gold.qid} has no gold evidence")
    chosen = set(selected)
    return sum(not chosen.isdisjoint(g) for g in groups) / len(groups)


def evidence_groups(gold: Gold) -> Groups:
    """The question's evidence groups: its `gold_meta` groups, else one per evidence id."""
    return _groups(gold.qid, gold.gold_meta, gold.evidence_ids)


@lru_cache(maxsize=65536)
def _groups(qid: str, meta: str | None, ids: tuple[str, ...]) -> Groups:
    given = json.loads(meta).get(GROUPS_KEY) if meta else None
    if given is None:
        return tuple((i,) for i in ids)
    if not (isinstance(given, list) and all(
            isinstance(g, list) and g and all(isinstance(i, str) for i in g) for g in given)):
        raise DataError("evidence groups must be a list of non-empty lists of message ids",
                        record=qid, field=f"gold_meta.{GROUPS_KEY}")
    groups = tuple(tuple(g) for g in given)
    if {i for g in groups for i in g} != set(ids):
        raise DataError("evidence groups must hold exactly the evidence ids", record=qid,
                        field=f"gold_meta.{GROUPS_KEY}")
    return groups


@dataclass
class RecallTable:
    """Per-question recall values by (method, k, category); means computed on demand."""

    values: dict[tuple[str, int, str], list[float]] = field(
        default_factory=lambda: defaultdict(list))

    def add(self, method: str, k: int, category: str, recall: float) -> None:
        self.values[(method, k, category)].append(recall)

    def overall(self) -> dict[str, dict[int, float]]:
        """method -> k -> mean recall over all scorable questions."""
        pooled: dict[tuple[str, int], list[float]] = defaultdict(list)
        for (method, k, _), vs in self.values.items():
            pooled[(method, k)] += vs
        out: dict[str, dict[int, float]] = defaultdict(dict)
        for (method, k), vs in sorted(pooled.items()):
            out[method][k] = fmean(vs)
        return dict(out)

    def by_category(self) -> dict[str, dict[int, dict[str, float]]]:
        """method -> k -> category -> mean recall."""
        out: dict[str, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        for (method, k, category), vs in sorted(self.values.items()):
            out[method][k][category] = fmean(vs)
        return {m: dict(ks) for m, ks in out.items()}

    def to_json(self) -> dict[str, object]:
        """`{method: {k: recall}}` plus `by_category` and `questions` per category."""
        result: dict[str, object] = {
            m: {str(k): round(v, 4) for k, v in ks.items()} for m, ks in self.overall().items()}
        result["by_category"] = {
            m: {str(k): {c: round(v, 4) for c, v in cs.items()} for k, cs in ks.items()}
            for m, ks in self.by_category().items()}
        result["questions"] = self.question_counts()
        return result

    def question_counts(self) -> dict[str, int]:
        """Scored questions per category (from the first method and k)."""
        if not self.values:
            return {}
        method, k, _ = next(iter(self.values))
        return {c: len(vs) for (m, kk, c), vs in sorted(self.values.items())
                if (m, kk) == (method, k)}
