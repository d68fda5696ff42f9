"""Exp-2's evidence annotation of a prepared benchmark (evaluation side: reads gold answers).

    python -m jobs.annotate --benchmark locomo --source PATH/locomo10.json \\
        --out results/annotation/locomo --backbone smollm2 [--depth 20] [--conversations conv-30]
    python -m jobs.view --audit results/annotation/locomo     # accept or reject the doubtful
    python -m jobs.annotate --apply results/annotation/locomo  # the variant with the decisions
    python -m jobs.annotate --benchmark locomo --source PATH --coverage  # no filter, no files

For each non-abstention question: reverse retrieval from its gold answer ("<question> <answer>",
the first `--depth` messages of `--retrieval`, by default BM25's and the dense retriever's
rankings pooled in turn), the backbone's filter labels each candidate ANSWER (answer-bearing
unit), BRIDGE (anchor unit) or NONE, and a confidence per unit decides whether it is
accepted, audited or rejected (`tmem_core/annotation/_units.py`). Units of one question that
establish the same claim form one group of interchangeable alternatives, at most
`--max-groups` groups required per question (`tmem_core/annotation/_groups.py`); the audit
page decides units or whole groups. The folder gets
`units.jsonl`, `low_confidence.jsonl` (what a person audits), `annotation.json` (settings, LLM
calls and tokens, and, when the base has evidence of its own, the coverage of reverse retrieval
at depths 10/20/50/100 and the precision and recall of the accepted units against it) and
`prepared/`, the new prepared variant (the base is never changed). `--apply` rewrites
`prepared/` with the audit's decisions (per unit and per group), without calling the backbone
again. `--coverage` only prints the coverage of reverse retrieval (`--retrieval`, or `all` of
them) against the base's own evidence at each depth (per conversation and overall), calling
no backbone and writing nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from jobs._cli import (
    add_backbone_args,
    add_benchmark_args,
    backbone_of,
    load_request,
    run_main,
)
from tmem_core import DataError
from tmem_core.annotation import (
    AUDIT_FILE,
    COVERAGE_DEPTHS,
    PREPARED_DIR,
    RETRIEVERS,
    SETTINGS_FILE,
    AnnotateConfig,
    Retriever,
    annotatable,
    annotate,
    annotated_variant,
    coverage,
    precision_recall,
    read_audit,
    read_units,
    write_units,
)
from tmem_core.benchmarks import (
    LoadRequest,
    PreparedBenchmark,
    build,
    read_prepared,
    tables_sha256,
    write_prepared,
)
from tmem_core.llm import open_client
from tmem_core.retrieval import IndexStore, conversations_from_table
from tmem_core.schema import gold_from_table, questions_from_table


def main() -> int:
    args = _parser().parse_args()
    if args.apply:
        return apply_audit(args.apply)
    if args.benchmark is None and args.prepared is None:
        raise DataError("a benchmark is needed: --prepared DIR, or --benchmark NAME "
                        "[--source PATH]")
    base_request = _base_request(args)
    base = _read_base(base_request)
    if args.coverage:
        kinds = RETRIEVERS if args.retrieval == "all" else (args.retrieval,)
        return max(print_coverage(base, args.conversations, kind) for kind in kinds)
    if args.out is None:
        raise DataError("annotating needs --out FOLDER")
    if args.prepared is not None and args.out.resolve() == args.prepared.resolve():
        raise DataError("--out must differ from --prepared: the base is never changed",
                        file=str(args.out))
    gold = gold_from_table(base.questions)
    questions = [q for q in annotatable(questions_from_table(base.questions), gold)
                 if not args.conversations or q.conv_id in args.conversations][:args.limit]
    if not questions:
        raise DataError("no non-abstention question with a gold answer to annotate")
    store = IndexStore(conversations_from_table(base.messages))
    started = time.perf_counter()
    backbone = backbone_of(args)
    with open_client(backbone) as llm:
        done = annotate(store, questions, gold, llm, AnnotateConfig(
            args.depth, args.batch, "pooled" if args.retrieval == "all" else args.retrieval,
            args.max_groups))
    args.out.mkdir(parents=True, exist_ok=True)
    write_units(args.out, done.units)
    settings = {**done.stats, "backbone": backbone.name, "model": backbone.model,
                "base_request": base_request,
                "base_sha256": tables_sha256(base.messages, base.questions),
                "wall_s": round(time.perf_counter() - started, 1)}
    if any(gold[q.qid].evidence_ids for q in questions):
        settings["reference"] = {"coverage": coverage(store, questions, gold,
                                                      kind=done.stats["retrieval"])}
    (args.out / SETTINGS_FILE).write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    return apply_audit(args.out)


def apply_audit(folder: Path) -> int:
    """Write `<folder>/prepared` from its units and the audit's decisions; print the figures."""
    settings = json.loads(_settings_file(folder).read_text())
    base = _read_base(settings["base_request"])
    if tables_sha256(base.messages, base.questions) != settings["base_sha256"]:
        raise DataError("the base benchmark changed since it was annotated; annotate it again",
                        file=str(folder / SETTINGS_FILE))
    units = read_units(folder)
    decisions = read_audit(folder)
    audit = folder / AUDIT_FILE
    recorded = {k: v for k, v in settings.items() if k not in ("base_request", "reference")}
    variant = annotated_variant(base, units, decisions, recorded,
                                audit if audit.is_file() else None)
    gold = gold_from_table(base.questions)
    if "reference" in settings:
        settings["reference"]["accepted"] = precision_recall(units, decisions, gold)
        (folder / SETTINGS_FILE).write_text(json.dumps(settings, indent=2, sort_keys=True)
                                            + "\n")
    write_prepared(variant, folder / PREPARED_DIR)
    print_summary(folder, variant, settings)
    return 0


