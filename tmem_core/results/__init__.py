"""A sweep's results on disk: the layout, the append-only stores, their readers, and the
definitions that the run summaries and the reports share (`overall_accuracy`, `run_count`).

Below both the pipeline (which writes) and the reports (which read): reading a sweep imports
neither Ray nor any method.
"""

from tmem_core.results._accuracy import SCOPE, with_overall
from tmem_core.results._layout import (
    MEMORY_STAGE,
    RECORD_STAGES,
    calls_store,
    calls_window,
    memory_qid,
    run_dirs,
    stage_store,
)

__all__ = [
    "MEMORY_STAGE",
    "RECORD_STAGES",
    "SCOPE",
    "calls_store",
    "calls_window",
    "memory_qid",
    "run_dirs",
    "stage_store",
    "with_overall",
]
