"""Orchestration overhead and engine utilisation of the Ray pipeline.

    python benchmarks/bench_pipeline.py [--limit N] [--utilisation-questions 24] [--locomo PATH]

1. Overhead, on every LoCoMo question (or the first --limit): the request cache is warmed by
   one pipeline run against an instant local endpoint (answering 1,347 questions for real
   with SmolLM2 takes hours on 2 cores, and what is measured here is everything *but* the
   engine). Then, with every LLM call a cache hit (asserted), in fresh result folders so that
   every stage recomputes: a plain single-process loop over the same stages, the Ray pipeline
   with one worker per stage and with two. Ray's start-up is excluded (a submitted job finds
   its cluster running); each run's own start-up (actors, indexes, engines) is included.
2. Utilisation, on the first --utilisation-questions questions with the real embedded
   SmolLM2 and an empty cache: output (and all) tokens/s of the engine while the pipeline
   drives it, over the window in which its calls ran, vs the raw engine replaying the run's
   answer requests at concurrency 8.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.sweep import allowed  # noqa: E402
from tmem_core.llm import ChatRequest, LLMClient, get_backbone, open_backend  # noqa: E402
from tmem_core.pipeline import (  # noqa: E402
    SweepConfig,
    calls_store,
    init_ray,
    parse_sweep,
    run_sweep,
)
from tmem_core.pipeline._stages import AnswerStage  # noqa: E402
from tmem_core.prompts import as_chat  # noqa: E402

DEFAULT_LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10_dev.json"


class InstantEndpoint:
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers at once: a judge verdict when
    a JSON schema is asked for, a fixed short answer otherwise. Only warms the cache."""

    def __init__(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _InstantHandler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _InstantHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = '{"verdict": "CORRECT"}' if body.get("response_format") else "Not mentioned."
        reply = json.dumps({
            "id": "instant", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def config(name: str, results: Path, args: argparse.Namespace, backbone: str, workers: int,
           limit: int | None, backbones_file: Path | None = None, fused: bool = True
           ) -> SweepConfig:
    bench: dict[str, object] = {"name": "locomo", "source": str(args.locomo)}
    if limit:
        bench["limit"] = limit
    raw: dict[str, Any] = {
        "name": name, "results_dir": str(results), "benchmarks": [bench],
        "grid": {"methods": ["bm25"], "backbones": [backbone], "judges": [backbone],
                 "top_k": [5], "budgets": [512]},
        "resources": {"retrieve_actors": workers, "llm_actors": workers,
                      "batch_size": args.batch_size, "fuse_stages": fused},
    }
    if backbones_file:
        raw["backbones_file"] = str(backbones_file)
    return parse_sweep(raw, allowed())


@dataclass
class Timing:
    seconds: float  # the whole run: its start-up (actors, indexes, engines) included
    questions: int
    run_dir: Path
    first_out_s: float  # when the first batch came out of the last stage
    steady_qps: float  # questions/s from the first batch out to the last

    @property
    def qps(self) -> float:
        return self.questions / self.seconds


def timed_run(sweep: SweepConfig, local: bool = False) -> Timing:
    progress: list[tuple[float, int]] = []

    def log(line: str) -> None:
        if match := re.search(r"\[progress\] \S+: (\d+)/", line):
            progress.append((time.perf_counter(), int(match.group(1))))

    started = time.perf_counter()
    (summary,) = run_sweep(sweep, log=log, local=local)
    seconds = time.perf_counter() - started
    (t0, n0), (t1, n1) = progress[0], progress[-1]
    steady = (n1 - n0) / (t1 - t0) if t1 > t0 else float("nan")
    return Timing(seconds, summary.questions, summary.run_dir, t0 - started, steady)


def engine_calls(run_dir: Path) -> list[dict[str, Any]]:
    return [c for c in calls_store(run_dir).read_all().to_pylist() if not c["cached"]]


def overhead(results: Path, args: argparse.Namespace) -> None:
    endpoint = InstantEndpoint()
    backbones = results / "backbones.toml"
    name = f"instant-{uuid.uuid4().hex[:8]}"  # a fresh name: nothing cached from earlier runs
    backbones.write_text(
        f'[backbones.{name}]\nbackend = "openai"\nmodel = "instant"\n'
        f'engine = {{ base_url = "{endpoint.base_url}", max_concurrency = 64 }}\n')

    def sweep(tag: str, workers: int, fused: bool = True) -> SweepConfig:
        return config(tag, results, args, name, workers, args.limit, backbones, fused)

    try:
        warm = timed_run(sweep("warm", 2))
        print(f"warm-up: {warm.questions} questions, {len(engine_calls(warm.run_dir))} calls "
              f"to the instant endpoint in {warm.seconds:.1f}s")
    finally:
        endpoint.close()  # from here on, an engine call would fail
    runs = {}
    for tag, workers, fused in (("plain", 1, True), ("ray1", 1, True), ("ray2", 2, True),
                                ("ray1-unfused", 1, False), ("ray2-unfused", 2, False)):
        runs[tag] = timed_run(sweep(tag, workers, fused), local=tag == "plain")
        missed = engine_calls(runs[tag].run_dir)
        if missed:
            raise SystemExit(f"{tag}: {len(missed)} calls missed the warm cache")
        t = runs[tag]
        print(f"cached {tag:>12}: {t.questions} questions in {t.seconds:.1f}s = {t.qps:.1f} "
              f"q/s; first batch out at {t.first_out_s:.1f}s, then {t.steady_qps:.1f} q/s")
    plain = runs["plain"]
    for tag in runs:
        if tag != "plain":
            t = runs[tag]
            print(f"overhead {tag:>12}: {t.qps / plain.qps:.2f}x the plain loop end to end, "
                  f"{t.steady_qps / plain.steady_qps:.2f}x once running (target >= 0.8x "
                  f"with 1 worker, > 1x with 2)")


def utilisation(results: Path, args: argparse.Namespace) -> None:
    backbones = results / "utilisation.toml"
    name = f"smollm2-{uuid.uuid4().hex[:8]}"  # the embedded model under a fresh cache key
    backbones.write_text(f'[backbones.{name}]\nbackend = "embedded"\n'
                         f'model = "SmolLM2-135M-Instruct"\ncontext_length = 4096\n')
    sweep = config("utilisation", results, args, name, 2, args.utilisation_questions,
                   backbones)
    run = timed_run(sweep)
    n, run_dir = run.questions, run.run_dir
    calls = engine_calls(run_dir)
    window = (max(c["finished_at"] for c in calls)
              - min(c["finished_at"] - c["latency_s"] for c in calls))
    out = sum(c["completion_tokens"] for c in calls)
    total = out + sum(c["prompt_tokens"] for c in calls)
    raw_out, raw_total = raw_engine_rates(run_dir)
    print(f"engine driven by the pipeline ({n} questions, {len(calls)} calls, answer and "
          f"judge, {window:.1f}s): {out / window:.1f} output tok/s, {total / window:.0f} tok/s")
    print(f"raw engine, the run's answer requests at concurrency 8: {raw_out:.1f} output tok/s, "
          f"{raw_total:.0f} tok/s")
    print(f"utilisation: {out / window / raw_out:.2f} (output tokens), "
          f"{total / window / raw_total:.2f} (all tokens) (target >= 0.8)")


def raw_engine_rates(run_dir: Path) -> tuple[float, float]:
    """Output and all tokens/s of the engine alone on the run's answer prompts."""
    prompts = [json.loads(r["prompt"]) for r in AnswerStage.store_for(run_dir).latest().to_pylist()]
    backbone = get_backbone("smollm2")
    with open_backend(backbone) as backend:
        client = LLMClient(backbone, backend, cache=None)
        client.generate([ChatRequest.from_prompt("warm up")])
        started = time.perf_counter()
        responses = client.generate([ChatRequest(as_chat(p)) for p in prompts])
        seconds = time.perf_counter() - started
    out = sum(r.usage.completion_tokens for r in responses)
    return out / seconds, (out + sum(r.usage.prompt_tokens for r in responses)) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=None, help="questions (default: all)")
    parser.add_argument("--utilisation-questions", type=int, default=24,
                        help="questions for the utilisation run (0 = skip)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    args = parser.parse_args()
    init_ray()
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        results = Path(tmp)
        overhead(results, args)
        if args.utilisation_questions:
            utilisation(results, args)


if __name__ == "__main__":
    main()
