"""A sweep's results on disk: the layout, the append-only stores, their readers, and the
definitions that the run summaries and the reports share (`overall_accuracy`, `run_count`).

Below both the pipeline (which writes) and the reports (which read): reading a sweep imports
neither Ray nor any method.
"""

from tmem_core.results._accuracy import (
    ALL_JUDGES,
    CORRECT_AT,
    OVERALL,
    SCOPE,
    judge_scopes,
    mean_exact_match,
    overall_accuracy,
    score_accuracy,
    with_overall,
)
from tmem_core.results._attempts import Attempt, contract_attempts, mixed
from tmem_core.results._calibration import (
    RELIABLE_RATE,
    UNRELIABLE,
    JudgeCalibration,
    calibration,
    judge_calibrations,
    judges_status,
)
from tmem_core.results._count import SUMMED, call_totals, counted_calls, run_count
from tmem_core.results._degradation import degradation_counts, degraded
from tmem_core.results._evidence import SHOWN, UNTRACEABLE, evidence_basis
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
    remove_leftovers,
    run_dirs,
    stage_store,
    write_atomic,
)
from tmem_core.results._lease import LEASE_FILE, Lease, LeaseHeld
from tmem_core.results._store import (
    StageStore,
    failures_of,
    latest_of,
    read_parts,
    report_unreadable,
)
from tmem_core.results._sweep import SweepResults, read_sweep

__all__ = [
    "ALL_JUDGES",
    "CALIBRATION",
    "CALIBRATION_STAGE",
    "CALLS",
    "CONTRACT_FILE",
    "CORRECT_AT",
    "LEASE_FILE",
    "MEMORY_STAGE",
    "OVERALL",
    "RECORD_STAGES",
    "RELIABLE_RATE",
    "SCOPE",
    "SHOWN",
    "STAGE_SCHEMAS",
    "STORES",
    "SUMMED",
    "SWEEP_FILE",
    "UNRELIABLE",
    "UNTRACEABLE",
    "Attempt",
    "JudgeCalibration",
    "Lease",
    "LeaseHeld",
    "StageStore",
    "SweepResults",
    "calibration",
    "calibration_store",
    "call_totals",
    "calls_store",
    "calls_window",
    "contract_attempts",
    "conversation_of",
    "counted_calls",
    "degradation_counts",
    "degraded",
    "evidence_basis",
    "failures_of",
    "judge_calibrations",
    "judge_scopes",
    "judges_status",
    "latest_of",
    "mean_exact_match",
    "memory_qid",
    "mixed",
    "overall_accuracy",
    "read_parts",
    "read_sweep",
    "remove_leftovers",
    "report_unreadable",
    "run_count",
    "run_dirs",
    "score_accuracy",
    "stage_store",
    "with_overall",
    "write_atomic",
]
