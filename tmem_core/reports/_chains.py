"""Exp-5's two context measures besides accuracy (paper §5.6), per run, over the questions
that carry a revision chain (their evaluation-only `gold_meta`, `benchmarks/_revisions.py`):

- complete-chain recovery: the context holds the whole state trajectory, the original state's
  evidence, every revision and the rollback;
- revision-only context: it holds a revision but not the rollback (the superseded value
  without what undid it).
"""

from __future__ import annotations

import polars as pl

from tmem_core.benchmarks._revisions import chain_of
from tmem_core.results import SweepResults

CHAINS_SCHEMA = pl.Schema({"run_id": pl.String, "questions": pl.Int64,
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
    rows = [{"run_id": run_id, "questions": len(marks),
             "complete_chain": sum(c for c, _ in marks) / len(marks),
             "revision_only": sum(r for _, r in marks) / len(marks)}
            for run_id, marks in sorted(tallies.items())]
    return pl.DataFrame(rows, schema=CHAINS_SCHEMA)
