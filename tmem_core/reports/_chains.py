"""Exp-5's two context measures besides accuracy (paper §5.6), per run, over the questions
that carry a revision chain (their evaluation-only `gold_meta`, `benchmarks/_revisions.py`):

- complete-chain recovery: the context holds the whole state trajectory, the original state's
  evidence, every revision and the rollback;
- revision-only context: it holds a revision but not the rollback (the superseded value
  without what undid it).

Each run's row names its condition (1 to 3 revisions) and the mean number of messages its
benchmark injected per question, from the prepared benchmark's manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from tmem_core.benchmarks._revisions import MANIFEST_KEY, chain_of
from tmem_core.results._sweep import SweepResults

CHAINS_SCHEMA = pl.Schema({"run_id": pl.String, "condition": pl.Int64,
                           "injected_per_question": pl.Float64, "questions": pl.Int64,
                           "complete_chain": pl.Float64, "revision_only": pl.Float64})


def revision_chains(results: SweepResults) -> pl.DataFrame:
    """Per run with chain questions: how many had a context, and the two rates over them."""
    tallies: dict[str, list[tuple[bool, bool]]] = {}
    for run_id, qid, ids in results.records["construct"].select(
            "run_id", "qid", "context_ids").iter_rows():
        chain = chain_of(results.gold[run_id][qid])
        if chain is None:
            continue
        seen = set(ids or ())
        trajectory = {*chain["original"], *chain["revisions"], chain["rollback"]}
        revised = any(r in seen for r in chain["revisions"])
        tallies.setdefault(run_id, []).append((trajectory <= seen,
                                               revised and chain["rollback"] not in seen))
    data = dict(results.runs.select("run_id", "data_dir").iter_rows())
    facts = {run_id: chain_facts(data[run_id]) for run_id in tallies}
    rows = [{"run_id": run_id, "condition": facts[run_id].get("condition"),
             "injected_per_question": facts[run_id].get("mean_injected_per_question"),
             "questions": len(marks),
             "complete_chain": sum(c for c, _ in marks) / len(marks),
             "revision_only": sum(r for _, r in marks) / len(marks)}
            for run_id, marks in sorted(tallies.items())]
    return pl.DataFrame(rows, schema=CHAINS_SCHEMA)


def chain_facts(data_dir: str | None) -> dict[str, Any]:
    """The prepared benchmark's `revision_chains` manifest entry (condition, counts); {} for a
    benchmark without chains."""
    manifest = Path(data_dir or "") / "manifest.json"
    if not data_dir or not manifest.is_file():
        return {}
    facts = json.loads(manifest.read_text()).get(MANIFEST_KEY)
    return facts if isinstance(facts, dict) else {}
