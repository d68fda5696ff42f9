"""Exp-5's revision chains injected into a copy of a prepared benchmark (the original is never
changed): for each Knowledge Update question with gold evidence, 1 to N revisions (N = the
condition; the counts spread evenly, 2.0 / 2.5 / 3.0 injected messages per question) then a
rollback to the original state.

    python -m jobs.inject --prepared datasets/prepared/groupmembench-annotated --condition 2 \\
        --out datasets/prepared/groupmembench-revisions-2 [--writer deepseek-v4-flash]

Texts come from templates unless `--writer` names a backbone to write them (the paper's were
LLM-written); its calls are counted and a chain it fails to write falls back to templates
(listed in the manifest). A synthetic set needs no folder: `--variant revisions=2` of
`jobs.prepare` (or a sweep's benchmark `variant`) builds the same thing from templates.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from jobs._cli import add_backbone_args, backbone_of, run_main
from jobs.prepare import print_summary
from tmem_core import DataError
from tmem_core.benchmarks import PreparedBenchmark, read_prepared, with_revisions, write_prepared
from tmem_core.benchmarks._revisions import CONDITIONS, LLMWriter, TemplateWriter, Writer
from tmem_core.llm import open_client


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.inject", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepared", type=Path, required=True, help="the base benchmark")
    parser.add_argument("--condition", type=int, required=True, choices=CONDITIONS,
                        help="at most this many revisions per question")
    parser.add_argument("--out", type=Path, required=True, help="the new prepared folder")
    add_backbone_args(parser, None, "writer")
    parser.add_argument("--seed", type=int, default=0, help="seed of every draw")
    args = parser.parse_args()
    if args.out.resolve() == args.prepared.resolve():
        raise DataError("--out must differ from --prepared: the base is never changed",
                        file=str(args.out))
    base = read_prepared(args.prepared)
    started = time.perf_counter()
    if args.backbone is None:
        write(base, args, TemplateWriter(args.seed))
    else:
        backbone = backbone_of(args)
        with open_client(backbone) as llm:
            write(base, args, LLMWriter(llm, backbone.name, args.seed))
    print_summary(args.out, time.perf_counter() - started)
    return 0


def write(base: PreparedBenchmark, args: argparse.Namespace, writer: Writer) -> None:
    write_prepared(with_revisions(base, args.condition, args.seed, writer), args.out)


if __name__ == "__main__":
    run_main(main)
