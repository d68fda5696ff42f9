"""Evidence recall@k of evidence methods (the papers' Exp-2), as a table and JSON.

    python -m jobs.recall --benchmark locomo --source ../shared/datasets/locomo/locomo10_dev.json \\
        --methods bm25,dense,hybrid,bm25_expand,naive_rag,tmem_candidates,tmem_heuristic \\
        --k 5,10,20,36,48 --out recall.json
    python -m jobs.recall --benchmark locomo --source ../shared/datasets/locomo/locomo10_dev.json \\
        --methods tmem,tmem_reranked,tmem_global --backbone smollm2 --conversations conv-26

Recall is defined in `tmem_core.methods.evidence_recall_at_k`; any method registered as
`ranked` can be scored without an LLM; T-MEM's configurations (`tmem`, `tmem_reranked`,
`tmem_global`, ...) select their evidence with the `--backbone` given.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from jobs._cli import (
    add_benchmark_args,
    add_method_args,
    backbone_of,
    load_benchmark,
    method_tables,
    run_main,
)
from tmem_core.benchmarks import PreparedBenchmark
from tmem_core.evaluation import RecallTable
from tmem_core.llm import open_client
from tmem_core.methods import LLM, evidence_recall_at_k, method_label, method_names
from tmem_core.retrieval import conversations_from_table
from tmem_core.schema import gold_from_table, questions_from_table

DEFAULT_METHODS = "bm25,dense,hybrid,bm25_expand,naive_rag,tmem_candidates,tmem_heuristic"


def main() -> int:
    args = _parser().parse_args()
    prepared = load_benchmark(args)
    if args.backbone is None:
        table = evaluate(prepared, args, None)
    else:
        with open_client(backbone_of(args)) as llm:
            table = evaluate(prepared, args, llm)
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
                        help=f"comma-separated, from {', '.join(method_names(ranked=True))}; "
                             f"with --backbone also T-MEM's (tmem, tmem_reranked, tmem_global, "
                             f"...)")
    parser.add_argument("--k", type=_ints, default=_ints("5,10,20,36,48"),
                        help="comma-separated Top-k (each method's top_k: messages kept, "
                             "T-MEM's anchors)")
    add_method_args(parser, budget=False)
    parser.add_argument("--backbone", help="the backbone T-MEM's configurations select "
                                           "evidence with (needed for them only)")
    parser.add_argument("--backbones-file", type=Path, help="TOML/YAML file adding backbones")
    parser.add_argument("--conversations", type=_names, help="only these conversation ids")
    parser.add_argument("--limit", type=int, help="only the first N questions (of those)")
    parser.add_argument("--out", type=Path, help="write the JSON here")
    return parser


def evaluate(prepared: PreparedBenchmark, args: argparse.Namespace,
             llm: LLM | None) -> RecallTable:
    """Recall of every method at every k over the scorable questions."""
    questions = [q for q in questions_from_table(prepared.questions)
                 if not args.conversations or q.conv_id in args.conversations][:args.limit]
    params = method_tables(args, args.methods)
    return evidence_recall_at_k(questions, gold_from_table(prepared.questions),
                                conversations_from_table(prepared.messages), args.methods,
                                args.k, params, llm=llm)


def print_table(table: RecallTable, ks: list[int]) -> None:
    counts = table.question_counts()
    print(f"evidence recall@k over {sum(counts.values())} questions")
    print(f"{'method':<36}" + "".join(f"{'@' + str(k):>8}" for k in ks))
    for method, by_k in table.overall().items():
        print(f"{method_label(method):<36}" + "".join(f"{by_k[k]:>8.3f}" for k in ks))


def _names(text: str) -> list[str]:
    return [t for t in (s.strip() for s in text.split(",")) if t]


def _ints(text: str) -> list[int]:
    try:
        return sorted({int(t) for t in _names(text)})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {text!r}") from None


if __name__ == "__main__":
    run_main(main)
