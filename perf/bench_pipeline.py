"""Orchestration overhead and engine utilisation of the Ray pipeline.

    python perf/bench_pipeline.py [--limit N] [--sweep-runs 3] [--method bm25]
                                        [--repeats 3] [--utilisation-questions 24]
                                        [--locomo PATH]

1. Overhead, on every LoCoMo question (or the first --limit): the request cache is warmed by
   one pipeline sweep against an instant local endpoint (answering 1,347 questions for real
   with SmolLM2 takes hours on 2 cores, and what is measured here is everything *but* the
   engine). Then, with every LLM call a cache hit (asserted), in fresh result folders so that
   every stage recomputes: a plain single-process loop over the same stages (in a fresh
   process, so no cache of this one flatters it, timed after its imports, which a Ray actor
   pays inside its start-up), and the Ray pipeline with one and two workers (fused stages,
   the default; and one pool per stage). Each variant is timed --repeats times, the
   variants interleaved so that a slow spell of the machine hits all alike; medians count.
   First for one run, then for a sweep of --sweep-runs runs (Top-k 5, 10, 20), whose runs
   share the pipeline's actors. --method sets the runs' method: bm25 (the default) leaves the
   stages nothing to do but cache lookups and scoring, the worst case for the overhead;
   tmem_heuristic (T-MEM's discovery) also embeds every question and walks its timeline.
   Ray's start-up is excluded (a submitted job finds its cluster running); each sweep's own
   start-up (actors, indexes, engines) is included.
2. Utilisation, on the first --utilisation-questions questions with the real embedded
   SmolLM2 and an empty cache: output (and all) tokens/s of the engine while the pipeline
   drives it, over the window in which its calls ran, vs the raw engine replaying the run's
   requests (its answers and its judges' first attempts, rebuilt as the judge stage builds
   them) all at once, at the backend's concurrency (8), with no stage between them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the run summary's accuracy comes from the reports; imported here, before any timing, so the
# plain loop's process and this driver start alike
import tmem_core.reports  # noqa: E402, F401
from tmem_core.benchmarks import read_prepared  # noqa: E402
from tmem_core.evaluation import JudgeCall  # noqa: E402
from tmem_core.llm import (  # noqa: E402
    ChatRequest,
    LLMClient,
    LoopbackServer,
    RequestCache,
    get_backbone,
    load_backbones,
    open_backend,
    request_hash,
)
from tmem_core.pipeline import (  # noqa: E402
    SweepConfig,
    init_ray,
    parse_sweep,
    registered,
    run_sweep,
)
from tmem_core.pipeline._answer_stage import AnswerStage  # noqa: E402
from tmem_core.pipeline._judge_stage import JudgeStage, judge_request  # noqa: E402
from tmem_core.prompts import as_chat, load_prompt  # noqa: E402
from tmem_core.results import calls_store, calls_window  # noqa: E402
from tmem_core.schema import gold_from_table, questions_from_table  # noqa: E402

SWEEP_TOP_K = (5, 10, 20, 40)
DEFAULT_LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10_dev.json"


class InstantEndpoint:
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers at once: a judge verdict when
    a JSON schema is asked for, a fixed short answer otherwise. Only warms the cache."""

    def __init__(self) -> None:
        self.server = LoopbackServer(_InstantHandler)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def close(self) -> None:
        self.server.close()


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
           limit: int | None, backbones_file: Path | None = None, fused: bool = True,
           top_k: tuple[int, ...] = (5,)) -> SweepConfig:
    bench: dict[str, object] = {"name": "locomo", "source": str(args.locomo)}
    if limit:
        bench["limit"] = limit
    raw: dict[str, Any] = {
        "name": name, "results_dir": str(results), "benchmarks": [bench],
        "grid": {"methods": [args.method], "backbones": [backbone], "judges": [backbone],
                 "top_k": list(top_k), "budget": [512]},
        "resources": {"retrieve_actors": workers, "llm_actors": workers,
                      "batch_size": args.batch_size, "fuse_stages": fused},
    }
    if backbones_file:
        raw["backbones_file"] = str(backbones_file)
    return parse_sweep(raw, registered())


@dataclass
class Timing:
    seconds: float  # the whole sweep: its start-up (actors, indexes, engines) included
    questions: int  # over all runs
    run_dirs: list[Path]
    first_out_s: float  # when the first batch came out of the last stage
    steady_qps: float  # questions/s from the first batch out to the last

    @property
    def qps(self) -> float:
        return self.questions / self.seconds


