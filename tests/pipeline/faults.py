"""Faults injected through the stages' probe (`TMEM_PROBE=tests.pipeline.faults:fault:SPEC`):
`SPEC` is `stage=<name>,qid=<qid>,kind=<kind>[,once=<file>]`, the kinds:

- `exit` ends the stage's worker process when it reaches the question (once, if a marker
  file is given), `kill` sends it SIGKILL there;
- `exit_before_records` ends it once the question's batch has its calls written and not yet
  its records;
- `llm_error` makes every LLM call of that question in that stage fail like a dead engine.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from tmem_core.llm import ChatRequest
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._shared import Answered
from tmem_core.llm._types import error_response
from tmem_core.pipeline._engine import EngineProxy
from tmem_core.pipeline._probe import PROBE_ENV, Probe


def probe_env(spec: str) -> dict[str, str]:
    """The driver's environment entry that injects the fault `spec`."""
    return {PROBE_ENV: f"{__name__}:fault:{spec}"}


@dataclass(frozen=True)
class Fault(Probe):
    stage: str
    qid: str
    kind: str
    once: str = ""

    def question(self, stage: str, qid: str) -> None:
        if self.kind in ("exit", "kill") and self._hits(stage, qid):
            if self.kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(1)  # a worker dying mid-batch

    def llm(self, proxy: EngineProxy) -> EngineProxy:
        if self.kind == "llm_error" and self._hits(proxy.stage, proxy.qid):
            return _failing(proxy)
        return proxy

    def calls_written(self, reached: list[tuple[str, str]]) -> None:
        if self.kind == "exit_before_records" and any(self._hits(*r) for r in reached):
            os._exit(1)  # a worker dying between a batch's calls and its records

    def _hits(self, stage: str, qid: str) -> bool:
        if (self.stage, self.qid) != (stage, qid):
            return False
        if self.once:
            if Path(self.once).exists():
                return False
            Path(self.once).touch()
        return True


def fault(spec: str) -> Fault:
    return Fault(**dict(part.split("=", 1) for part in spec.split(",")))


def _failing(proxy: EngineProxy) -> EngineProxy:
    """The question's proxy, its every call failing like a dead engine."""

    def call(requests: list[ChatRequest]) -> Answered:
        responses = [error_response("engine", "injected fault") for _ in requests]
        return responses, [CallRecord.of(proxy.backbone, r, x)
                           for r, x in zip(requests, responses, strict=True)]

    return EngineProxy(call, proxy.backbone, proxy.stage, proxy.qid, proxy.conv_id,
                       proxy.forbidden)
