"""A conversation's memory is built under its lock once; when it is whole, the conversation's
questions pass without the lock (one that failed in part is built again by the next)."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.small_job import small_job
from tmem_core.pipeline._method_stages import RetrieveStage


@dataclass
class Built:
    failed: tuple[str, ...] = ()


class Memory:
    """A method's offline memory that takes a while to build, failing `failures` times."""

    def __init__(self, failures: int = 0) -> None:
        self.failures, self.builds = failures, 0

    def prepare(self, conv_id: str, llm: Any) -> Built:
        self.builds += 1
        time.sleep(0.05)
        return Built(("E1: timeout",) if self.builds <= self.failures else ())


@pytest.fixture
def stage(tmp_path: Path) -> RetrieveStage:
    return RetrieveStage(dataclasses.replace(small_job(tmp_path, "memory"), local=True))


def test_a_whole_memory_is_built_once_for_every_question(stage: RetrieveStage) -> None:
    memory = Memory()
    stage.__dict__["method"] = memory
    question = next(iter(stage.questions.values()))
    threads = [threading.Thread(target=stage.prepare_memory, args=(question,))
               for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert memory.builds == 1
    assert stage.prepare_memory(question) == []  # no lock, no calls
    assert memory.builds == 1


def test_a_memory_that_failed_in_part_is_built_again(stage: RetrieveStage) -> None:
    memory = Memory(failures=1)
    stage.__dict__["method"] = memory
    question = next(iter(stage.questions.values()))
    for _ in range(3):
        stage.prepare_memory(question)
    assert memory.builds == 2  # the retry made it whole; the third passed