def timed_run(sweep: SweepConfig, local: bool = False) -> Timing:
    done: dict[str, int] = {}
    progress: list[tuple[float, int]] = []

    def log(line: str) -> None:
        if match := re.search(r"\[progress\] (\S+): (\d+)/", line):
            done[match.group(1)] = int(match.group(2))
            progress.append((time.perf_counter(), sum(done.values())))

    started = time.perf_counter()
    summaries = run_sweep(sweep, log=log, local=local)
    seconds = time.perf_counter() - started
    (t0, n0), (t1, n1) = progress[0], progress[-1]
    steady = (n1 - n0) / (t1 - t0) if t1 > t0 else float("nan")
    return Timing(seconds, sum(s.questions for s in summaries),
                  [s.run_dir for s in summaries], t0 - started, steady)


def timed_plain(sweep: SweepConfig) -> Timing:
    """The plain loop in a fresh process, timed once its modules are imported: it starts as
    cold as a Ray actor does (this process has warmed caches that would flatter it)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        timing: Timing = pool.apply(timed_run, (sweep, True))
    return timing


def engine_calls(run_dirs: list[Path]) -> list[dict[str, Any]]:
    return [c for run_dir in run_dirs for c in calls_store(run_dir).read_all().to_pylist()
            if not c["cached"]]


def overhead(results: Path, args: argparse.Namespace) -> None:
    endpoint = InstantEndpoint()
    backbones = results / "backbones.toml"
    name = f"instant-{uuid.uuid4().hex[:8]}"  # a fresh name: nothing cached from earlier runs
    backbones.write_text(
        f'[backbones.{name}]\nbackend = "openai"\nmodel = "instant"\n'
        f'engine = {{ base_url = "{endpoint.base_url}", max_concurrency = 64 }}\n')

    def sweep(tag: str, workers: int, fused: bool = True, top_k: tuple[int, ...] = (5,)
              ) -> SweepConfig:
        return config(tag, results, args, name, workers, args.limit, backbones, fused, top_k)

    several = SWEEP_TOP_K[: args.sweep_runs]
    try:
        warm = timed_run(sweep("warm", 2, top_k=several))
        print(f"warm-up: {warm.questions} questions, {len(engine_calls(warm.run_dirs))} calls "
              f"to the instant endpoint in {warm.seconds:.1f}s")
    finally:
        endpoint.close()  # from here on, an engine call would fail
    print(f"one run ({args.method}, k=5):")
    compare(sweep, [("plain", 1, True), ("ray1", 1, True), ("ray2", 2, True),
                    ("ray1-unfused", 1, False), ("ray2-unfused", 2, False)], (5,),
            args.repeats)
    if len(several) > 1:
        print(f"a sweep of {len(several)} runs ({args.method}, k={', '.join(map(str, several))}):")
        compare(sweep, [("plain", 1, True), ("ray1", 1, True), ("ray2", 2, True)], several,
                args.repeats)


def compare(sweep: Callable[[str, int, bool, tuple[int, ...]], SweepConfig],
            variants: list[tuple[str, int, bool]], top_k: tuple[int, ...], repeats: int
            ) -> None:
    """Time each variant `repeats` times on fresh result folders (every call a cache hit, or
    stop), interleaved (plain, ray1, ..., plain, ray1, ...) so that a slow spell of the
    machine hits every variant alike; each variant's median counts."""
    runs: dict[str, list[Timing]] = {tag: [] for tag, _, _ in variants}
    for repeat in range(repeats):
        for tag, workers, fused in variants:
            label = f"{tag}-k{'-'.join(map(str, top_k))}-r{repeat}"
            config = sweep(label, workers, fused, top_k)
            t = timed_plain(config) if tag == "plain" else timed_run(config)
            missed = engine_calls(t.run_dirs)
            if missed:
                raise SystemExit(f"{tag}: {len(missed)} calls missed the warm cache")
            runs[tag].append(t)
            print(f"  cached {tag:>12}: {t.questions} questions in {t.seconds:.1f}s = "
                  f"{t.qps:.1f} q/s; first batch out at {t.first_out_s:.1f}s, then "
                  f"{t.steady_qps:.1f} q/s")
    medians = {tag: Median.of(timings) for tag, timings in runs.items()}
    plain = medians["plain"]
    for tag, m in medians.items():
        spread = f" (of {repeats}: {m.low:.1f}-{m.high:.1f}s)" if repeats > 1 else ""
        line = f"  median {tag:>12}: {m.seconds:.1f}s{spread}"
        if tag != "plain":
            line += (f"; {m.qps / plain.qps:.2f}x the plain loop end to end, "
                     f"{m.steady_qps / plain.steady_qps:.2f}x once running (target >= 0.8x "
                     f"with 1 worker, > 1x with 2)")
        print(line)


