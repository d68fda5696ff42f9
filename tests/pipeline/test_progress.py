"""A run is summarised as soon as its last question is out, not when the next run's are."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.ray_head import run_sweep, sweep_config
from tmem_core.pipeline._judge_stage import JudgeStage

pytestmark = pytest.mark.slow
CALL_DELAY_S = 2.0  # every LLM call: a question takes at least two of these


def test_run_summary_does_not_wait_for_the_next_run(
        ray_address: str, tmp_path: Path, scripted_server: Callable[..., Any],
        step: Callable[..., Any]) -> None:
    server = scripted_server([step(content='{"verdict": "CORRECT"}', delay_s=CALL_DELAY_S)])
    backbones = tmp_path / "backbones.toml"
    backbones.write_text(  # a fresh model name: no request-cache hits from earlier sessions
        f'[backbones.slow]\nbackend = "openai"\nmodel = "slow-{uuid.uuid4().hex[:8]}"\n'
        f'engine = {{ base_url = "{server.base_url}" }}\n')
    # two runs of two questions, two in flight: the runs stream one after the other
    config = sweep_config(tmp_path, "timely", methods='["bm25", "bm25_expand"]', limit=2,
                          backbones='["slow"]', extra=f'backbones_file = "{backbones}"')
    config.write_text(config.read_text() + "questions_in_flight = 2\n")
    done = run_sweep(config, ray_address)
    sweep = tmp_path / "results" / "timely"
    runs = [sweep / r for r in json.loads((sweep / "sweep.json").read_text())["runs"]]
    judged_at = {run: sorted(JudgeStage.store_for(run).read_all().column("written_at")
                             .to_pylist()) for run in runs}
    # the order the runs streamed in is Ray's to choose: take it from the records
    first, second = sorted(runs, key=lambda run: judged_at[run][-1])
    summarised_at = json.loads((first / "contract.json").read_text())["ended_at"]
    # two in flight: the next run's first question may be judged as this one's last is; its
    # last comes at least a question (two calls) after this run's last went out
    assert summarised_at < judged_at[second][-1], done.stdout[-2000:]
