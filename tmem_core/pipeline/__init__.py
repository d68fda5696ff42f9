"""Distributed evaluation on Ray: sweep configs, stages as actor pools, append-only results.

Nothing below this package imports Ray; methods, retrieval and the LLM layer are plain
Python that the stages here wrap.
"""

from tmem_core.pipeline._config import (
    Allowed,
    BenchmarkConfig,
    ConfigError,
    Resources,
    RunSpec,
    SweepConfig,
    load_sweep,
    parse_sweep,
    registered,
)
from tmem_core.pipeline._contract import CONTRACT_FILE, Contract
from tmem_core.pipeline._runner import (
    RunPlan,
    RunSummary,
    finish_run,
    init_ray,
    plan_run,
    prepare_benchmark,
    run_sweep,
    select_questions,
)
from tmem_core.pipeline._stages import STAGES, StageJob, calls_store
from tmem_core.pipeline._store import StageStore, failures_of, latest_of

__all__ = [
    "CONTRACT_FILE",
    "STAGES",
    "Allowed",
    "BenchmarkConfig",
    "ConfigError",
    "Contract",
    "Resources",
    "RunPlan",
    "RunSpec",
    "RunSummary",
    "StageJob",
    "StageStore",
    "SweepConfig",
    "calls_store",
    "failures_of",
    "finish_run",
    "init_ray",
    "latest_of",
    "load_sweep",
    "parse_sweep",
    "plan_run",
    "prepare_benchmark",
    "registered",
    "run_sweep",
    "select_questions",
]
