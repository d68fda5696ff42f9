"""Which questions a run takes: `limit` round-robin over categories, or over conversations."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tmem_core import ConfigError
from tmem_core.pipeline import parse_sweep
from tmem_core.pipeline._config import BenchmarkConfig
from tmem_core.pipeline._data import prepare_benchmark, select_questions


@pytest.fixture(scope="module")
def locomo(locomo_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_benchmark(BenchmarkConfig("locomo", source=str(locomo_path)),
                             tmp_path_factory.mktemp("data"))


def _select(bench_dir: Path, **options: object) -> list[tuple[str, str]]:
    return select_questions(bench_dir, BenchmarkConfig("locomo", **options))  # type: ignore[arg-type]


def test_a_limit_spread_over_conversations_takes_as_many_from_each(locomo: Path) -> None:
    every = _select(locomo)
    conversations = Counter(conv for _, conv in every)
    assert len(conversations) >= 3
    per = 2
    chosen = _select(locomo, limit=per * len(conversations), spread="conversation")
    assert Counter(conv for _, conv in chosen) == dict.fromkeys(conversations, per)
    assert set(chosen) <= set(every) and len(set(chosen)) == len(chosen)
    by_category = _select(locomo, limit=per * len(conversations))
    assert Counter(conv for _, conv in by_category) != Counter(conv for _, conv in chosen)


def test_each_conversation_keeps_the_category_round_robin(locomo: Path) -> None:
    order = _select(locomo)
    spread = _select(locomo, spread="conversation")
    assert sorted(spread) == sorted(order)  # the same questions, another order
    for conv in {c for _, c in order}:
        assert [q for q, c in spread if c == conv] == [q for q, c in order if c == conv]


def test_the_default_spread_keeps_run_ids_and_a_typo_is_refused() -> None:
    table = {"name": "s", "benchmarks": [{"name": "synthetic", "limit": 4}],
             "grid": {"methods": ["bm25"], "backbones": ["smollm2"]}}
    plain = parse_sweep(table).runs()[0]
    spread = {**table, "benchmarks": [{"name": "synthetic", "limit": 4,
                                       "spread": "category"}]}
    assert parse_sweep(spread).runs()[0].run_id == plain.run_id
    assert "spread" not in plain.identity()["benchmark"]
    other = {**table, "benchmarks": [{"name": "synthetic", "limit": 4,
                                      "spread": "conversation"}]}
    assert parse_sweep(other).runs()[0].run_id != plain.run_id
    with pytest.raises(ConfigError,
                       match=r"spread: unknown value .*; allowed: category, conversation"):
        parse_sweep({**table, "benchmarks": [{"name": "synthetic", "spread": "conversations"}]})


def test_a_category_filter_keeps_its_types_and_refuses_one_the_benchmark_lacks(
        locomo: Path) -> None:
    every = _select(locomo)
    temporal = _select(locomo, categories=("temporal",))
    assert temporal and set(temporal) < set(every)
    with pytest.raises(ConfigError, match="no question of type knowledge_update; its types: "
                                          "adversarial, multi-hop") as caught:
        _select(locomo, categories=("temporal", "knowledge_update"))
    assert caught.value.key == "benchmarks.categories"
