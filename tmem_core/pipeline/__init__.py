"""Distributed evaluation on Ray: sweep configs, stages as actor pools, append-only results.

Nothing below this package imports Ray; methods, retrieval and the LLM layer are plain
Python that the stages here wrap.
"""

from tmem_core.pipeline._actors import STAGES
from tmem_core.pipeline._capacity import check_sweep_gpus
from tmem_core.pipeline._config import BenchmarkConfig, RunSpec, SweepConfig
from tmem_core.pipeline._config_load import check_sources, load_sweep, parse_sweep, registered
from tmem_core.pipeline._contract import Contract
from tmem_core.pipeline._plan import plan_sweep
from tmem_core.pipeline._ray_start import init_ray
from tmem_core.pipeline._runner import run_sweep
from tmem_core.pipeline._watch import STATUS_ENV, supervise

__all__ = [
    "STAGES",
    "STATUS_ENV",
    "BenchmarkConfig",
    "Contract",
    "RunSpec",
    "SweepConfig",
    "check_sources",
    "check_sweep_gpus",
    "init_ray",
    "load_sweep",
    "parse_sweep",
    "plan_sweep",
    "registered",
    "run_sweep",
    "supervise",
]
