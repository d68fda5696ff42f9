"""Orchestration overhead and engine utilisation of the Ray pipeline.

    python benchmarks/bench_pipeline.py [--limit 200] [--locomo PATH]

1. warm: the LoCoMo questions through the pipeline once, filling the request cache (this run's
   completion tokens/s is the engine's output rate while driven by the pipeline);
2. the same questions again with every LLM call served from the warm cache: a plain
   single-process loop over the same stages, then the Ray pipeline with one and with two
   workers per stage (fresh result folders, so every stage recomputes);
3. the raw engine on the run's own answer prompts at concurrency 8, uncached, for the
   utilisation ratio.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from jobs.sweep import allowed
from tmem_core.llm import ChatRequest, LLMClient, get_backbone, open_backend
from tmem_core.pipeline import SweepConfig, calls_store, parse_sweep, run_sweep
from tmem_core.pipeline._stages import AnswerStage
from tmem_core.prompts import as_chat

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10_dev.json"


def config(name: str, results: Path, locomo: Path, limit: int | None, workers: int
           ) -> SweepConfig:
    bench: dict[str, object] = {"name": "locomo", "source": str(locomo)}
    if limit:
        bench["limit"] = limit
    return parse_sweep({
        "name": name, "results_dir": str(results), "benchmarks": [bench],
        "grid": {"methods": ["bm25"], "backbones": ["smollm2"], "top_k": [10],
                 "budgets": [1024]},
        "resources": {"retrieve_actors": workers, "llm_actors": workers, "batch_size": 8},
    }, allowed())


def timed_run(name: str, results: Path, args: argparse.Namespace, workers: int = 1,
              local: bool = False) -> tuple[float, int, Path]:
    started = time.perf_counter()
    (summary,) = run_sweep(config(name, results, args.locomo, args.limit, workers),
                           log=lambda _: None, local=local)
    return time.perf_counter() - started, summary.questions, summary.run_dir


def raw_engine_rate(run_dir: Path, n: int) -> float:
    """Output tokens/s of the engine alone on the run's answer prompts (concurrency 8)."""
    prompts = [json.loads(r["prompt"]) for r in
               AnswerStage.store_for(run_dir).latest().to_pylist()[:n]]
    backbone = get_backbone("smollm2")
    with open_backend(backbone) as backend:
        client = LLMClient(backbone, backend, cache=None)
        requests = [ChatRequest(as_chat(p)) for p in prompts]
        started = time.perf_counter()
        responses = client.generate(requests)
        seconds = time.perf_counter() - started
    return sum(r.usage.completion_tokens for r in responses) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=None, help="questions (default: all)")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp)
        warm_s, n, warm_dir = timed_run("warm", results, args, workers=2)
        fresh = [c for c in calls_store(warm_dir).read_all().to_pylist() if not c["cached"]]
        pipeline_rate = sum(c["completion_tokens"] for c in fresh) / warm_s
        print(f"warm-up: {n} questions, {len(fresh)} engine calls in {warm_s:.1f}s, "
              f"engine output {pipeline_rate:.1f} tok/s while driven by the pipeline")
        plain_s, _, _ = timed_run("plain", results, args, local=True)
        one_s, _, _ = timed_run("ray1", results, args, workers=1)
        two_s, _, _ = timed_run("ray2", results, args, workers=2)
        print(f"cached re-run, {n} questions: plain loop {n / plain_s:.2f} q/s; "
              f"Ray 1 worker {n / one_s:.2f} q/s ({plain_s / one_s:.2f}x the plain loop); "
              f"Ray 2 workers {n / two_s:.2f} q/s ({plain_s / two_s:.2f}x)")
        raw = raw_engine_rate(warm_dir, 32)
        print(f"engine utilisation: pipeline {pipeline_rate:.1f} tok/s vs raw engine "
              f"{raw:.1f} tok/s at concurrency 8 = {pipeline_rate / raw:.2f}")


if __name__ == "__main__":
    main()