def print_coverage(base: PreparedBenchmark, conversations: list[str] | None,
                   kind: Retriever) -> int:
    """Reverse retrieval's coverage of the base's own evidence, per conversation and in all."""
    gold = gold_from_table(base.questions)
    questions = [q for q in annotatable(questions_from_table(base.questions), gold)
                 if gold[q.qid].evidence_ids and (not conversations or q.conv_id in conversations)]
    if not questions:
        raise DataError("no annotatable question with evidence of its own to measure against")
    store = IndexStore(conversations_from_table(base.messages))
    groups = {c: [q for q in questions if q.conv_id == c]
              for c in dict.fromkeys(q.conv_id for q in questions)}
    print(f"{kind} reverse-retrieval coverage of the base's evidence ({len(questions)} "
          f"questions)")
    for name, group in [*groups.items(), ("all", questions)]:
        shares = coverage(store, group, gold, kind=kind)
        print(f"  {name:<12} {len(group):>5} questions  " + "  ".join(
            f"@{d} {shares[str(d)]:.3f}" for d in COVERAGE_DEPTHS))
    return 0


def print_summary(folder: Path, variant: PreparedBenchmark, settings: dict[str, Any]) -> None:
    facts = variant.manifest["annotation"]
    print(f"annotated {facts['questions_annotated']} questions with {settings['backbone']} "
          f"(depth {settings['depth']}): {settings['calls']} calls "
          f"({settings['failed_calls']} failed, {settings['cached_calls']} cached), "
          f"{settings['prompt_tokens']} + {settings['completion_tokens']} tokens")
    for error in settings.get("errors", []):
        print(f"  filter error: {error}")
    units = facts["units"]
    print(f"  units: {units['accepted']} accepted, {units['audit']} to audit "
          f"({facts['audit']['decided']} decided in {AUDIT_FILE}), {units['rejected']} rejected;"
          f" {facts['questions_with_units']} questions with accepted units")
    grouped = facts["groups"]
    print(f"  groups: {grouped['required']} required ({grouped['required_units']} units, at "
          f"most {grouped['max_groups']} a question), {grouped['capped']} capped; "
          f"{facts['audit']['group_decisions']} group decisions")
    reference = settings.get("reference")
    if reference:
        print("  reference evidence (the base's own): reverse-retrieval coverage "
              + ", ".join(f"@{d} {v:.3f}" for d, v in sorted(reference["coverage"].items(),
                                                             key=lambda kv: int(kv[0]))))
        accepted = reference["accepted"]
        print(f"  accepted units vs reference: precision {accepted['precision']:.3f}, recall "
              f"{accepted['recall']:.3f} ({accepted['accepted']} accepted, "
              f"{accepted['reference']} reference units, {accepted['questions']} questions)")
    print(f"  -> {folder / PREPARED_DIR}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.annotate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_benchmark_args(parser, required=False)
    parser.add_argument("--out", type=Path, help="the annotation folder")
    add_backbone_args(parser, "smollm2", "filter")
    parser.add_argument("--depth", type=int, default=AnnotateConfig.depth,
                        help="reverse-retrieval candidates per question")
    parser.add_argument("--batch", type=int, default=AnnotateConfig.batch,
                        help="candidates per filter request")
    parser.add_argument("--retrieval", choices=[*RETRIEVERS, "all"],
                        default=AnnotateConfig.retrieval,
                        help="reverse retriever (all: --coverage of each)")
    parser.add_argument("--max-groups", type=int, default=AnnotateConfig.max_groups,
                        help="evidence groups a question requires at most")
    parser.add_argument("--conversations", type=lambda t: [c for c in t.split(",") if c],
                        help="only these conversation ids")
    parser.add_argument("--limit", type=int, help="the first N questions only")
    parser.add_argument("--apply", type=Path, metavar="FOLDER",
                        help="rewrite FOLDER/prepared with the audit's decisions")
    parser.add_argument("--coverage", action="store_true",
                        help="only print reverse retrieval's coverage of the base's evidence")
    return parser


def _base_request(args: argparse.Namespace) -> dict[str, Any]:
    if args.prepared is not None:
        return {"prepared": str(args.prepared.resolve())}
    request = load_request(args)
    return {"benchmark": args.benchmark, "source": str(request.source.resolve())
            if request.source else None, "size": request.size, "seed": request.seed,
            "variant": request.variant}


def _read_base(request: dict[str, Any]) -> PreparedBenchmark:
    if "prepared" in request:
        return read_prepared(Path(request["prepared"]))
    source = Path(request["source"]) if request["source"] else None
    return build(request["benchmark"], LoadRequest(source=source, size=request["size"],
                                                   seed=request["seed"],
                                                   variant=request["variant"]))


def _settings_file(folder: Path) -> Path:
    path = folder / SETTINGS_FILE
    if not path.is_file():
        raise DataError("not an annotation folder (no annotation.json); run jobs.annotate "
                        "first", file=str(path))
    return path


if __name__ == "__main__":
    run_main(main)
