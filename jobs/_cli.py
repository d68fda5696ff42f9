"""Shared command-line plumbing: benchmark source options and one-line error exits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tmem_core.benchmarks import LoadRequest, benchmark_names
from tmem_core.llm import BackboneConfig, ConfigError, get_backbone
from tmem_core.schema import DataError


def add_source_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--benchmark", required=required,
                        help=f"one of {', '.join(benchmark_names())}")
    parser.add_argument("--source", type=Path, help="the benchmark's native file or folder")
    parser.add_argument("--size", type=int, default=2000, help="synthetic: number of messages")
    parser.add_argument("--seed", type=int, default=0, help="synthetic: random seed")
    parser.add_argument("--variant", default="base",
                        help="synthetic: base, native-revisions, no-metadata, interleaved[=N] "
                             "(join with '+'); evermembench: the upstream shape, eval or "
                             "dynamic (default: detected from the files)")


def add_backbone_args(parser: argparse.ArgumentParser, default: str | None, role: str) -> None:
    parser.add_argument("--backbone", "--writer" if role == "writer" else "--filter",
                        dest="backbone", default=default, help=f"the {role}'s backbone")
    parser.add_argument("--backbones-file", type=Path, help="TOML/YAML file adding backbones")


def backbone_of(args: argparse.Namespace) -> BackboneConfig:
    """The backbone named by `--backbone` (from `--backbones-file` or the built-ins)."""
    try:
        return get_backbone(args.backbone, args.backbones_file)
    except ConfigError as exc:
        raise DataError(str(exc)) from None


def load_request(args: argparse.Namespace) -> LoadRequest:
    return LoadRequest(source=args.source, size=args.size, seed=args.seed, variant=args.variant)


def run_main(main: Callable[[], int]) -> None:
    """Run a job; bad input ends with one clear error line and exit status 2."""
    try:
        code = main()
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 2
    sys.exit(code)
