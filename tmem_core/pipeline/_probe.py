"""The stages' probe: where a test plugs into a question's path through a stage.

Every stage calls its probe as it starts a question (`question`), when it hands the
question an LLM (`llm`) and once a batch's calls are written, before its records are
(`calls_written`); production runs the no-op `Probe`. A test names its own with
`TMEM_PROBE=<module>:<factory>[:<argument>]` in the driver's environment: every stage actor
imports the module and calls `factory(argument)` (the kill and fault tests do so).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tmem_core.pipeline._engine import EngineProxy

PROBE_ENV = "TMEM_PROBE"


class Probe:
    """Does nothing: the stages' default."""

    def question(self, stage: str, qid: str) -> None:
        """`stage` starts on question `qid`."""

    def llm(self, proxy: EngineProxy) -> EngineProxy:
        """The LLM the question gets (`proxy.stage`, `proxy.qid` say whose)."""
        return proxy

    def calls_written(self, reached: list[tuple[str, str]]) -> None:
        """A batch's calls are on record and its (stage, qid) records `reached` not yet."""


def load_probe(spec: str) -> Probe:
    """The probe a `TMEM_PROBE` value names (the no-op probe for an empty one)."""
    if not spec:
        return Probe()
    module, _, rest = spec.partition(":")
    factory, _, argument = rest.partition(":")
    probe: Probe = getattr(importlib.import_module(module), factory)(argument)
    return probe
