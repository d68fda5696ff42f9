"""A stage loads what every question needs when it is built, once per process: the first
question would otherwise build it while every other question waited on it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.pipeline.small_job import small_job
from tmem_core.evaluation import ids_in
from tmem_core.evaluation._leaks import _id_scanner
from tmem_core.llm._tokens import tokenizer_counter
from tmem_core.pipeline._actors import FusedStages
from tmem_core.pipeline._judge_stage import JudgeStage
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._stage import shared_prepared
from tmem_core.retrieval._text import _stopwords


@pytest.fixture
def job(tmp_path: Path) -> Run:
    return small_job(tmp_path, "warm")


def test_every_stage_is_warm_before_its_first_question(job: Run) -> None:
    fused = FusedStages(job)
    for stage in fused.stages:
        assert {"questions", "forbidden"} <= set(vars(stage)), stage.name
    judge = fused.stages[-1]
    assert isinstance(judge, JudgeStage)
    assert {"gold", "control_pool"} <= set(vars(judge))
    assert "method" in vars(fused.stages[0])
    # the fused stages share one copy of the benchmark's tables
    assert len({id(stage.prepared) for stage in fused.stages}) == 1


def test_a_changed_benchmark_is_read_again(job: Run) -> None:
    bench_dir = Path(job.bench_dir)
    first = shared_prepared(bench_dir)
    assert shared_prepared(bench_dir) is first
    manifest = bench_dir / "manifest.json"
    stat = manifest.stat()
    os.utime(manifest, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert shared_prepared(bench_dir) is not first


def test_each_conversation_s_id_scanner_is_compiled_before_its_questions(job: Run) -> None:
    """Its questions meet it at once (all of them, or a conversation's when its memory is
    built): each compiling it, a stage actor spent seconds in `re.compile`."""
    _id_scanner.cache_clear()
    stage = FusedStages(job).stages[0]
    assert any(stage.forbidden.values())
    compiled = _id_scanner.cache_info().misses
    for ids in stage.forbidden.values():
        ids_in("a prompt", ids)
    assert _id_scanner.cache_info().misses == compiled


def test_the_lexical_stopword_list_is_loaded_before_the_first_question(job: Run) -> None:
    """It imports bm25s, which a question meeting it first imported while the actor's
    other questions waited at the import lock (T-MEM's construction uses it for every
    question; its retrieval, reused on a resumed run, is the only other place)."""
    _stopwords.cache_clear()
    FusedStages(job)
    assert _stopwords.cache_info().currsize == 1


def test_every_backbone_s_tokenizer_is_loaded_before_the_first_question(job: Run) -> None:
    """Loading a vocabulary takes 0.3 s; met by a stage actor's first call, it ran inside a
    sweep's window while that actor's questions waited for their counts."""
    tokenizer_counter.cache_clear()
    FusedStages(job)
    loaded = tokenizer_counter.cache_info().misses
    assert loaded >= 1
    for backbone in job.backbones:
        tokenizer_counter(backbone.tokenizer)
    assert tokenizer_counter.cache_info().misses == loaded
