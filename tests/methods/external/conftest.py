"""What the external-system sweep tests share: a scripted server that answers a system's
build calls, the judge and the answer model, and a small sweep of one external method."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.conftest import ScriptedServer, Step
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.pipeline._summary import RunSummary

Build = Callable[[str, str], str | None]
"""(system prompt, user prompt) -> the build call's answer, None if it is not a build call."""


class SystemServer(ScriptedServer):
    """A system's build calls answered by `build`, a WRONG verdict for the judge, a fixed
    answer otherwise."""

    def __init__(self, build: Build) -> None:
        super().__init__([Step()])
        self.build = build

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        super()._next(body, authorization)
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if (content := self.build(system, user)) is not None:
            return Step(content=content)
        if system.startswith("You grade answers"):
            return Step(content='{"verdict": "WRONG"}')
        return Step(content="It changed.")


def external_sweep(tmp_path: Path, name: str, backbones: Path, method: str,
                   params: dict[str, Any], plugins: Sequence[str] = ()) -> RunSummary:
    """One run of `method` on 2 synthetic questions with the `scripted` backbone, no Ray."""
    config = parse_sweep({
        "name": name, "results_dir": str(tmp_path / name), "backbones_file": str(backbones),
        "plugins": list(plugins),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 2}],
        "grid": {"methods": [method], "backbones": ["scripted"], "top_k": [4],
                 "budget": [512]},
        "methods": {method: params}})
    [summary] = run_sweep(config, log=lambda _: None, local=True)
    return summary
