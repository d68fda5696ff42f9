"""Memory build cost of the isolated comparators (hipporag2, a_mem, hindsight) with the
scripted LLM of their tests: what a sweep pays per 1,000 messages beside the backbone's time.

    python perf/bench_comparators.py [--messages 100] [--systems hipporag2,a_mem,hindsight]

Each system builds one synthetic conversation (`--messages` messages, 10 per session) in a
fresh memory directory: the environment's build (if not cached), the worker's start and the
build itself are timed apart, with the LLM calls and embedding calls the accounting endpoint
counted. The scripted LLM answers at once, so the figures are the system's own overhead.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from tests.methods.external.test_comparators import ScriptedLLM
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.external._comparators import ENVIRONMENTS
from tmem_core.methods.external._isolated import WorkerSystem
from tmem_core.methods.external._method import ExternalMemory
from tmem_core.retrieval import Conversation, IndexStore, MiniLMEmbedder
from tmem_core.schema import Message

_PEOPLE = ("Caroline", "Melanie")
_DONE = ("visited the museum", "painted the lake", "went running", "baked bread",
         "read a novel", "called a friend", "fixed the bike", "planted tomatoes")


def conversation(size: int) -> Conversation:
    start = datetime(2023, 5, 8, 9, 0)
    messages = tuple(
        Message("bench", f"D{1 + i // 10}:{1 + i % 10}", i, start + timedelta(hours=3 * i),
                f"On day {i} I {_DONE[i % len(_DONE)]} with friend number {i % 7}.",
                session_id=f"session_{1 + i // 10}", author=_PEOPLE[i % 2])
        for i in range(size))
    return Conversation("bench", messages)


def bench(name: str, size: int, root: Path) -> str:
    store = IndexStore({"bench": conversation(size)}, MiniLMEmbedder(), root / "index")
    method = build_method(name, MethodEnv(store.conversations, 4, 8192, store), {})
    assert isinstance(method, ExternalMemory)
    method.cache = root / name
    env_seconds = ENVIRONMENTS[name].ensure()
    start = time.perf_counter()  # a worker's start alone, on an empty memory
    empty = method.spec.factory(method.endpoint, root / "empty" / name / "system",
                                method.params)
    assert isinstance(empty, WorkerSystem)
    empty.close()
    started = time.perf_counter() - start
    build = method.prepare("bench", ScriptedLLM())
    per_k = 1000 / size
    return (f"{name}: env build {env_seconds:.1f} s; worker start {started:.1f} s; "
            f"{size} messages built in {build.seconds:.1f} s (its worker's start included), "
            f"{build.endpoint.chat_calls} LLM calls, {build.endpoint.embedding_calls} "
            f"embedding calls, failed={len(build.failed)}; per 1,000 messages "
            f"~{(build.seconds - started) * per_k:.0f} s and "
            f"{build.endpoint.chat_calls * per_k:.0f} LLM calls")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--systems", default="hipporag2,a_mem,hindsight")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.systems.split(","):
            start = time.perf_counter()
            print(bench(name, args.messages, Path(tmp)),
                  f"(wall {time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
