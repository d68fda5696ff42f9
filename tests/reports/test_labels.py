"""Run labels: the method, plus what varies between runs."""

from __future__ import annotations

import polars as pl

from tmem_core.reports import run_labels


def _runs(*rows: tuple[str, str, int]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"benchmark": "synthetic", "method": m, "backbone": "smollm2", "top_k": k,
          "budget": 1024, "params": p, "judges": "smollm2"} for m, p, k in rows])


def test_each_methods_own_parameters_stay_out_of_the_labels() -> None:
    runs = _runs(("bm25", "{}", 12), ("t2mem", '{"max_steps": 3}', 12))
    assert run_labels(runs).to_list() == ["bm25", "t2mem"]


def test_parameters_one_method_runs_with_several_of_are_shown() -> None:
    runs = _runs(("t2mem", '{"max_steps": 3}', 12), ("t2mem", '{"max_steps": 5}', 12),
                 ("bm25", "{}", 12))
    assert run_labels(runs).to_list() == ['t2mem {"max_steps": 3}', 't2mem {"max_steps": 5}',
                                          "bm25 {}"]


def test_varying_fields_are_shown_with_their_prefix() -> None:
    runs = _runs(("bm25", "{}", 5), ("bm25", "{}", 10))
    assert run_labels(runs).to_list() == ["bm25 k5", "bm25 k10"]
    assert run_labels(runs, leave_out=["top_k"]).to_list() == ["bm25", "bm25"]


def test_one_benchmark_read_from_two_sources_is_labelled_by_source() -> None:
    runs = pl.concat([
        _runs(("bm25", "{}", 12)).with_columns(benchmark=pl.lit("evermembench"),
                                               dataset=pl.lit(f"evermembench {shape}"))
        for shape in ("dynamic", "eval")] + [
        _runs(("bm25", "{}", 12)).with_columns(dataset=pl.lit("synthetic 200/0"))])
    assert run_labels(runs).to_list() == ["evermembench dynamic bm25", "evermembench eval bm25",
                                          "synthetic 200/0 bm25"]
    one_each = runs.filter(pl.col("dataset") != "evermembench eval")
    assert run_labels(one_each).to_list() == ["evermembench bm25", "synthetic bm25"]


def test_a_project_addition_is_labelled_so() -> None:
    from tmem_core.methods import get_method

    additions = [get_method(m).addition for m in ("tmem_heuristic", "tmem_heuristic_forest",
                                                    "tmem", "tmem_reranked", "bm25")]
    assert additions == [True, True, False, False, False]
    runs = _runs(("tmem_heuristic", "{}", 12), ("tmem", "{}", 12)).with_columns(
        addition=pl.Series([True, False]))
    assert run_labels(runs).to_list() == ["tmem_heuristic (project addition)", "tmem"]
