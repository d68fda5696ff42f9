"""A run's dataset: the benchmark and which of its data the run read."""

from __future__ import annotations

from tmem_core.results._sweep import dataset_label


def test_the_dataset_names_the_source_the_synthetic_size_and_a_variant() -> None:
    assert dataset_label({"name": "evermembench", "source": "/d/evermembench/eval/",
                          "variant": "base"}) == "evermembench eval"
    assert dataset_label({"name": "locomo", "prepared": "/p/locomo10"}) == "locomo locomo10"
    assert dataset_label({"name": "synthetic", "size": 200, "seed": 0,
                          "variant": "interleaved"}) == "synthetic 200/0 interleaved"
