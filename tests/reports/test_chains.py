"""Exp-5's two context measures in the report: complete-chain recovery and revision-only
contexts, per run, from hand-written runs whose every context is known."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tests.reports.conftest import DATA, QUESTIONS, locomo_run, write_locomo_data, write_run
from tmem_core.benchmarks import read_prepared, write_prepared
from tmem_core.reports import read_sweep, summarise, write_report
from tmem_core.schema import gold_from_table, questions_from_table, questions_to_table

# q1's chain: original m1, revisions m2, m3, rollback m4; q2's: original m5, revision m6,
# rollback m7. Contexts: full chain / revision without rollback / rollback only.
CHAINS = {"q1": {"original": ["m1"], "revisions": ["m2", "m3"], "rollback": "m4"},
          "q2": {"original": ["m5"], "revisions": ["m6"], "rollback": "m7"}}


def _with_chains(root: Path) -> None:
    data = root / "data" / DATA
    prepared = read_prepared(data)
    gold = gold_from_table(prepared.questions)
    items = [(q, dataclasses.replace(gold[q.qid], gold_meta=json.dumps(
        {"revision_chain": CHAINS[q.qid]}) if q.qid in CHAINS else None))
             for q in questions_from_table(prepared.questions)]
    manifest = {**prepared.manifest, "revision_chains": {"condition": 2,
                                                         "mean_injected_per_question": 2.5}}
    write_prepared(dataclasses.replace(prepared, questions=questions_to_table(items),
                                       manifest=manifest), data)


def test_complete_chains_and_revision_only_contexts_per_run(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    write_locomo_data(root)
    _with_chains(root)
    full, partial = (tuple(dataclasses.replace(q, context=contexts.get(q.qid, q.context))
                           for q in QUESTIONS)
                     for contexts in ({"q1": ("m1", "m2", "m3", "m4"), "q2": ("m5", "m7")},
                                      {"q1": ("m1", "m2"), "q2": ("m6", "m9")}))
    tmem, bm25 = locomo_run("s", method="tmem"), locomo_run("s", method="bm25")
    write_run(root, tmem, full)
    write_run(root, bm25, partial)
    chains = {r["run_id"]: r for r in summarise(read_sweep(root)).revision_chains.to_dicts()}
    facts = {"condition": 2, "injected_per_question": 2.5, "questions": 2}
    assert chains[tmem.run_id] == {"run_id": tmem.run_id, **facts,
                                   "complete_chain": 0.5, "revision_only": 0.0}
    assert chains[bm25.run_id] == {"run_id": bm25.run_id, **facts,
                                   "complete_chain": 0.0, "revision_only": 1.0}
    report = write_report(root, tmp_path / "out").markdown.read_text()
    section = report.split("## Revision chains (Exp-5)")[1].split("## ")[0]
    assert "complete_chain" in section and "revision_only" in section
