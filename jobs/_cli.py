"""Shared command-line plumbing: benchmark source options, a job's backbone, the methods'
Top-k, budget and parameters (checked as a sweep's are), and one-line error exits."""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmem_core import ConfigError, TmemError, check_range
from tmem_core.benchmarks import (
    LoadRequest,
    PreparedBenchmark,
    benchmark_names,
    build,
    read_prepared,
)
from tmem_core.llm import BackboneConfig, check_tokenizers, get_backbone, load_backbones
from tmem_core.methods import check_params

if TYPE_CHECKING:  # the pipeline imports Ray: not at every job's start
    from tmem_core.pipeline import SweepConfig


def add_benchmark_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """A benchmark's source flags, or `--prepared` (see `load_benchmark`)."""
    add_source_args(parser, required)
    parser.add_argument("--prepared", type=Path, help="read a prepared folder instead")


def add_source_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--benchmark", required=required,
                        help=f"one of {', '.join(benchmark_names())}")
    parser.add_argument("--source", type=Path, help="the benchmark's native file or folder")
    parser.add_argument("--size", type=int, default=2000, help="synthetic: number of messages")
    parser.add_argument("--seed", type=int, default=0, help="synthetic: random seed")
    parser.add_argument("--variant", default="base",
                        help="synthetic: base, native-revisions, no-metadata, interleaved[=N]; "
                             "any benchmark: revisions=N (N = 1, 2 or 3: Exp-5's revision "
                             "chains from templates) (join with '+'); evermembench: the "
                             "upstream shape, eval or dynamic (default: detected from the "
                             "files)")


def add_backbone_args(parser: argparse.ArgumentParser, default: str | None, role: str) -> None:
    parser.add_argument("--backbone", "--writer" if role == "writer" else "--filter",
                        dest="backbone", default=default, help=f"the {role}'s backbone")
    parser.add_argument("--backbones-file", type=Path, help="TOML/YAML file adding backbones")


def check_sweep_tokenizers(config: SweepConfig) -> None:
    """Every backbone the sweep calls counts with its own tokenizer here (`ConfigError`,
    a `ConfigError`, naming the first that cannot be loaded), before anything starts."""
    backbones = load_backbones(config.backbones_file)
    check_tokenizers(backbones[name] for name in config.backbone_names)


def backbone_of(args: argparse.Namespace) -> BackboneConfig:
    """The backbone named by `--backbone` (from `--backbones-file` or the built-ins)."""
    return get_backbone(args.backbone, args.backbones_file)


def add_method_args(parser: argparse.ArgumentParser, budget: bool = True) -> None:
    if budget:
        parser.add_argument("--budget", type=int, default=8192,
                            help="the context's token budget (a sweep's grid.budget)")
    parser.add_argument("--param", action="append", default=[], metavar="METHOD.KEY=VALUE",
                        help="a method parameter, as in a sweep's [methods.<name>] table (a "
                             "TOML value; nested keys joined by dots); repeatable")


def method_tables(args: argparse.Namespace, methods: Sequence[str]) -> dict[str, Any]:
    """The `--param` flags as a sweep's `[methods.<name>]` tables, checked as a sweep's are;
    `--budget` and the Top-k flags must be positive."""
    for flag, value in (("--budget", getattr(args, "budget", 1)),
                        ("--top-k", getattr(args, "top_k", 1)),
                        *(("--k", k) for k in getattr(args, "k", []))):
        check_range(flag, value, key=flag)
    tables: dict[str, Any] = {}
    for item in args.param:
        key, equals, value = item.partition("=")
        name, *path = key.split(".")
        if not equals or not path:
            raise ConfigError("--param", f"expected METHOD.KEY=VALUE, got {item!r}")
        table = tables.setdefault(name, {})
        for part in path[:-1]:
            table = table.setdefault(part, {})
        table[path[-1]] = _toml_value(value)
    check_params(tables, methods)
    return tables


def _toml_value(text: str) -> Any:
    """A TOML value (`3`, `true`, `"global"`); a bare word is a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_request(args: argparse.Namespace) -> LoadRequest:
    return LoadRequest(source=args.source, size=args.size, seed=args.seed, variant=args.variant)


def load_benchmark(args: argparse.Namespace) -> PreparedBenchmark:
    """The `--prepared` folder, else the benchmark built from its source flags."""
    return (read_prepared(args.prepared) if args.prepared
            else build(args.benchmark, load_request(args)))


def run_main(main: Callable[[], int]) -> None:
    """Run a job; any of tmem-eval's errors (config, data, engine, results: `TmemError`) ends
    it with one `error: ...` line and exit status 2."""
    try:
        code = main()
    except TmemError as exc:
        code = report_error(exc)
    sys.exit(code)


def report_error(exc: TmemError, where: str = "") -> int:
    """Print the job's one error line (`where`: what it concerns, e.g. one of several config
    files); the exit status of a job that ends on it."""
    print(f"error: {where + ': ' if where else ''}{exc}", file=sys.stderr)
    return 2
