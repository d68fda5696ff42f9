"""Evidence groups: a question's candidate units as groups of interchangeable units (paper
A.4: audited alternatives count only when they independently establish the same claim); a
group is recalled when any of its members is (`evaluation.evidence_recall`).

The rule: two units of one question establish the same claim when they are of the same kind
(answer-bearing or anchor; a unit the filter did not keep, audited, counts as answer-bearing)
and either
- hold the same non-empty set of the reference's content words (the gold answer's for an
  answer-bearing unit, the question's for an anchor): the same fact restated, or
- share at least `SAME_TEXT` of their own content words (Jaccard): the same message restated
  (a paraphrase that keeps the answer's words, or a near copy).
Groups are the connected components of that relation over a question's candidate units (every
unit not rejected outright: accepted ones and those a person audits), so a group's key is
fixed before any decision; its members are those finally accepted. A person may decide a
whole group at once (`record_decision` with its key); a unit's own decision overrides it.

Redundancy is capped: a question requires at most `max_groups` groups, the ones whose best
member is most confident (then best ranked in reverse retrieval); the others are kept in the
record as capped alternatives, not required.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from tmem_core import DataError
from tmem_core.annotation._units import (
    LOW_CONFIDENCE_FILE,
    Unit,
    read_audit,
    read_units,
    write_audit,
)
from tmem_core.retrieval import lexical_tokens

Decision = Literal["accept", "reject"]

SAME_TEXT = 0.6
MAX_GROUPS = 4


@dataclass(frozen=True)
class Group:
    """Interchangeable units of one question: what establishes one claim."""

    key: str  # "<qid>|group-<n>", n from 1 by the best member's reverse-retrieval rank
    kind: str  # "answer" or "anchor"
    units: tuple[Unit, ...]  # best ranked first

    @property
    def qid(self) -> str:
        return self.units[0].qid

    @property
    def claim(self) -> tuple[str, ...]:
        """The reference words its members hold (the largest set among them)."""
        widest = max((_claim(u) for u in self.units), key=len)
        return tuple(sorted(widest))

    def best(self) -> tuple[float, int]:
        """Sort key: most confident member first, then best rank."""
        return (-max(u.confidence for u in self.units), min(u.rank for u in self.units))


def unit_kind(unit: Unit) -> str:
    return unit.kind or "answer"


def candidate_groups(units: Iterable[Unit]) -> list[Group]:
    """The groups of every question's candidate units (status accepted or audit)."""
    by_question: dict[str, list[Unit]] = {}
    for u in units:
        if u.status != "rejected":
            by_question.setdefault(u.qid, []).append(u)
    return [g for members in by_question.values() for g in _components(members)]


def required(groups: Sequence[Group], accepted: Iterable[Unit],
             max_groups: int = MAX_GROUPS) -> tuple[list[Group], list[Group]]:
    """The groups restricted to their `accepted` members, empty ones gone: the required
    ones (at most `max_groups` per question, best first) and the capped ones."""
    keep = {u.key for u in accepted}
    kept = [Group(g.key, g.kind, tuple(u for u in g.units if u.key in keep)) for g in groups]
    by_question: dict[str, list[Group]] = {}
    for g in kept:
        if g.units:
            by_question.setdefault(g.qid, []).append(g)
    chosen: list[Group] = []
    capped: list[Group] = []
    for members in by_question.values():
        ranked = sorted(members, key=Group.best)
        chosen += ranked[:max_groups]
        capped += ranked[max_groups:]
    return chosen, capped


def expand_decisions(groups: Iterable[Group], decisions: Mapping[str, Mapping[str, str]]
                     ) -> dict[str, Mapping[str, str]]:
    """Decisions by unit key: a group's decision given to each of its audited members, a
    unit's own decision over it."""
    out: dict[str, Mapping[str, str]] = {}
    keys = set()
    for g in groups:
        keys.add(g.key)
        if g.key in decisions:
            out.update({u.key: decisions[g.key] for u in g.units if u.status == "audit"})
    out.update({k: v for k, v in decisions.items() if k not in keys})
    return out


def record_decision(directory: Path, key: str, decision: Decision
                    ) -> dict[str, dict[str, str]]:
    """Write one decision on a low-confidence unit, or on a group with one, into the audit
    file (atomically)."""
    audited = {u.key for u in read_units(directory, LOW_CONFIDENCE_FILE)}
    groups = {g.key for g in candidate_groups(read_units(directory))
              if any(u.key in audited for u in g.units)}
    if key not in audited | groups:
        raise DataError(f"no low-confidence unit or group {key!r}", file=str(directory))
    decisions = read_audit(directory)
    decisions[key] = {"decision": decision, "at": datetime.now(UTC).isoformat()}
    write_audit(directory, decisions)
    return decisions


def _components(units: Sequence[Unit]) -> list[Group]:
    """Connected components of the same-claim relation, numbered by their best rank."""
    parent = list(range(len(units)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b in itertools.combinations(range(len(units)), 2):
        if same_claim(units[a], units[b]):
            parent[root(b)] = root(a)
    members: dict[int, list[Unit]] = {}
    for k, u in enumerate(units):
        members.setdefault(root(k), []).append(u)
    ordered = sorted((sorted(m, key=lambda u: u.rank) for m in members.values()),
                     key=lambda m: m[0].rank)
    return [Group(f"{m[0].qid}|group-{n}", unit_kind(m[0]), tuple(m))
            for n, m in enumerate(ordered, 1)]


def same_claim(a: Unit, b: Unit) -> bool:
    """The rule of the module doc."""
    if unit_kind(a) != unit_kind(b):
        return False
    claim = _claim(a)
    if claim and claim == _claim(b):
        return True
    words_a, words_b = set(lexical_tokens(a.text)), set(lexical_tokens(b.text))
    union = words_a | words_b
    return bool(union) and len(words_a & words_b) / len(union) >= SAME_TEXT


def _claim(unit: Unit) -> frozenset[str]:
    reference = unit.question if unit_kind(unit) == "anchor" else unit.answer
    return frozenset(lexical_tokens(reference)) & frozenset(lexical_tokens(unit.text))
