"""Inspect one question under a context method: what it found, what it chose, what it built.

    python -m jobs.inspect --benchmark synthetic --size 2000 --variant native-revisions \\
        --qid syn-0-0:q00000 --method tmem
    python -m jobs.inspect --benchmark locomo \\
        --source ../shared/datasets/locomo/locomo10_dev.json --qid conv-26:q0 --budget 1024

Every registered method can be inspected; what is shown is the method's own `show` (for
T-MEM: anchors, intervals, candidates with their KEY/SUPPORT labels, the forest as a tree,
the linearised context and its token count, LLM usage per step; for T2Mem: the loop's steps).
The gold answer and evidence are printed last, for the reader only.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Mapping

from jobs._cli import (
    add_benchmark_args,
    add_method_args,
    load_benchmark,
    method_tables,
    run_main,
)
from tmem_core import DataError
from tmem_core.llm import count_tokens, open_client
from tmem_core.methods import LLM, ContextMethod, MethodEnv, Show, get_method, method_names
from tmem_core.retrieval import Conversation, IndexStore, conversations_from_table
from tmem_core.schema import Gold, Question, gold_from_table, questions_from_table


def main() -> int:
    args = _parser().parse_args()
    prepared = load_benchmark(args)
    questions = {q.qid: q for q in questions_from_table(prepared.questions)}
    if args.qid not in questions:
        raise DataError(f"no question {args.qid!r}; for example: {', '.join(list(questions)[:5])}")
    spec = get_method(args.method, key="--method")
    params = method_tables(args, [args.method]).get(args.method, {})
    conversations = conversations_from_table(prepared.messages)
    store = IndexStore(conversations)
    method = spec.create(MethodEnv(conversations, args.top_k, args.budget, store), params)
    with open_client(args.backbone) as llm:
        print(report(questions[args.qid], method, spec.show, llm, args.budget, conversations))
    print(gold_lines(gold_from_table(prepared.questions)[args.qid]))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.inspect", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_benchmark_args(parser)
    parser.add_argument("--qid", required=True, help="the question to inspect")
    parser.add_argument("--method", default="tmem", help=f"one of {', '.join(method_names())}")
    parser.add_argument("--backbone", default="smollm2", help="LLM backbone of the method")
    parser.add_argument("--top-k", type=int, default=36,
                        help="the retrieval depth (a sweep's grid.top_k; T-MEM: anchors; "
                             "baselines: messages kept; external systems: items recalled)")
    add_method_args(parser)
    return parser


def report(question: Question, method: ContextMethod, show: Show, llm: LLM, budget: int,
           conversations: Mapping[str, Conversation]) -> str:
    """Run the method on one question and describe every step."""
    prepare: Callable[[str, LLM], object] | None = getattr(method, "prepare", None)
    if prepare is not None:  # offline memory first (T2Mem's metadata; cached on disk)
        prepare(question.conv_id, llm)
    evidence = method.retrieve(question)
    context = method.construct(question, evidence, llm,
                               functools.partial(count_tokens, llm.backbone))
    messages = {m.msg_id: m for m in conversations[question.conv_id].messages}
    head = (f"== {question.qid} [{question.category}] {question.question}"
            f"{f' (asked by {question.asking_user})' if question.asking_user else ''}"
            f" -- {method.name}, {llm.backbone.name}, budget {budget} tokens")
    return f"{head}\n{show(evidence, context, messages)}"


def gold_lines(gold: Gold) -> str:
    return (f"== gold (for the reader; never given to the method): {gold.answer!r}; "
            f"evidence {' '.join(gold.evidence_ids) or '-'}")


if __name__ == "__main__":
    run_main(main)
