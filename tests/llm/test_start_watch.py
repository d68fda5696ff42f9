"""An engine start that stops making progress is ended (a failed attempt); a slow one that
progresses is not, however long it takes."""

from __future__ import annotations

import itertools
import time

from tmem_core.llm._start_watch import StallWatch, process_tree_progress
from tmem_core.llm._vllm import VLLMEngineConfig


def test_a_start_that_stops_progressing_is_ended_once() -> None:
    ended: list[float] = []
    readings = itertools.chain([1.0, 2.0, 3.0], itertools.repeat(3.0))  # then stuck
    watch = StallWatch(0.2, lambda: ended.append(time.monotonic()), lambda: next(readings),
                       poll_s=0.02)
    with watch.watching():
        time.sleep(0.6)
    assert watch.stalled and len(ended) == 1


def test_a_slow_start_that_progresses_is_never_ended() -> None:
    ended: list[bool] = []
    readings = itertools.count(0.0, 0.5)  # weights still being read
    watch = StallWatch(0.1, lambda: ended.append(True), lambda: next(readings), poll_s=0.02)
    with watch.watching():
        time.sleep(0.5)  # five times the stall bound
    assert not watch.stalled and ended == []


def test_this_process_tree_shows_progress_when_it_works() -> None:
    before = process_tree_progress()
    sum(i * i for i in range(3_000_000))  # CPU time spent
    assert process_tree_progress() > before


def test_the_engine_process_waits_as_long_as_its_config_says() -> None:
    assert VLLMEngineConfig().process_env()["VLLM_ENGINE_READY_TIMEOUT_S"] == "7200"
    mine = VLLMEngineConfig(start_timeout_s=900, env_vars={"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert mine.process_env() == {"VLLM_ENGINE_READY_TIMEOUT_S": "900",
                                  "VLLM_CPU_KVCACHE_SPACE": "1"}
    overridden = VLLMEngineConfig(env_vars={"VLLM_ENGINE_READY_TIMEOUT_S": "60"})
    assert overridden.process_env()["VLLM_ENGINE_READY_TIMEOUT_S"] == "60"
