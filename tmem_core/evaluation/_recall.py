"""Evidence recall@k (the papers' Exp-2): the share of a question's gold evidence selected."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import fmean

from tmem_core.schema import Gold


def recall_scorable(gold: Gold) -> bool:
    """Questions with gold evidence count; abstentions and evidence-less ones do not."""
    return bool(gold.evidence_ids) and gold.answer_kind != "abstention"


def evidence_recall(selected: Iterable[str], gold: Gold) -> float:
    """Fraction of the gold evidence ids found among `selected`."""
    wanted = set(gold.evidence_ids)
    if not wanted:
        raise ValueError(f"question {gold.qid} has no gold evidence")
    return len(wanted & set(selected)) / len(wanted)


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
