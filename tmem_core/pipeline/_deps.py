"""What a run's stored records depend on: per stage, each dependency's hash.

A stage record carries the hashes of what produced it (`deps`: dependency -> hash, as JSON)
and the git commit of the driver that wrote it (`code`: recorded, never compared). The
dependencies accumulate along the flow, as each stage reads what the one before made:

- retrieve: the method's version, its resolved parameters (with the grid's Top-k and
  budget), the prompts it declares, and, when its retrieval reads a memory its LLM steps
  built (the registry's `memory`), their backbone: the run's construct backbone if it has
  one, else its backbone;
- construct: retrieve's, the backbone (its token counter sets the budget) and the backbone
  of the method's LLM steps;
- answer: construct's, and every answer prompt (a question's context kind picks one);
- judge (and its calibration and memory-quality scores): answer's, each judge's backbone, the
  benchmark's judge prompts (a user's file where the sweep names one) and, when the grid asks
  for memory quality, its prompt.

A backbone's hash is of its definition (`BackboneConfig.definition`: model, weights,
generation settings), a prompt's of its file. A record also carries the hashes of its
question's data (`tmem_core.results.record_deps`). A stored record is reused only when its
hashes equal the run's (`Stage.stored`, by `tmem_core.results.in_force`, the rule every
reader counts records by); one written before hashes were recorded has none and never
matches. Before the stages start, the driver says which records will be redone
and why (`changed_records`), or refuses to (`on_changed = "refuse"`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tmem_core.benchmarks import get_protocol
from tmem_core.evaluation import CONTEXT_PROMPTS
from tmem_core.llm import BackboneConfig
from tmem_core.methods import get_method
from tmem_core.pipeline._config import RunSpec
from tmem_core.pipeline._contract import method_in_effect
from tmem_core.pipeline._memory_quality import PROMPT as QUALITY_PROMPT
from tmem_core.prompts import load_prompt
from tmem_core.results import stage_store
from tmem_core.results._current import Deps, QuestionData, expected_deps
from tmem_core.results._layout import calibration_store, memory_quality_store
from tmem_core.results._store import StageStore, in_force

UNHASHED = "no dependency hashes (written before they were recorded)"


def run_dependencies(run: RunSpec, backbones: Mapping[str, BackboneConfig]
                     ) -> dict[str, Deps]:
    """Each stage's dependencies for `run` (`backbones`: by name, the run's among them)."""
    spec = get_method(run.method)
    own = _backbone("backbone", backbones[run.backbone])
    steps = (_backbone("construct backbone", backbones[run.construct_backbone])
             if run.construct_backbone else own)  # the method's LLM steps
    retrieve = {"method version": str(spec.version),
                "method parameters": _sha({**method_in_effect(run), "top_k": run.top_k,
                                           "budget": run.budget}),
                **_prompts(spec.prompts), **(steps if spec.memory else {})}
    construct = {**retrieve, **own, **steps}
    answer = {**construct, **_prompts(CONTEXT_PROMPTS.values())}
    protocol = get_protocol(run.benchmark.name)
    judges = {k: v for name in run.judges for k, v in _backbone("judge", backbones[name]).items()}
    judge_prompts = {f"prompt {ref}": load_prompt(run.judge_prompts.get(ref, ref)).sha256
                     for ref in protocol.judge_prompts}
    quality = _prompts([QUALITY_PROMPT]) if run.memory_quality else {}
    return {"retrieve": retrieve, "construct": construct, "answer": answer,
            "judge": {**answer, **judges, **judge_prompts, **quality}}


def _backbone(role: str, backbone: BackboneConfig) -> Deps:
    return {f"{role} {backbone.name}": _sha(backbone.definition())}


def _prompts(refs: Any) -> Deps:
    return {f"prompt {ref}": load_prompt(ref).sha256 for ref in refs}


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class Changed:
    """Stored records of one run's stage that a re-run redoes, and why."""

    run_id: str
    stage: str
    records: int
    reason: str  # the dependencies that changed, or `UNHASHED`

    def describe(self) -> str:
        return f"run {self.run_id}: stage {self.stage}: {self.records} stored records {self.reason}"


def changed_records(run_id: str, run_dir: Path, deps: Mapping[str, Deps],
                    data: Mapping[str, QuestionData]) -> list[Changed]:
    """The run's stored successes (per stage) of questions of its `data` that a re-run
    redoes, none of their keys being in force (`in_force`: stale), counted by what differs
    from `deps` and the question's data."""
    out = []
    for stage in deps:
        stores = [stage_store(run_dir, stage)]
        if stage == "judge":
            stores += [calibration_store(run_dir), memory_quality_store(run_dir)]
        reasons = Counter(_reason(record["deps"], json.loads(expected[record["qid"]]))
                          for store in stores
                          if (expected := expected_deps(deps, store.stage, data)) is not None
                          for record in _stale(store, expected).to_pylist()
                          if record["ok"] and record["qid"] in expected)
        out += [Changed(run_id, stage, n, reason) for reason, n in sorted(reasons.items())
                if reason]
    return out


def _stale(store: StageStore, expected: Mapping[str, str]) -> pa.Table:
    return store.newest(lambda history: in_force(history, expected).stale,
                        columns=["qid", "ok", "deps"])


def _reason(stored: str | None, current: Deps) -> str:
    """Why a record with `stored` dependencies is redone ("" when it is not)."""
    if stored is None:
        return f"carry {UNHASHED}"
    was: Deps = json.loads(stored)
    differ = sorted(k for k in {*was, *current} if was.get(k) != current.get(k))
    return f"were made with a different {', '.join(differ)}" if differ else ""
