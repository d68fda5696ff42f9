"""Turn an adapter's output into validated canonical Parquet, written atomically."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tmem_core import DataError, __version__
from tmem_core.benchmarks._opaque import opaque_ids
from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, get_benchmark
from tmem_core.benchmarks._revisions import (
    MANIFEST_KEY,
    VERSION,
    Writer,
    inject_revisions,
    split_condition,
)
from tmem_core.benchmarks._source import sha256_of
from tmem_core.schema import (
    SCHEMA_VERSION,
    messages_to_table,
    questions_to_table,
    validate_tables,
)

DEFAULT_OUT = Path("datasets/prepared")
MESSAGES_FILE = "messages.parquet"
QUESTIONS_FILE = "questions.parquet"
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class PreparedBenchmark:
    """Canonical tables of one benchmark, as written by `prepare` (or built in memory)."""

    name: str
    messages: pa.Table
    questions: pa.Table
    manifest: dict[str, Any]


def build(name: str, request: LoadRequest) -> PreparedBenchmark:
    """Load with the registered adapter, convert and validate; write nothing. A variant with
    `revisions=N` (any benchmark) is the base with Exp-5's revision chains injected."""
    variant, condition = split_condition(request.variant)
    request = dataclasses.replace(request, variant=variant)
    spec = get_benchmark(name)
    if spec.needs_source and request.source is None:
        raise DataError(f"benchmark {name!r} needs --source PATH")
    if request.source is not None and not request.source.exists():
        raise DataError("no such file or directory", file=str(request.source))
    loaded = opaque_ids(spec.loader(request))
    source_label = str(request.source) if request.source else f"generated:{name}"
    messages = messages_to_table(loaded.messages)
    questions = questions_to_table(loaded.questions)
    validate_tables(messages, questions, source=source_label)
    prepared = PreparedBenchmark(name, messages, questions,
                                 _manifest(name, request, loaded, messages, questions))
    return with_revisions(prepared, condition, request.seed) if condition else prepared


def with_revisions(prepared: PreparedBenchmark, condition: int, seed: int = 0,
                   writer: Writer | None = None) -> PreparedBenchmark:
    """A copy of `prepared` with Exp-5's revision chains (`benchmarks/_revisions.py`); its
    manifest keeps the base's and records the chains and where the base came from."""
    if MANIFEST_KEY in prepared.manifest:
        raise DataError(f"{prepared.name}: already holds revision chains; inject into its base")
    done = inject_revisions(prepared.name, prepared.messages, prepared.questions, condition,
                            seed, writer)
    base = {"messages": prepared.manifest.get("messages"),
            "source": prepared.manifest.get("source"),
            "sha256": tables_sha256(prepared.messages, prepared.questions)}
    manifest = {**prepared.manifest, "messages": done.messages.num_rows,
                MANIFEST_KEY: {**done.facts, "base": base}}
    counts = Counter(done.messages.column("conv_id").to_pylist())
    manifest["conversations"] = {conv: {**facts, "messages": counts[conv]}
                                 for conv, facts in prepared.manifest["conversations"].items()}
    return PreparedBenchmark(prepared.name, done.messages, done.questions, manifest)


def tables_sha256(*tables: pa.Table) -> str:
    """A digest of tables' contents (their rows as JSON, column names included): the same for
    a table built in memory and read back from Parquet."""
    digest = hashlib.sha256()
    for table in tables:
        digest.update(json.dumps(table.column_names).encode())
        for row in table.to_pylist():
            digest.update(json.dumps(row, default=str, sort_keys=True).encode())
    return digest.hexdigest()


def content_identity(name: str, request: LoadRequest) -> dict[str, Any]:
    """What a prepared copy of `request` is made from: the adapter (and its version), the
    source's content (never its path) or the generator's parameters, and the variant."""
    identity: dict[str, Any] = {"benchmark": name, "adapter_version": get_benchmark(name).version,
                                "size": request.size, "seed": request.seed,
                                "variant": request.variant}
    if split_condition(request.variant)[1]:
        identity["revisions_version"] = VERSION
    if request.source is not None:
        if not request.source.exists():
            raise DataError("no such file or directory", file=str(request.source))
        identity["source_sha256"] = sha256_of(_source_files(request.source))
    return identity


def _source_files(source: Path) -> list[Path]:
    return [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())


