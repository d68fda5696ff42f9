"""T2Mem cost on LoCoMo: offline construction vs T-MEM's indexes vs test-time construction.

    python perf/bench_t2mem.py [--conversation conv-26] [--sessions 4] [--questions 4]
                                     [--backbone smollm2] [--traces]

In a fresh cache directory: T-MEM's offline work (MiniLM load, BM25 + faiss indexes with
and without metadata, as `IndexStore` builds them), then T2Mem's `prepare` (episode metadata
extraction by the backbone, entry index) cold and warm, then the test-time loop on questions
whose gold evidence lies in the slice (gold is read here to pick them, never by the method).
`--sessions 0` takes the whole conversation; the embedded SmolLM2 on 2 shared cores needs
about a minute per session, so the default is a slice.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from statistics import fmean

from tmem_core.benchmarks import LoadRequest, build
from tmem_core.llm import BackboneConfig, HttpConfig, get_backbone, open_client
from tmem_core.methods import LLM, Context
from tmem_core.methods.t2mem import ConstructionStats, LoopRecord, T2Mem, render_trace
from tmem_core.retrieval import (
    CACHE_ENV,
    Conversation,
    IndexStore,
    MiniLMEmbedder,
    cl100k_tokens,
    conversations_from_table,
)
from tmem_core.schema import Question, gold_from_table, questions_from_table

LOCOMO = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo10_dev.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=LOCOMO)
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--sessions", type=int, default=4, help="first N sessions; 0 = all")
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--backbone", default="smollm2")
    parser.add_argument("--traces", action="store_true", help="print each question's loop")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[CACHE_ENV] = tmp  # fresh request, extraction and index caches
        conversation, questions = _slice(args)
        store = IndexStore({conversation.conv_id: conversation}, MiniLMEmbedder(),
                           Path(tmp) / "index")
        tmem_indexes(store, conversation.conv_id)
        with open_client(_patient(get_backbone(args.backbone))) as client:
            cold = T2Mem(store).prepare(conversation.conv_id, client)
            method = T2Mem(store)  # as another process would: from the extraction cache
            warm = method.prepare(conversation.conv_id, client)
            _print_prepare(cold, warm, conversation)
            timed = [_construct(method, q, client) for q in questions]
    _print_questions(timed, cold)
    for context, _ in timed if args.traces else []:
        print(f"\n{render_trace(context)}")


def _slice(args: argparse.Namespace) -> tuple[Conversation, list[Question]]:
    prepared = build("locomo", LoadRequest(source=args.source))
    full = conversations_from_table(prepared.messages)[args.conversation]
    sessions = list(dict.fromkeys(m.session_id for m in full.messages))
    kept = set(sessions[: args.sessions] if args.sessions else sessions)
    conversation = Conversation(full.conv_id,
                                tuple(m for m in full.messages if m.session_id in kept))
    ids = set(conversation.position)
    gold = gold_from_table(prepared.questions)
    inside = [q for q in questions_from_table(prepared.questions)
              if q.conv_id == full.conv_id and gold[q.qid].evidence_ids
              and set(gold[q.qid].evidence_ids) <= ids and q.category != "adversarial"]
    print(f"LoCoMo {full.conv_id}: {len(kept)} of {len(sessions)} sessions, "
          f"{len(conversation)} of {len(full)} messages; {len(inside)} questions with "
          f"evidence in the slice, running {min(args.questions, len(inside))}")
    return conversation, inside[: args.questions]


def _patient(backbone: BackboneConfig) -> BackboneConfig:
    """A long request timeout: a busy shared machine can take minutes per request."""
    if not isinstance(backbone.engine, HttpConfig):
        return backbone
    return dataclasses.replace(backbone,
                               engine=dataclasses.replace(backbone.engine, timeout_s=900.0))


def tmem_indexes(store: IndexStore, conv_id: str) -> None:
    """T-MEM's offline construction: no LLM, only embeddings and indexes."""
    load = _timed(lambda: store.embedder.encode(["warm up"]))
    build_s = _timed(lambda: [store.index(conv_id, metadata) for metadata in (False, True)])
    print(f"T-MEM offline: MiniLM load {load:.1f} s; BM25 + faiss (plain and metadata) "
          f"built in {build_s:.2f} s ({store.stats.built} indexes); 0 LLM tokens")


def _print_prepare(cold: ConstructionStats, warm: ConstructionStats,
                   conversation: Conversation) -> None:
    usage = cold.usage
    sessions = len({m.session_id for m in conversation.messages})
    print(f"T2Mem prepare (cold): {cold.episodes} episodes -> {cold.entries} entries in "
          f"{cold.seconds:.1f} s; {cold.extracted} extraction calls, {usage.prompt_tokens} "
          f"prompt + {usage.completion_tokens} completion tokens "
          f"({(usage.prompt_tokens + usage.completion_tokens) / sessions:.0f} per session, "
          f"{cold.seconds / sessions:.1f} s per session); failed: {len(cold.failed)}")
    print(f"T2Mem prepare (warm, extraction cache): {warm.seconds:.2f} s, "
          f"{warm.extracted} LLM calls, {warm.reused} episodes reused")


def _construct(method: T2Mem, question: Question, llm: LLM) -> tuple[Context, float]:
    """The question's context and its wall time (seconds)."""
    started = time.perf_counter()
    context = method.construct(question, method.retrieve(question), llm, cl100k_tokens)
    return context, time.perf_counter() - started


def _print_questions(timed: list[tuple[Context, float]], cold: ConstructionStats) -> None:
    if not timed:
        print("no question to run")
        return
    contexts = [c for c, _ in timed]
    loops = [c.record for c in contexts if isinstance(c.record, LoopRecord)]
    usages = [loop.usage for loop in loops if loop.usage is not None]
    tokens = [u.prompt_tokens + u.completion_tokens for u in usages]
    steps = [u.calls for u in usages]
    construction = cold.usage.prompt_tokens + cold.usage.completion_tokens
    print(f"T2Mem test time: {len(contexts)} questions; mean steps {fmean(steps):.2f} "
          f"(Tmax 5); mean tokens per question {fmean(tokens):.0f} "
          f"(prompt {fmean(u.prompt_tokens for u in usages):.0f}, completion "
          f"{fmean(u.completion_tokens for u in usages):.0f}); mean wall "
          f"{fmean(s for _, s in timed):.1f} s; memory "
          f"{fmean(c.tokens for c in contexts):.0f} tokens; stops "
          f"{dict(Counter(loop.stop.split(':')[0] for loop in loops))}")
    print(f"offline construction = {construction / fmean(tokens):.1f} questions' worth of "
          f"test-time tokens")


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
