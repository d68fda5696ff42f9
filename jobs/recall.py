"""Evidence recall@k of evidence methods (the papers' Exp-2), as a table and JSON.

    python -m jobs.recall --benchmark locomo --source ../shared/datasets/locomo/locomo10_dev.json \\
        --methods bm25,dense,hybrid,bm25_expand,naive_rag,tmem_reranked,tmem_global \\
        --k 5,10,20,36,48 --out recall.json

Recall is defined in `tmem_core.methods.evidence_recall_at_k`; any method registered as
`ranked` can be scored.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from jobs._cli import (
    add_benchmark_args,
    add_method_args,
    load_benchmark,
    method_tables,
    run_main,
)
from tmem_core.benchmarks import PreparedBenchmark
from tmem_core.evaluation import RecallTable
from tmem_core.methods import evidence_recall_at_k, method_names
from tmem_core.retrieval import conversations_from_table
from tmem_core.schema import gold_from_table, questions_from_table

DEFAULT_METHODS = "bm25,dense,hybrid,bm25_expand,naive_rag,tmem_reranked,tmem_global"


def main() -> int:
    args = _parser().parse_args()
    prepared = load_benchmark(args)
    table = evaluate(prepared, args)
    print_table(table, args.k)
    if args.out:
        args.out.write_text(json.dumps(table.to_json(), indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.recall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_benchmark_args(parser)
    parser.add_argument("--methods", type=_names, default=_names(DEFAULT_METHODS),
                        help=f"comma-separated, from {', '.join(method_names(ranked=True))}")
    parser.add_argument("--k", type=_ints, default=_ints("5,10,20,36,48"),
                        help="comma-separated Top-k (each method's top_k: messages kept, "
                             "T-MEM's anchors)")
    add_method_args(parser, budget=False)
    parser.add_argument("--conversations", type=_names, help="only these conversation ids")
    parser.add_argument("--out", type=Path, help="write the JSON here")
    return parser


def evaluate(prepared: PreparedBenchmark, args: argparse.Namespace) -> RecallTable:
    """Recall of every method at every k over the scorable questions."""
    questions = [q for q in questions_from_table(prepared.questions)
                 if not args.conversations or q.conv_id in args.conversations]
    params = method_tables(args, args.methods)
    return evidence_recall_at_k(questions, gold_from_table(prepared.questions),
                                conversations_from_table(prepared.messages), args.methods,
                                args.k, params)


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
