"""Dry run of a sweep: expected LLM calls, tokens, USD and wall time, before launching it.

    python -m jobs.plan jobs/configs/default.toml
    python -m jobs.plan jobs/configs/gpu_sweep.toml --replicas 4   # 2 x 4 x 2 GPUs: all 16
    python -m jobs.plan jobs/configs/tmem_paper/*_gpu.toml     # several: one plan each

A few questions of each run go through the real stages here, on simulated twins of the
backbones (nothing is sent to an engine); their calls, repeated to each run's size, flow
through the continuous-batching model of the simulated engine (`sim` backend) on the given
number of replicas per backbone. Times use each simulated backbone's own engine settings, an
embedded (llama.cpp) or vLLM-CPU backbone's pace measured on this machine and its own slots
(its engine's `pace` table overrides it), and the built-in `sim` engine's (GPU-like) for the
others; `--timing BACKBONE` times every call with that sim backbone's settings. A config that
states its GPU cluster (`resources.cluster_gpus`, `gpus_per_node`) is refused, with one
`error:` line, when the engine replicas do not fit it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jobs._cli import check_sweep_tokenizers, report_error, run_main
from tmem_core import ConfigError, TmemError, check_range
from tmem_core.llm import SimEngineConfig, load_backbones
from tmem_core.pipeline import check_sources, check_sweep_gpus, load_sweep, plan_sweep


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.plan", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", type=Path, nargs="+", metavar="config",
                        help="sweep config (TOML or YAML); with several, one plan each")
    parser.add_argument("--replicas", type=int, default=0,
                        help="engine replicas per backbone (default: the config's)")
    parser.add_argument("--sample", type=int, default=4, help="questions run per run")
    parser.add_argument("--timing", help="a sim backbone whose engine settings time all calls")
    args = parser.parse_args()
    check_range("--replicas", args.replicas, 0, key="--replicas")
    check_range("--sample", args.sample, key="--sample")
    status = 0
    for path in args.configs:
        if len(args.configs) > 1:
            print(f"== {path}", flush=True)
        try:
            lines = _plan(path, args)
        except TmemError as exc:  # a config, engines that do not fit its GPUs, or its data
            status = report_error(exc, str(path) if len(args.configs) > 1 else "")
            continue
        for line in lines:
            print(line, flush=True)
    return status


def _plan(path: Path, args: argparse.Namespace) -> list[str]:
    config = load_sweep(path, sources=False)  # the engines' fit needs no data
    timing = _timing(args.timing, config.backbones_file)
    check_sweep_gpus(config, args.replicas)
    check_sweep_tokenizers(config)  # counts as the sweep will
    check_sources(config)  # the plan runs a few questions of each run
    plan = plan_sweep(config, args.replicas or config.resources.engine_replicas, args.sample,
                      timing)
    return plan.lines()


def _timing(name: str | None, backbones_file: str | None) -> SimEngineConfig | None:
    if name is None:
        return None
    backbone = load_backbones(backbones_file).get(name)
    if backbone is None or not isinstance(backbone.engine, SimEngineConfig):
        raise ConfigError("--timing", f"{name!r} is not a sim backbone")
    return backbone.engine


if __name__ == "__main__":
    run_main(main)
