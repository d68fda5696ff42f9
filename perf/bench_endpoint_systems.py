"""Memory build cost of the comparators this project adds without a release of their own,
on the `sim` engine: what a sweep pays per 1,000 messages beside the backbone's time.

    python perf/bench_endpoint_systems.py [--messages 1000] [--questions 20]

`mcp` and `http` build one synthetic conversation in the project's BM25 served as an MCP
server (started over stdio) and as an HTTP service (tests/methods/external/bm25_service.py:
one LLM note per ingest batch of 50), timed with their LLM calls as the accounting endpoint
counted them; the served system decides the calls, the seam adds only its transport. LazyMem
builds nothing offline: its cost is one construction call per question, timed over
`--questions` questions.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from perf.bench_comparators import conversation
from tests.hashed_embedder import HashEmbedder
from tests.methods.external.bm25_service import HttpService
from tmem_core.llm import open_client
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.external._method import ExternalMemory
from tmem_core.retrieval import IndexStore, cl100k_tokens
from tmem_core.schema import Question

ROOT = Path(__file__).resolve().parents[1]


def build(name: str, params: dict[str, object], store: IndexStore, root: Path,
          size: int) -> str:
    method = build_method(name, MethodEnv(store.conversations, 8, 8192, store), params)
    assert isinstance(method, ExternalMemory)
    method.cache = root / name
    with open_client("sim", use_cache=False) as llm:
        done = method.prepare("bench", llm)
    per_k = 1000 / size
    return (f"{name}: {size} messages built in {done.seconds:.1f} s, "
            f"{done.endpoint.chat_calls} LLM calls, failed={len(done.failed)}; per 1,000 "
            f"messages ~{done.seconds * per_k:.1f} s and {done.endpoint.chat_calls * per_k:.0f} "
            f"LLM calls")


def lazymem(store: IndexStore, questions: int) -> str:
    method = build_method("lazymem", MethodEnv(store.conversations, 8, 8192, store), {})
    asked = [Question("bench", f"q{i}", f"What did they do on day {i * 7}?", "multi_hop")
             for i in range(questions)]
    start = time.perf_counter()
    with open_client("sim", use_cache=False) as llm:
        calls = sum(method.construct(q, method.retrieve(q), llm, cl100k_tokens).record
                    .usage.calls for q in asked)  # type: ignore[attr-defined]
    seconds = time.perf_counter() - start
    return (f"lazymem: no offline build (0 LLM calls per 1,000 messages); {questions} "
            f"questions in {seconds:.1f} s, {calls} LLM calls (1 per question)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = IndexStore({"bench": conversation(args.messages)}, HashEmbedder(),
                           root / "index")
        served = {"command": [sys.executable, "-m", "tests.methods.external.bm25_service"],
                  "env": {"PYTHONPATH": str(ROOT)}}
        print(build("mcp", served, store, root, args.messages), flush=True)
        service = HttpService(root / "service")
        try:
            body = ('{"memory_id": {{memory_id}}, "messages": {{messages}}, '
                    '"llm_base_url": {{llm_base_url}}, "llm_api_key": {{llm_api_key}}}')
            print(build("http", {"ingest_url": f"{service.url}/ingest",
                                 "query_url": f"{service.url}/query", "ingest_body": body,
                                 "reply": {"items": "data.results"}},
                        store, root, args.messages), flush=True)
        finally:
            service.close()
        print(lazymem(store, args.questions), flush=True)


if __name__ == "__main__":
    main()