@dataclass
class Median:
    """A variant's median over its repeats: end-to-end seconds, steady rate, and the range."""

    seconds: float
    questions: int
    steady_qps: float
    low: float
    high: float

    @property
    def qps(self) -> float:
        return self.questions / self.seconds

    @classmethod
    def of(cls, timings: list[Timing]) -> Median:
        return cls(statistics.median(t.seconds for t in timings), timings[0].questions,
                   statistics.median(t.steady_qps for t in timings),
                   min(t.seconds for t in timings), max(t.seconds for t in timings))


def utilisation(results: Path, args: argparse.Namespace) -> None:
    backbones = results / "utilisation.toml"
    name = f"smollm2-{uuid.uuid4().hex[:8]}"  # the embedded model under a fresh cache key
    backbones.write_text(f'[backbones.{name}]\nbackend = "embedded"\n'
                         f'model = "SmolLM2-135M-Instruct"\ncontext_length = 4096\n')
    sweep = config("utilisation", results, args, name, 2, args.utilisation_questions,
                   backbones)
    run = timed_run(sweep)
    n, (run_dir,) = run.questions, run.run_dirs
    calls = engine_calls(run.run_dirs)
    window = calls_window(calls)
    out = sum(c["completion_tokens"] for c in calls)
    total = out + sum(c["prompt_tokens"] for c in calls)
    replayed = engine_requests(run_dir)
    cache = RequestCache()
    made = cache.get_many(request_hash(load_backbones(backbones)[name], r) for r in replayed)
    cache.close()
    if len(made) != len(replayed):
        raise SystemExit(f"{len(replayed) - len(made)} replayed requests differ from the run's")
    raw_out, raw_total = raw_engine_rates(replayed)
    print(f"engine driven by the pipeline ({n} questions, {len(calls)} calls, answer and "
          f"judge, {window:.1f}s): {out / window:.1f} output tok/s, {total / window:.0f} tok/s")
    print(f"raw engine, the run's {len(replayed)} requests replayed at concurrency 8: "
          f"{raw_out:.1f} output tok/s, {raw_total:.0f} tok/s")
    print(f"utilisation: {out / window / raw_out:.2f} (output tokens), "
          f"{total / window / raw_total:.2f} (all tokens) (target >= 0.8)")


def engine_requests(run_dir: Path) -> list[ChatRequest]:
    """The run's answer requests and its judges' first attempts (retries are left out)."""
    answers = AnswerStage.store_for(run_dir).latest().to_pylist()
    data = Path(json.loads((run_dir / "contract.json").read_text())["data"]["dir"])
    prepared = read_prepared(data)
    questions = {q.qid: q for q in questions_from_table(prepared.questions)}
    gold = gold_from_table(prepared.questions)
    predictions = {r["qid"]: r["prediction"] or "" for r in answers}
    judged = [r for r in JudgeStage.store_for(run_dir).latest().to_pylist()
              if r["scored_by"] == "llm"]
    return ([ChatRequest(as_chat(json.loads(r["prompt"]))) for r in answers]
            + [judge_request(JudgeCall(load_prompt(r["prompt_name"])), questions[r["qid"]],
                             gold[r["qid"]], predictions[r["qid"]], r["repeat"], 0)
               for r in judged])


def raw_engine_rates(replayed: list[ChatRequest]) -> tuple[float, float]:
    """Output and all tokens/s of the engine alone on the given requests."""
    backbone = get_backbone("smollm2")
    with open_backend(backbone) as backend:
        client = LLMClient(backbone, backend, cache=None)
        client.generate([ChatRequest.from_prompt("warm up")])
        started = time.perf_counter()
        responses = client.generate(replayed)
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
    parser.add_argument("--sweep-runs", type=int, default=3,
                        help="runs (Top-k values) of the sweep comparison (1 = skip it)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timings of each variant, interleaved; the median counts")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--method", default="bm25", help="the runs' method (default: bm25)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    init_ray()
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        results = Path(tmp)
        overhead(results, args)
        if args.utilisation_questions:
            utilisation(results, args)


if __name__ == "__main__":
    main()
