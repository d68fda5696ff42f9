"""The dry run: calls, tokens and USD from a sample of the real stages, wall time from the
batching model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hub import stage_tokenizer
from tests.ray_head import ROOT, sweep_config
from tmem_core.llm import BatchModel, SimEngineConfig
from tmem_core.llm._batch_model import Pace
from tmem_core.pipeline import load_sweep
from tmem_core.pipeline._plan import Call, plan_sweep, simulate

TIMING = SimEngineConfig(ttft_s=0.0, prefill_tokens_per_s=1e12, step_s=0.01, step_s_per_seq=0.0,
                         step_s_per_ktok=0.0, max_num_seqs=4)


def test_chains_run_their_calls_in_order_and_share_replicas() -> None:
    chain = [Call("b", 10, 5), Call("b", 10, 10)]  # 0.05 s then 0.10 s alone
    one = {"b": [BatchModel(TIMING)]}
    assert simulate(one, iter([chain]), slots=1) == pytest.approx(0.15)
    # two chains at once share the steps of one replica; four slots for eight chains: twice
    assert simulate({"b": [BatchModel(TIMING)]}, iter([chain] * 2), 2) == pytest.approx(0.15)
    assert simulate({"b": [BatchModel(TIMING)]}, iter([chain] * 8), 4) == pytest.approx(0.30)
    two = {"b": [BatchModel(TIMING), BatchModel(TIMING)]}
    assert simulate(two, iter([chain] * 8), 8) == pytest.approx(0.15)  # four on each


def test_plan_counts_calls_and_prices_them(tmp_path: Path) -> None:
    backbones = tmp_path / "backbones.toml"
    backbones.write_text('[backbones.priced]\nbackend = "sim"\nmodel = "m"\n'
                         'prices = { input_per_mtok = 1000.0, output_per_mtok = 2000.0 }\n')
    path = sweep_config(tmp_path, "plan", limit=6, backbones='["priced"]',
                        extra=f'backbones_file = "{backbones}"')
    config = load_sweep(path)
    plan = plan_sweep(config, replicas=2, sample=2, timing=TIMING)
    (run,) = plan.runs
    assert run.questions == 6 and len(run.chains) == 6
    assert run.calls == sum(len(chain) for chain in run.chains)
    # per question: its answer, its judgement, and a judge control of each kind that applies
    # (a positive and at least one negative)
    assert all(len(chain) >= 4 for chain in run.chains)
    assert run.cost_usd == pytest.approx((run.prompt_tokens + 2 * run.completion_tokens)
                                         * 1000 / 1e6)
    assert plan.wall_s > 0 and not (tmp_path / "results" / "plan").exists()  # nothing written
    slower = plan_sweep(config, replicas=1, sample=2, timing=TIMING)
    assert slower.runs[0].calls == run.calls and slower.wall_s >= plan.wall_s
    # in flight by default: the engines' slots (2 replicas x the sim's 128), at most the
    # sweep's 6 questions, one and a half of the timing model's replicas of 4 seqs
    (capacity,) = [line for line in plan.lines() if "questions in flight" in line]
    assert capacity.startswith("priced: 6 questions in flight") and "fill 1.50 of its 2" in capacity
    assert capacity.endswith("max_num_seqs 4; up to 2 have work")
    path.write_text(path.read_text() + "questions_in_flight = 2\n")
    two = plan_sweep(load_sweep(path), replicas=2, sample=2, timing=TIMING)
    (capacity,) = [line for line in two.lines() if "questions in flight" in line]
    assert capacity.startswith("priced: 2 questions in flight") and "fill 0.50 of its 2" in capacity
    assert two.wall_s >= plan.wall_s  # fewer in flight: no faster


def test_bad_input_is_one_error_line(tmp_path: Path) -> None:
    config = sweep_config(tmp_path, "plan-bad")
    done = subprocess.run([sys.executable, "-m", "jobs.plan", str(config), "--timing", "smollm2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: config key '--timing': 'smollm2' is not a sim backbone"]


def test_a_gpu_backbone_whose_tokenizer_is_missing_is_one_error_line(tmp_path: Path) -> None:
    """Staged nowhere (an empty HF_HOME), Gemma's tokenizer is an error, not a cl100k guess;
    staged under the publisher's repo id, the plan counts with it."""
    config = sweep_config(tmp_path, "plan-gemma", backbones='["gemma4-31b"]')
    hf_home = tmp_path / "hf"
    command = [sys.executable, "-m", "jobs.plan", str(config), "--sample", "1"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "HF_HOME": str(hf_home)})
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: config key 'backbones.gemma4-31b.tokenizer': tokenizer "
                           "hf:google/gemma-4-31B-it is not on disk"), line
    stage_tokenizer(hf_home, "google/gemma-4-31B-it", ["the"])
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "HF_HOME": str(hf_home)})
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_pace_times_one_sequence_alone_and_a_full_batch_at_its_two_rates() -> None:
    timing = Pace(prompt_tokens_per_s=100.0, output_tokens_per_s=20.0,
                  output_tokens_per_s_alone=5.0).timing(4)
    assert timing.max_num_seqs == 4
    alone = [Call("b", 10, 10)]  # 0.1 s of prompt, 10 tokens at 5 tok/s
    assert simulate({"b": [BatchModel(timing)]}, iter([alone]), 1) == pytest.approx(2.1)
    # four at once: 0.4 s of prompts, 40 tokens at 20 tok/s in all
    assert simulate({"b": [BatchModel(timing)]}, iter([alone] * 4), 4) == pytest.approx(2.4)


def test_an_embedded_backbone_is_planned_at_its_own_pace_and_slots(tmp_path: Path) -> None:
    """SmolLM2 on llama.cpp: 8 slots, its measured pace (was the GPU-like sim engine's 128
    slots and pace), or the pace its engine table sets."""
    backbones = tmp_path / "backbones.toml"
    path = sweep_config(tmp_path, "plan-cpu", limit=2, extra=f'backbones_file = "{backbones}"')
    plans = {}
    for prompt_rate in (140.0, 14.0):
        backbones.write_text(f"[backbones.smollm2.engine.pace]\nprompt_tokens_per_s = "
                             f"{prompt_rate}\noutput_tokens_per_s = 30.0\n"
                             "output_tokens_per_s_alone = 30.0\n")
        plans[prompt_rate] = plan = plan_sweep(load_sweep(path), replicas=1, sample=1)
        (run,) = plan.runs
        # one engine of 8 slots reads and writes no faster than its two rates
        assert plan.wall_s >= run.prompt_tokens / prompt_rate + run.completion_tokens / 30.0
        (capacity,) = [line for line in plan.lines() if "questions in flight" in line]
        assert capacity.endswith("max_num_seqs 8; up to 1 have work")
    assert plans[14.0].wall_s > 5 * plans[140.0].wall_s
