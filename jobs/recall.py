"""Evidence recall@k of evidence methods (the papers' Exp-2), as a table and JSON.

    python -m jobs.recall --benchmark locomo --source ../shared/datasets/locomo/locomo10_dev.json \\
        --methods bm25,dense,hybrid,bm25_expand,naive_rag,tmem_reranked,tmem_global \\
        --k 5,10,20,36,48 --out recall.json

Recall = mean, over questions with gold evidence (not abstentions), of the fraction of their
gold evidence ids among the k selected messages. Every method keeps k messages; T-MEM also
seeds k anchors (Exp-2 protocol) unless --anchors fixes them. For naive RAG, k counts messages:
whole chunks are taken until they hold k. Gold evidence is read by the scorer only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from jobs._cli import add_source_args, load_request, run_main
from tmem_core.benchmarks import PreparedBenchmark, build, read_prepared
from tmem_core.evaluation import RecallTable, evidence_recall, recall_scorable
from tmem_core.methods import METHOD_NAMES, make_method
from tmem_core.methods.tmem import DiscoveryConfig
from tmem_core.retrieval import Budget, IndexStore, conversations_from_table, query_text
from tmem_core.schema import DataError, Question, gold_from_table, questions_from_table

DEFAULT_METHODS = "bm25,dense,hybrid,bm25_expand,naive_rag,tmem_reranked,tmem_global"


def main() -> int:
    args = _parser().parse_args()
    prepared = read_prepared(args.prepared) if args.prepared else build(args.benchmark,
                                                                         load_request(args))
    table = evaluate(prepared, args)
    print_table(table, args.k)
    if args.out:
        args.out.write_text(json.dumps(table.to_json(), indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.recall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_args(parser)
    parser.add_argument("--prepared", type=Path, help="read a prepared folder instead")
    parser.add_argument("--methods", type=_names, default=_names(DEFAULT_METHODS),
                        help=f"comma-separated, from {', '.join(METHOD_NAMES)}")
    parser.add_argument("--k", type=_ints, default=_ints("5,10,20,36,48"),
                        help="comma-separated message budgets")
    parser.add_argument("--anchors", type=int, help="T-MEM: fixed anchor depth (default: k)")
    parser.add_argument("--conversations", type=_names, help="only these conversation ids")
    parser.add_argument("--out", type=Path, help="write the JSON here")
    return parser


def evaluate(prepared: PreparedBenchmark, args: argparse.Namespace) -> RecallTable:
    """Recall of every method at every k over the scorable questions."""
    gold = gold_from_table(prepared.questions)
    questions = [q for q in questions_from_table(prepared.questions)
                 if recall_scorable(gold[q.qid])
                 and (not args.conversations or q.conv_id in args.conversations)]
    if not questions:
        raise DataError("no question with gold evidence to score")
    store = IndexStore(conversations_from_table(prepared.messages))
    _warm(store, questions)
    config = DiscoveryConfig()
    if args.anchors:
        config = replace(config, anchors=args.anchors, anchors_follow_budget=False)
    table = RecallTable()
    for name in args.methods:
        method = make_method(name, store, config)
        progress = _Progress(name, len(questions))
        for q in questions:
            for k in args.k:
                selected = method(q, Budget.top_k(k)).ids
                table.add(name, k, q.category, evidence_recall(selected, gold[q.qid]))
            progress.step()
    return table


def _warm(store: IndexStore, questions: list[Question]) -> None:
    """Embed all queries in one batch and build (or load) every index, with progress."""
    started = time.perf_counter()
    store.embeddings.embed(sorted({query_text(q, md) for q in questions for md in (False, True)}))
    conv_ids = sorted({q.conv_id for q in questions})
    for n, conv_id in enumerate(conv_ids, start=1):
        for metadata in (False, True):
            store.index(conv_id, metadata)
        print(f"\rindexes {n}/{len(conv_ids)} conversations", end="", file=sys.stderr)
    print(f" ({time.perf_counter() - started:.0f}s; built {store.stats.built}, cached "
          f"{store.stats.loaded}, embedded {store.embeddings.embedded} texts)", file=sys.stderr)


class _Progress:
    def __init__(self, name: str, total: int) -> None:
        self.name, self.total, self.done = name, total, 0
        self.started = time.perf_counter()

    def step(self) -> None:
        self.done += 1
        if self.done == self.total or self.done % 50 == 0:
            elapsed = time.perf_counter() - self.started
            end = "\n" if self.done == self.total else ""
            print(f"\r{self.name}: {self.done}/{self.total} questions ({elapsed:.0f}s)",
                  end=end, file=sys.stderr)


def print_table(table: RecallTable, ks: list[int]) -> None:
    counts = table.question_counts()
    print(f"evidence recall@k over {sum(counts.values())} questions")
    print(f"{'method':<18}" + "".join(f"{'@' + str(k):>8}" for k in ks))
    for method, by_k in table.overall().items():
        print(f"{method:<18}" + "".join(f"{by_k[k]:>8.3f}" for k in ks))


def _names(text: str) -> list[str]:
    return [t for t in (s.strip() for s in text.split(",")) if t]


def _ints(text: str) -> list[int]:
    try:
        return sorted({int(t) for t in _names(text)})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {text!r}") from None


if __name__ == "__main__":
    run_main(main)
