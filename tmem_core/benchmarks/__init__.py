"""Benchmark adapters (one registered loader per benchmark) and canonical preparation.

Add a benchmark by decorating its loader with `@benchmark("name", protocol=Protocol(...),
description=...)`: the loader and how its answers are scored, in one file.
"""

from tmem_core.benchmarks._prepare import (
    DEFAULT_OUT,
    MANIFEST_FILE,
    PreparedBenchmark,
    build,
    content_identity,
    prepare,
    read_prepared,
    tables_sha256,
    with_revisions,
    write_prepared,
)
from tmem_core.benchmarks._registry import (
    LoadedBenchmark,
    LoadRequest,
    benchmark,
    benchmark_names,
    get_benchmark,
    get_protocol,
)

__all__ = [
    "DEFAULT_OUT",
    "MANIFEST_FILE",
    "LoadRequest",
    "LoadedBenchmark",
    "PreparedBenchmark",
    "benchmark",
    "benchmark_names",
    "build",
    "content_identity",
    "get_benchmark",
    "get_protocol",
    "prepare",
    "read_prepared",
    "tables_sha256",
    "with_revisions",
    "write_prepared",
]
