"""T-MEM benchmark: LLM calls, tokens and wall time per step and per question, cold and warm.

    python perf/bench_tmem.py [--benchmark synthetic] [--questions 3] [--budget 8192]
    python perf/bench_tmem.py --benchmark locomo \\
        --source ../shared/datasets/locomo/locomo10_dev.json --questions 2

- per question, with the embedded model (a fresh request cache, then the same run again with
  the cache warm): calls, prompt and completion tokens and wall time of selection and
  structuring, wall time of discovery and of rendering (compression + linearisation);
- compression alone on a 500-node forest (3-sentence messages; the budget drops half of
  the optional spans' tokens).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tmem_core.benchmarks import LoadRequest, build  # noqa: E402
from tmem_core.llm import LLMClient, count_tokens, open_client  # noqa: E402
from tmem_core.methods.tmem import (  # noqa: E402
    Built,
    DiscoveryConfig,
    Item,
    Proposal,
    QueryTerms,
    TMem,
    TMemConfig,
    build_forest,
    compress,
)
from tmem_core.retrieval import IndexStore, conversations_from_table  # noqa: E402
from tmem_core.schema import Message, Question, questions_from_table  # noqa: E402

STEPS = ("select", "structure")


def main() -> None:
    args = _parser().parse_args()
    prepared = build(args.benchmark, LoadRequest(source=args.source, size=args.size,
                                                 variant=args.variant))
    store = IndexStore(conversations_from_table(prepared.messages))
    questions = questions_from_table(prepared.questions)[:args.questions]
    method = TMem(store, TMemConfig(DiscoveryConfig(max_candidates=args.max_candidates)),
                  budget=args.budget)
    with tempfile.TemporaryDirectory() as tmp, \
            open_client(args.backbone, cache_path=Path(tmp) / "cache.sqlite") as llm:
        for label in ("cold cache", "warm cache"):
            print(f"== {args.benchmark}, {len(questions)} questions, budget {args.budget}, "
                  f"{label}")
            run_questions(method, questions, llm)
    bench_compression(store, 500)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="synthetic")
    parser.add_argument("--source", type=Path)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--variant", default="native-revisions")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--budget", type=int, default=8192)
    parser.add_argument("--max-candidates", type=int, default=100)
    parser.add_argument("--backbone", default="smollm2")
    return parser


def run_questions(method: TMem, questions: list[Question], llm: LLMClient) -> None:
    count = functools.partial(count_tokens, llm.backbone)
    print(f"{'qid':22} {'step':10} {'calls':>5} {'cached':>6} {'failed':>6} {'prompt':>7} "
          f"{'compl':>6} {'llm s':>7} {'wall s':>7}")
    for q in questions:
        started = time.perf_counter()
        found = method.retrieve(q)
        discovery_s = time.perf_counter() - started
        context = method.construct(q, found, llm, count)
        construct_s = time.perf_counter() - started - discovery_s
        built = context.record
        assert isinstance(built, Built)
        print(f"{q.qid:22} {'discovery':10} {'':42} {discovery_s:7.2f}")
        for step in STEPS:
            s = built.llm[step]
            print(f"{'':22} {step:10} {s.calls:5} {s.cached:6} {s.failed:6} "
                  f"{s.prompt_tokens:7} {s.completion_tokens:6} {s.wall_s:7.2f}")
        print(f"{'':22} {'construct':10} {'':42} {construct_s:7.2f}"
              f"   -> {len(context.ids)} nodes, {context.tokens} tokens")


def bench_compression(store: IndexStore, nodes: int) -> None:
    """Compression of a `nodes`-node forest (chains of 5), halfway to its mandatory size."""
    texts = [m.text for c in store.conversations.values() for m in c.messages]
    base = next(iter(store.conversations.values())).messages[0]
    messages = [Message("c", f"c:{k}", k, base.timestamp, " ".join(texts[3 * k:3 * k + 3]),
                        topic="t") for k in range(nodes)]
    proposals = {m.msg_id: Proposal(f"c:{k - 1}" if k % 5 else None, "EXPAND")
                 for k, m in enumerate(messages)}
    forest, _ = build_forest(messages, proposals)
    count = functools.partial(count_tokens, "smollm2")
    by_id = {m.msg_id: m for m in messages}
    items = [Item(n.id, by_id[n.id].text, by_id[n.parent].text if n.parent else "", 40)
             for n in forest.nodes.values()]
    terms = QueryTerms.of(Question("c", "q", "What is the current timeout for Atlas upload?",
                                   "ku"))
    full = compress(items, 10**9, terms, count).tokens
    budget = (full + compress(items, 0, terms, count).tokens) // 2  # half of what may go
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        out = compress(items, budget, terms, count)
        runs.append(time.perf_counter() - started)
    print(f"== compression, {nodes} nodes, {out.spans} spans, {full} -> {out.tokens} tokens "
          f"(budget {budget}, dropped {out.dropped}, over budget {out.over_budget}): "
          f"median {statistics.median(runs) * 1000:.0f} ms over {len(runs)} runs")


if __name__ == "__main__":
    main()
