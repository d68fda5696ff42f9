"""A sweep's data: each benchmark prepared once (named by what it is made from) and each
run's choice of its questions."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tmem_core import ConfigError
from tmem_core.benchmarks import LoadRequest, content_identity, prepare, read_prepared
from tmem_core.benchmarks._prepare import prepared_variant
from tmem_core.pipeline._config import BenchmarkConfig


def prepare_benchmark(bench: BenchmarkConfig, data_root: Path) -> Path:
    """The prepared folder of a benchmark: given, or prepared once under the sweep, named by
    what it is made from (`content_identity`: the source's content, not its path, and the
    adapter's version), so that a changed source is prepared again."""
    if bench.prepared:  # as it is, or its revisions=N variant, made once
        return prepared_variant(Path(bench.prepared), bench.variant, bench.seed, data_root)
    request = LoadRequest(source=Path(bench.source) if bench.source else None,
                          size=bench.size, seed=bench.seed, variant=bench.variant)
    identity = content_identity(bench.name, request)
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    folder = f"{bench.name}-{digest}"
    target = data_root / folder
    if not (target / "manifest.json").exists():
        prepare(bench.name, request, data_root, folder=folder)
    return target


def select_questions(bench_dir: Path, bench: BenchmarkConfig) -> list[tuple[str, str]]:
    """(qid, conv_id) of the run: category filter (a category the benchmark does not have
    is refused), then the first `limit` round-robin over
    categories (so a small limit still covers every category), or with `spread =
    "conversation"` round-robin over conversations, each in that order."""
    table = read_prepared(bench_dir).questions.select(["qid", "conv_id", "category"])
    rows = sorted(table.to_pylist(), key=lambda r: r["qid"])
    known = {r["category"] for r in rows}
    if unknown := sorted(set(bench.categories) - known):
        raise ConfigError("benchmarks.categories", f"{bench.name} has no question of type "
                          f"{', '.join(unknown)}; its types: {', '.join(sorted(known))}")
    if bench.categories:
        rows = [r for r in rows if r["category"] in bench.categories]
    ordered = _round_robin(rows, "category")
    if bench.spread == "conversation":
        ordered = _round_robin(ordered, "conv_id")
    chosen = ordered[: bench.limit] if bench.limit else ordered
    return [(r["qid"], r["conv_id"]) for r in chosen]


def _round_robin(rows: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    """`rows` taken one per value of `column` in turn (values in sorted order), keeping the
    order of each value's rows."""
    rank: Counter[str] = Counter()
    ranked = []
    for index, row in enumerate(rows):
        ranked.append((rank[row[column]], row[column], index, row))
        rank[row[column]] += 1
    return [row for *_, row in sorted(ranked, key=lambda r: r[:3])]


def data_facts(manifest: dict[str, Any], bench_dir: Path) -> dict[str, Any]:
    """What a run's contract says of its prepared data."""
    return {"dir": str(bench_dir), "source": manifest.get("source"),
            "messages": manifest.get("messages"), "questions": manifest.get("questions"),
            "schema_version": manifest.get("schema_version")}