def prepared_variant(base: Path, variant: str, seed: int, out_root: Path) -> Path:
    """A prepared folder as a sweep asks for it: `base` itself, or its `revisions=N` variant
    (the only one a prepared base takes), written once under `out_root` in a folder named by
    the base's tables' content, the variant, the seed and the injection's version."""
    prepared = read_prepared(base)  # fails clearly when it is not one
    rest, condition = split_condition(variant)
    if rest != "base":
        raise DataError(f"variant {variant!r}: a prepared benchmark takes only revisions=N "
                        f"(prepare the other variants from its source)", file=str(base))
    if not condition:
        return base
    identity = {"base_sha256": sha256_of([base / MESSAGES_FILE, base / QUESTIONS_FILE]),
                "variant": variant, "seed": seed, "revisions_version": VERSION}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    target = out_root / f"{prepared.name}-{base.name}-{digest}"
    if not (target / MANIFEST_FILE).exists():
        write_prepared(with_revisions(prepared, condition, seed), target)
    return target


def prepare(name: str, request: LoadRequest, out_root: Path = DEFAULT_OUT,
            folder: str | None = None) -> Path:
    """Build and write `<out_root>/<folder>/{messages,questions}.parquet` + manifest
    (default folder: `variant_folder`)."""
    prepared = build(name, request)
    target = out_root / (folder or variant_folder(name, request.variant))
    write_prepared(prepared, target)
    return target


def variant_folder(name: str, variant: str) -> str:
    """A prepared set's default folder: the benchmark's name, with its variant unless it is
    the base (`synthetic-interleaved-3-revisions-2`), so a variant never replaces its base."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", variant).strip("-")
    return name if variant == "base" or not slug else f"{name}-{slug}"


def write_prepared(prepared: PreparedBenchmark, target: Path) -> None:
    """Write to a temporary sibling directory, then swap it in: never half-written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        pq.write_table(prepared.messages, tmp / MESSAGES_FILE)
        pq.write_table(prepared.questions, tmp / QUESTIONS_FILE)
        (tmp / MANIFEST_FILE).write_text(json.dumps(prepared.manifest, indent=2, sort_keys=True)
                                         + "\n")
        _swap_in(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(tmp: Path, target: Path) -> None:
    if not target.exists():
        os.rename(tmp, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    os.rename(target, old / "x")
    os.rename(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def read_prepared(directory: Path) -> PreparedBenchmark:
    """Read a prepared benchmark directory (gold columns included: callers project them)."""
    for name in (MESSAGES_FILE, QUESTIONS_FILE, MANIFEST_FILE):
        if not (directory / name).exists():
            raise DataError(f"not a prepared benchmark (missing {name}); run jobs.prepare first",
                            file=str(directory))
    manifest = json.loads((directory / MANIFEST_FILE).read_text())
    return PreparedBenchmark(
        manifest["benchmark"],
        pq.read_table(directory / MESSAGES_FILE),
        pq.read_table(directory / QUESTIONS_FILE),
        manifest,
    )


def _manifest(name: str, request: LoadRequest, loaded: LoadedBenchmark, messages: pa.Table,
              questions: pa.Table) -> dict[str, Any]:
    msg_counts = Counter(messages.column("conv_id").to_pylist())
    q_counts = Counter(questions.column("conv_id").to_pylist())
    manifest: dict[str, Any] = {
        "benchmark": name,
        "schema_version": SCHEMA_VERSION,
        "tmem_eval_version": __version__,
        "messages": messages.num_rows,
        "questions": questions.num_rows,
        "conversations": {
            conv: {"messages": msg_counts[conv], "questions": q_counts.get(conv, 0)}
            for conv in sorted(msg_counts)
        },
        "categories": dict(sorted(Counter(questions.column("category").to_pylist()).items())),
        "answer_kinds": dict(sorted(Counter(questions.column("answer_kind").to_pylist()).items())),
        "warnings": loaded.warnings,
        "repairs": loaded.repairs,
        **loaded.details,
    }
    if request.source is not None:
        manifest["source"] = {"path": str(request.source),
                              "sha256": sha256_of(_source_files(request.source)),
                              "adapter_version": get_benchmark(name).version}
    else:
        manifest["source"] = {"generator": name, "size": request.size, "seed": request.seed,
                              "variant": request.variant}
    return manifest
