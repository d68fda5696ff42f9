"""Retrieval-layer benchmark on the synthetic benchmark: embeddings, indexes, discovery.

    python perf/bench_retrieval.py [--size 120000] [--questions 200]

Cold run in a fresh cache directory (embed, build BM25 and faiss for every conversation with
and without metadata expansion), then a warm run that loads everything from that cache, then
T-MEM discovery latency per question (Top-36). Identical texts are embedded once.
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
import time
from pathlib import Path
from statistics import quantiles

from tmem_core.benchmarks import LoadRequest, build
from tmem_core.methods.tmem import TemporalDiscovery
from tmem_core.retrieval import (
    Bm25Index,
    IndexStore,
    MiniLMEmbedder,
    conversations_from_table,
    document_text,
)
from tmem_core.schema import questions_from_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=120_000)
    parser.add_argument("--questions", type=int, default=200, help="discovery latency sample")
    args = parser.parse_args()
    started = time.perf_counter()
    prepared = build("synthetic", LoadRequest(size=args.size, seed=0))
    convs = conversations_from_table(prepared.messages)
    print(f"synthetic {args.size} messages, {len(convs)} conversations "
          f"(built in {time.perf_counter() - started:.1f} s)")
    with tempfile.TemporaryDirectory() as tmp:
        cold = cold_build(IndexStore(convs, MiniLMEmbedder(), Path(tmp)))
        warm_store = IndexStore(convs, MiniLMEmbedder(), Path(tmp))
        warm = _timed(lambda: _all_indexes(warm_store))
        print(f"warm (cached) index load: {warm:.2f} s; cold/warm = {cold / warm:.0f}x "
              f"(built {warm_store.stats.built}, loaded {warm_store.stats.loaded})")
        discovery_latency(warm_store, prepared.questions, args.questions)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(f"peak RSS {peak:.2f} GiB")


def cold_build(store: IndexStore) -> float:
    """Embed, then build BM25 and faiss indexes; print each figure; return the total seconds."""
    messages = [m for c in store.conversations.values() for m in c.messages]
    unique = sorted({m.text for m in messages})
    load = _timed(lambda: store.embedder.encode(["warm up"]))
    embed = _timed(lambda: store.embeddings.embed(unique, progress=False))
    print(f"model load {load:.1f} s; embedded {len(unique)} unique texts of {len(messages)} "
          f"messages in {embed:.1f} s: {len(unique) / embed:.0f} texts/s, "
          f"{len(messages) / embed:.0f} messages/s after deduplication")
    bm25 = _timed(lambda: [Bm25Index.cached([document_text(m, md) for m in c.messages],
                                            store.root)
                           for c in store.conversations.values() for md in (False, True)])
    rest = _timed(lambda: _all_indexes(store))  # BM25 now loads; faiss (+ metadata) builds
    print(f"BM25 build {bm25:.2f} s; faiss build (incl. metadata vectors) {rest:.2f} s "
          f"({len(store.conversations)} conversations x metadata on/off)")
    total = load + embed + bm25 + rest
    print(f"cold index build: {total:.1f} s")
    return total


def discovery_latency(store: IndexStore, questions: object, sample: int) -> None:
    method = TemporalDiscovery(store)
    chosen = questions_from_table(questions)
    random.Random(0).shuffle(chosen)
    times = []
    for q in chosen[:sample]:
        times.append(_timed(lambda q=q: method(q, 36)) * 1000)
    cuts = quantiles(times, n=20)
    print(f"discovery latency over {len(times)} questions (Top-36): p50 {cuts[9]:.1f} ms, "
          f"p95 {cuts[18]:.1f} ms")


def _all_indexes(store: IndexStore) -> None:
    for conv_id in store.conversations:
        for metadata in (False, True):
            store.index(conv_id, metadata)


def _timed(action: object) -> float:
    started = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
