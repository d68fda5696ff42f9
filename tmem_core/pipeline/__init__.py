"""Distributed evaluation on Ray: sweep configs, stages as actor pools, append-only results.

Nothing below this package imports Ray; methods, retrieval and the LLM layer are plain
Python that the stages here wrap.
"""

from tmem_core._typed import ConfigError
from tmem_core.pipeline._actors import STAGES
from tmem_core.pipeline._config import (
    Allowed,
    BenchmarkConfig,
    Resources,
    RunSpec,
    SweepConfig,
    load_sweep,
    parse_sweep,
    registered,
)
from tmem_core.pipeline._contract import Contract
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
from tmem_core.pipeline._stage import StageJob
from tmem_core.pipeline._watch import STATUS_ENV, supervise

__all__ = [
    "STAGES",
    "STATUS_ENV",
    "Allowed",
    "BenchmarkConfig",
    "ConfigError",
    "Contract",
    "Resources",
    "RunPlan",
    "RunSpec",
    "RunSummary",
    "StageJob",
    "SweepConfig",
    "finish_run",
    "init_ray",
    "load_sweep",
    "parse_sweep",
    "plan_run",
    "prepare_benchmark",
    "registered",
    "run_sweep",
    "select_questions",
    "supervise",
]
