"""Faults: a killed driver, a dying stage worker, an LLM error; and two backbones at once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pipeline.faults import probe_env
from tests.ray_head import ROOT, gcs, run_sweep, sweep_config, sweep_env, wait_for
from tmem_core.pipeline import STAGES, load_sweep
from tmem_core.pipeline._answer_stage import AnswerStage
from tmem_core.pipeline._data import prepare_benchmark, select_questions
from tmem_core.pipeline._judge_stage import JudgeStage
from tmem_core.results import calls_store

pytestmark = pytest.mark.slow


def _run_dirs(tmp: Path, sweep: str) -> list[Path]:
    runs = json.loads((tmp / "results" / sweep / "sweep.json").read_text())["runs"]
    return [tmp / "results" / sweep / r for r in runs]


def test_killed_driver_resumes_without_recomputing(ray_address: str, tmp_path: Path) -> None:
    # one question at a time on a cold request cache: the kill lands mid-sweep
    config = sweep_config(tmp_path, "kill", limit=4)
    config.write_text(config.read_text() + "questions_in_flight = 1\n")
    cache = {"TMEM_CACHE_DIR": str(tmp_path / "cache")}
    log = (tmp_path / "driver.log").open("w")
    driver = subprocess.Popen([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                              env=sweep_env(gcs(ray_address), **cache), stdout=log,
                              stderr=subprocess.STDOUT)
    answers = tmp_path / "results" / "kill"
    wait_for(lambda: any(answers.glob("*/judge/part-*.parquet")) or driver.poll() is not None,
             600, "first judgements")
    assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    killed_at = time.time()
    (run_dir,) = _run_dirs(tmp_path, "kill")
    before = {s.name: set(s.store_for(run_dir).latest().column("key").to_pylist())
              for s in STAGES}
    assert 0 < len(before["judge"]) < 4  # killed mid-sweep

    run_sweep(config, ray_address, **cache)

    for stage in STAGES:
        history = stage.store_for(run_dir).read_all().to_pylist()
        ok_keys = [r["key"] for r in history if r["ok"]]
        assert len(ok_keys) == len(set(ok_keys)), f"{stage.name}: a record was recomputed"
        assert len(set(ok_keys)) == 4
    late_calls = [c for c in calls_store(run_dir).read_all().to_pylist()
                  if c["written_at"] > killed_at]
    assert not {c["qid"] for c in late_calls if c["stage"] == "judge"} & {
        k.split("|")[0] for k in before["judge"]}


def test_dying_worker_and_llm_error(ray_address: str, tmp_path: Path) -> None:
    backbones = tmp_path / "backbones.toml"
    backbones.write_text('[backbones.smollm2-b]\nbackend = "embedded"\n'
                         'model = "SmolLM2-135M-Instruct"\ntokenizer = "cl100k"\n'
                         'context_length = 4096\n')
    # each stage in its own actor pool here (the other tests run them fused, the default)
    config = sweep_config(tmp_path, "faults", limit=4, backbones='["smollm2", "smollm2-b"]',
                          extra=f'backbones_file = "{backbones}"', fused=False)
    qids = _first_qids(config)
    marker = tmp_path / "died-once"
    fault = f"stage=answer,qid={qids[1]},kind=exit,once={marker}"
    run_sweep(config, ray_address, **probe_env(fault))
    assert marker.exists()  # the worker did die
    run_dirs = _run_dirs(tmp_path, "faults")
    for run_dir in run_dirs:
        assert len(AnswerStage.store_for(run_dir).latest().to_pylist()) == 4
    # an LLM error on one question: an error row, the rest completes
    broken = f"stage=judge,qid={qids[2]},kind=llm_error"
    config2 = sweep_config(tmp_path, "llm-error", limit=4, extra="")
    run_sweep(config2, ray_address, **probe_env(broken))
    (run_dir,) = _run_dirs(tmp_path, "llm-error")
    judged = JudgeStage.store_for(run_dir)
    failures = judged.failures().to_pylist()
    assert [f["qid"] for f in failures] == [qids[2]]
    assert "injected fault" in failures[0]["error"]
    assert len(judged.latest().to_pylist()) == 3
    # two backbones: comparable result sets, tokens accounted per backbone
    answered = {}
    for run_dir in run_dirs:
        calls = [c for c in calls_store(run_dir).read_all().to_pylist()
                 if c["stage"] == "answer"]
        (backbone,) = {c["backbone"] for c in calls}
        answered[backbone] = (sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls),
                              set(JudgeStage.store_for(run_dir).latest().column("qid")
                                  .to_pylist()))
    assert set(answered) == {"smollm2", "smollm2-b"}
    assert all(tokens > 0 for tokens, _ in answered.values())
    assert answered["smollm2"][1] == answered["smollm2-b"][1] == set(qids)


def test_fused_worker_dying_mid_batch_is_retried_without_duplicates(
        ray_address: str, tmp_path: Path) -> None:
    config = sweep_config(tmp_path, "fused-death", limit=3)
    qids = _first_qids(config)
    marker = tmp_path / "died-once"
    # the fused actor dies at the last stage of the first batch's second question, after
    # the batch's other stages ran but before any of its records were written
    run_sweep(config, ray_address,
              **probe_env(f"stage=judge,qid={qids[1]},kind=exit,once={marker}"))
    assert marker.exists()
    (run_dir,) = _run_dirs(tmp_path, "fused-death")
    for stage in STAGES:
        ok_keys = [r["key"] for r in stage.store_for(run_dir).read_all().to_pylist()
                   if r["ok"]]
        assert len(ok_keys) == len(set(ok_keys)), f"{stage.name}: a record was written twice"
        assert {k.split("|")[0] for k in ok_keys} == set(qids)


def _first_qids(config: Path) -> list[str]:
    """The questions the sweep will run, in order (prepares the data as the sweep would)."""
    sweep = load_sweep(config)
    bench = sweep.benchmarks[0]
    data = prepare_benchmark(bench, Path(sweep.results_dir) / sweep.name / "data")
    return [qid for qid, _ in select_questions(data, bench)]
