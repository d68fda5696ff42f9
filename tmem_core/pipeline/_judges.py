"""Who judges a run, and with which prompts.

`grid.judges` is a list of backbones (each judges every run of the grid: T2Mem §4's
Qwen3.5-Plus judges every method) or "self": each run is judged by its own backbone, in calls
of their own (T-MEM §C.3, the same model answering and judging). A run's judge prompts are
the ones its benchmark's protocol names, the official ones unless `judge_prompts` maps one to
another bundled prompt (the project's paraphrase, `judge/locomo@v1`, say) or to a user's file:
each prompt's hash is in the run's identity, and how each is sent and read, with where the
harness differs from its source, in the run's contract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from tmem_core import ConfigError
from tmem_core.benchmarks import get_protocol
from tmem_core.evaluation import JudgeCall
from tmem_core.prompts import load_prompt
from tmem_core.results._accuracy import SELF, judged_by


def grid_judges(value: object) -> tuple[str, ...] | Literal["self"] | None:
    """`grid.judges` as the config gives it: backbone names (as a tuple), "self" or None."""
    if value is None:
        return None
    if value == SELF:
        return SELF
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError("grid.judges", f"expected a list of backbones or {SELF!r}, got "
                                         f"{value!r}")
    if not value:
        raise ConfigError("grid.judges", "an empty list judges no answer; name at least one "
                                         "backbone, or leave judges out to judge with the "
                                         "first backbone")
    return tuple(value)


def run_judges(judges: Sequence[str] | str | None, backbone: str,
               backbones: Sequence[str]) -> tuple[str, ...]:
    """The judges of a run on `backbone`: itself under "self", else the grid's list (by
    default its first backbone)."""
    if judges == SELF:
        return (backbone,)
    return tuple(judges or backbones[:1])


def judge_prompt_identity(benchmark: str, chosen: Mapping[str, str]) -> dict[str, Any]:
    """Per judge prompt of the benchmark's protocol, the one that judges and its hash: a
    bundled prompt by name (`{"prompt": "judge/locomo@v2", "sha256": ...}`), a user's file by
    path (`{"file": ..., "sha256": ...}`)."""
    out: dict[str, Any] = {}
    for ref in get_protocol(benchmark).judge_prompts:
        given = chosen.get(ref, ref)
        prompt = load_prompt(given)
        kind = "file" if Path(given).suffix == ".txt" and Path(given).exists() else "prompt"
        out[ref] = {kind: given if kind == "file" else prompt.name, "sha256": prompt.sha256}
    return out


def judging(benchmark: str, chosen: Mapping[str, str], judges: Sequence[str],
            backbone: str) -> dict[str, Any]:
    """The run contract's account of its judging: who judges (`judged_by`), each judge
    prompt as it is sent and read (`JudgeCall.describe`), and the benchmark's own notes on
    its protocol."""
    protocol = get_protocol(benchmark)
    return {"judges": list(judges), "judged_by": judged_by(judges, backbone),
            "prompts": {ref: JudgeCall(load_prompt(chosen.get(ref, ref))).describe()
                        for ref in protocol.judge_prompts},
            "notes": list(protocol.judge_notes)}
