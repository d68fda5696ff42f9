"""A sweep's results on disk: the layout, the append-only stores, their readers, and the
definitions that the run summaries and the reports share (`overall_accuracy`).

Below both the pipeline (which writes) and the reports (which read): reading a sweep imports
neither Ray nor any method.
"""

from tmem_core.results._accuracy import (
    ALL_JUDGES,
    OVERALL,
    overall_accuracy,
    score_accuracy,
    with_overall,
)
from tmem_core.results._layout import (
    CALLS,
    CALLS_STORE_SCHEMA,
    CONTRACT_FILE,
    RECORD_STAGES,
    STAGE_SCHEMAS,
    STORES,
    SWEEP_FILE,
    calls_store,
    run_dirs,
    stage_store,
)
from tmem_core.results._store import (
    RECORD_COLUMNS,
    StageStore,
    failures_of,
    latest_of,
    stage_schema,
)
from tmem_core.results._sweep import SweepResults, read_sweep

__all__ = [
    "ALL_JUDGES",
    "CALLS",
    "CALLS_STORE_SCHEMA",
    "CONTRACT_FILE",
    "OVERALL",
    "RECORD_COLUMNS",
    "RECORD_STAGES",
    "STAGE_SCHEMAS",
    "STORES",
    "SWEEP_FILE",
    "StageStore",
    "SweepResults",
    "calls_store",
    "failures_of",
    "latest_of",
    "overall_accuracy",
    "read_sweep",
    "run_dirs",
    "score_accuracy",
    "stage_schema",
    "stage_store",
    "with_overall",
]
