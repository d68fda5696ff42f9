"""A sweep's results on disk: the layout, the append-only stores, their readers, and the
definitions that the run summaries and the reports share (`overall_accuracy`).

Below both the pipeline (which writes) and the reports (which read): reading a sweep imports
neither Ray nor any method.
"""

from tmem_core.results._accuracy import (
    ALL_JUDGES,
    OVERALL,
    mean_exact_match,
    overall_accuracy,
    score_accuracy,
    with_overall,
)
from tmem_core.results._calibration import (
    RELIABLE_RATE,
    JudgeCalibration,
    calibration,
    judge_calibrations,
)
from tmem_core.results._degradation import degradation_counts, degraded
from tmem_core.results._layout import (
    CALIBRATION,
    CALIBRATION_STAGE,
    CALLS,
    CONTRACT_FILE,
    MEMORY_STAGE,
    RECORD_STAGES,
    STAGE_SCHEMAS,
    STORES,
    SWEEP_FILE,
    calibration_store,
    calls_store,
    calls_window,
    conversation_of,
    memory_qid,
    run_dirs,
    stage_store,
)
from tmem_core.results._store import StageStore, failures_of, latest_of
from tmem_core.results._sweep import SweepResults, read_sweep

__all__ = [
    "ALL_JUDGES",
    "CALIBRATION",
    "CALIBRATION_STAGE",
    "CALLS",
    "CONTRACT_FILE",
    "MEMORY_STAGE",
    "OVERALL",
    "RECORD_STAGES",
    "RELIABLE_RATE",
    "STAGE_SCHEMAS",
    "STORES",
    "SWEEP_FILE",
    "JudgeCalibration",
    "StageStore",
    "SweepResults",
    "calibration",
    "calibration_store",
    "calls_store",
    "calls_window",
    "conversation_of",
    "degradation_counts",
    "degraded",
    "failures_of",
    "judge_calibrations",
    "latest_of",
    "mean_exact_match",
    "memory_qid",
    "overall_accuracy",
    "read_sweep",
    "run_dirs",
    "score_accuracy",
    "stage_store",
    "with_overall",
]
