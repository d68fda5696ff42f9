"""The accepted units as a new prepared variant of the benchmark (the original is never
changed), and the figures against a reference annotation when the base carries one.

In the variant every annotated question's gold evidence is its accepted units (answer-bearing
and anchor units alike, in conversation order; one a person accepted against a NONE or a
failed label counts as answer-bearing), listed by kind in its `gold_meta`
(`annotation`), beside the base's own evidence ids (`base_evidence_ids`); messages, other
questions and every other field are the base's. Its manifest keeps the base's and adds
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

from tmem_core.annotation._annotate import annotatable, reverse_retrieval
from tmem_core.annotation._units import AUDIT_FILE, Unit, final_status
from tmem_core.benchmarks import PreparedBenchmark, tables_sha256
from tmem_core.retrieval import IndexStore
from tmem_core.schema import (
    DataError,
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
    """The base with each annotated question's evidence replaced by its accepted units."""
    if MANIFEST_KEY in base.manifest:
        raise DataError(f"{base.name}: already an annotated variant; annotate its base")
    gold = gold_from_table(base.questions)
    accepted: dict[str, list[Unit]] = {}
    for u in units:
        if final_status(u, decisions) == "accepted":
            accepted.setdefault(u.qid, []).append(u)
    annotated = {u.qid for u in units}
    questions = questions_from_table(base.questions)
    items = [(q, _evidence(gold[q.qid], accepted.get(q.qid, []), base) if q.qid in annotated
              else gold[q.qid]) for q in questions]
    table = questions_to_table(items)
    validate_tables(base.messages, table, source=f"{base.name} annotated")
    statuses = [final_status(u, decisions) for u in units]
    manifest = {**base.manifest, MANIFEST_KEY: {
        "base": {"benchmark": base.name, "source": base.manifest.get("source"),
                 "sha256": tables_sha256(base.messages, base.questions)},
        **settings,
        "units": {s: statuses.count(s) for s in ("accepted", "audit", "rejected")},
        "questions_annotated": len(annotated),
        "questions_with_units": len(accepted),
        "audit": {"file": AUDIT_FILE if audit_file else None,
                  "sha256": _file_digest(audit_file) if audit_file else None,
                  "decided": sum(u.status == "audit" and u.key in decisions for u in units),
                  "undecided": statuses.count("audit")}}}
    return PreparedBenchmark(base.name, base.messages, table, manifest)


def _evidence(gold: Gold, units: Sequence[Unit], base: PreparedBenchmark) -> Gold:
    order = {m: k for k, m in enumerate(base.messages.column("msg_id").to_pylist())}
    ordered = sorted(units, key=lambda u: order[u.msg_id])
    meta = json.loads(gold.gold_meta) if gold.gold_meta else {}
    meta[MANIFEST_KEY] = {kind: [u.msg_id for u in ordered if (u.kind or "answer") == kind]
                          for kind in ("answer", "anchor")}
    meta["base_evidence_ids"] = list(gold.evidence_ids)
    return dataclasses.replace(gold, evidence_ids=tuple(dict.fromkeys(u.msg_id for u in ordered)),
                               gold_meta=json.dumps(meta, sort_keys=True))


def _file_digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def coverage(store: IndexStore, questions: Iterable[Question], gold: Mapping[str, Gold],
             depths: Sequence[int] = COVERAGE_DEPTHS) -> dict[str, float]:
    """Mean share of each question's reference evidence among its reverse-retrieval
    candidates, at each depth (questions with reference evidence only)."""
    shares: dict[int, list[float]] = {d: [] for d in depths}
    for q in annotatable(list(questions), dict(gold)):
        reference = set(gold[q.qid].evidence_ids)
        if not reference:
            continue
        ranked = [m.msg_id for m in reverse_retrieval(store, q, gold[q.qid].answer or "",
                                                      max(depths))]
        for d in depths:
            shares[d].append(len(reference & set(ranked[:d])) / len(reference))
    return {str(d): statistics.mean(v) for d, v in shares.items() if v}


def precision_recall(units: Sequence[Unit], decisions: Mapping[str, Mapping[str, str]],
                     gold: Mapping[str, Gold]) -> dict[str, float]:
    """Accepted units against the reference evidence, pooled over annotated questions that
    have reference evidence: precision (accepted that are reference), recall (reference
    accepted)."""
    questions = {u.qid for u in units if gold[u.qid].evidence_ids}
    accepted = {(u.qid, u.msg_id) for u in units
                if u.qid in questions and final_status(u, decisions) == "accepted"}
    reference = {(q, e) for q in questions for e in gold[q].evidence_ids}
    hits = len(accepted & reference)
    return {"questions": len(questions), "accepted": len(accepted), "reference": len(reference),
            "precision": hits / len(accepted) if accepted else 0.0,
            "recall": hits / len(reference) if reference else 0.0}

