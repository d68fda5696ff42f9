"""The accepted units as a new prepared variant of the benchmark (the original is never
changed), and the figures against a reference annotation when the base carries one.

In the variant every annotated question's gold evidence is its required evidence groups
(`_groups.py`: accepted units of one claim form one group, any member recalls it; at most
`max_groups` per question): `evidence_ids` holds their members in conversation order and
`gold_meta` the groups themselves (`evidence_groups`, what recall reads), the units by kind
and the groups with their keys and claims, capped ones apart (`annotation`), beside the
base's own evidence ids (`base_evidence_ids`). A unit a person accepted against a NONE or a
failed label counts as answer-bearing. Messages, other questions and every other field are
the base's. Its manifest keeps the base's and adds
`annotation`: where the base came from (its source and a digest of its tables), the settings,
the filter's backbone, prompt and calls, the unit counts and the audit that was applied.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tmem_core import DataError
from tmem_core.annotation._annotate import Retriever, annotatable, reverse_retrieval
from tmem_core.annotation._groups import (
    MAX_GROUPS,
    SAME_TEXT,
    Group,
    candidate_groups,
    expand_decisions,
    required,
    unit_kind,
)
from tmem_core.annotation._units import AUDIT_FILE, Unit, final_status
from tmem_core.benchmarks import PreparedBenchmark, tables_sha256
from tmem_core.evaluation import GROUPS_KEY
from tmem_core.retrieval import IndexStore
from tmem_core.schema import (
    Gold,
    Question,
    gold_from_table,
    questions_from_table,
    questions_to_table,
    validate_tables,
)

COVERAGE_DEPTHS = (10, 20, 50, 100)
MANIFEST_KEY = "annotation"


def annotated_variant(base: PreparedBenchmark, units: Sequence[Unit],
                      decisions: Mapping[str, Mapping[str, str]], settings: Mapping[str, Any],
                      audit_file: Path | None = None) -> PreparedBenchmark:
    """The base with each annotated question's evidence replaced by its required groups."""
    if MANIFEST_KEY in base.manifest:
        raise DataError(f"{base.name}: already an annotated variant; annotate its base")
    gold = gold_from_table(base.questions)
    groups = candidate_groups(units)
    decided = expand_decisions(groups, decisions)
    statuses = [final_status(u, decided) for u in units]
    chosen, capped = required(groups, [u for u, s in zip(units, statuses, strict=True)
                                       if s == "accepted"],
                              int(settings.get("max_groups", MAX_GROUPS)))
    annotated = {u.qid for u in units}
    order = {m: k for k, m in enumerate(base.messages.column("msg_id").to_pylist())}
    items = [(q, _evidence(gold[q.qid], [g for g in chosen if g.qid == q.qid],
                           [g for g in capped if g.qid == q.qid], order)
              if q.qid in annotated else gold[q.qid])
             for q in questions_from_table(base.questions)]
    table = questions_to_table(items)
    validate_tables(base.messages, table, source=f"{base.name} annotated")
    manifest = {**base.manifest, MANIFEST_KEY: {
        "base": {"benchmark": base.name, "source": base.manifest.get("source"),
                 "sha256": tables_sha256(base.messages, base.questions)},
        **settings,
        "units": {s: statuses.count(s) for s in ("accepted", "audit", "rejected")},
        "groups": {"required": len(chosen), "capped": len(capped),
                   "required_units": sum(len(g.units) for g in chosen),
                   "max_groups": int(settings.get("max_groups", MAX_GROUPS)),
                   "rule": f"same kind, and the same reference words or at least "
                           f"{SAME_TEXT:.0%} of their words in common"},
        "questions_annotated": len(annotated),
        "questions_with_units": len({g.qid for g in chosen}),
        "audit": {"file": AUDIT_FILE if audit_file else None,
                  "sha256": _file_digest(audit_file) if audit_file else None,
                  "decided": sum(u.status == "audit" and u.key in decided for u in units),
                  "group_decisions": sum(g.key in decisions for g in groups),
                  "undecided": statuses.count("audit")}}}
    return PreparedBenchmark(base.name, base.messages, table, manifest)


def _evidence(gold: Gold, chosen: Sequence[Group], capped: Sequence[Group],
              order: Mapping[str, int]) -> Gold:
    def ids(group: Group) -> list[str]:
        return sorted((u.msg_id for u in group.units), key=order.__getitem__)

    groups = sorted(chosen, key=lambda g: order[ids(g)[0]])
    meta = json.loads(gold.gold_meta) if gold.gold_meta else {}
    meta[GROUPS_KEY] = [ids(g) for g in groups]
    meta[MANIFEST_KEY] = {
        **{kind: sorted((u.msg_id for g in groups for u in g.units if unit_kind(u) == kind),
                        key=order.__getitem__) for kind in ("answer", "anchor")},
        "groups": [{"key": g.key, "kind": g.kind, "members": ids(g), "claim": list(g.claim)}
                   for g in groups],
        "capped": [{"key": g.key, "kind": g.kind, "members": ids(g)} for g in capped]}
    meta["base_evidence_ids"] = list(gold.evidence_ids)
    evidence = sorted((i for g in groups for i in ids(g)), key=order.__getitem__)
    return dataclasses.replace(gold, evidence_ids=tuple(dict.fromkeys(evidence)),
                               gold_meta=json.dumps(meta, sort_keys=True))


def _file_digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def coverage(store: IndexStore, questions: Iterable[Question], gold: Mapping[str, Gold],
             depths: Sequence[int] = COVERAGE_DEPTHS, kind: Retriever = "pooled"
             ) -> dict[str, float]:
    """Mean share of each question's reference evidence among its reverse-retrieval
    candidates (by `kind`), at each depth (questions with reference evidence only)."""
    shares: dict[int, list[float]] = {d: [] for d in depths}
    for q in annotatable(list(questions), dict(gold)):
        reference = set(gold[q.qid].evidence_ids)
        if not reference:
            continue
        ranked = [m.msg_id for m in reverse_retrieval(store, q, gold[q.qid].answer or "",
                                                      max(depths), kind)]
        for d in depths:
            shares[d].append(len(reference & set(ranked[:d])) / len(reference))
    return {str(d): statistics.mean(v) for d, v in shares.items() if v}


def precision_recall(units: Sequence[Unit], decisions: Mapping[str, Mapping[str, str]],
                     gold: Mapping[str, Gold]) -> dict[str, float]:
    """Accepted units against the reference evidence, pooled over annotated questions that
    have reference evidence: precision (accepted that are reference), recall (reference
    accepted)."""
    questions = {u.qid for u in units if gold[u.qid].evidence_ids}
    decided = expand_decisions(candidate_groups(units), decisions)
    accepted = {(u.qid, u.msg_id) for u in units
                if u.qid in questions and final_status(u, decided) == "accepted"}
    reference = {(q, e) for q in questions for e in gold[q].evidence_ids}
    hits = len(accepted & reference)
    return {"questions": len(questions), "accepted": len(accepted), "reference": len(reference),
            "precision": hits / len(accepted) if accepted else 0.0,
            "recall": hits / len(reference) if reference else 0.0}

