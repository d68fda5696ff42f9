"""Planning a sweep's runs: each run's contract, questions and stage job, numbered in grid
order, after the records whose dependencies changed are noted or refused."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from tmem_core import ResultsError
from tmem_core.benchmarks import read_prepared
from tmem_core.llm import BackboneConfig
from tmem_core.llm._tokens import tokenizer_identity
from tmem_core.pipeline._config import Resources, RunSpec
from tmem_core.pipeline._contract import Contract
from tmem_core.pipeline._data import data_facts, select_questions
from tmem_core.pipeline._deps import changed_records, run_dependencies
from tmem_core.pipeline._probe import PROBE_ENV
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._stage import shared_data
from tmem_core.prompts import load_prompt, prompt_names
from tmem_core.results._current import Deps

Log = Callable[[str], None]


def plan_run(spec: RunSpec, bench_dir: Path, backbones: Mapping[str, BackboneConfig],
             root: Path, local: bool = False, deps: Mapping[str, Deps] | None = None,
             resources: Resources | None = None) -> Run:
    """The run, its contract written now (with its earlier attempts) (`deps`: each stage's
    dependencies, `run_dependencies` by default; `resources`: the sweep's, the defaults if
    not given)."""
    run_dir = root / spec.run_id
    prompts = [*prompt_names(), *spec.judge_prompts.values()]
    generation = {name: {**backbones[name].generation(),
                         "tokenizer": tokenizer_identity(backbones[name].tokenizer)}
                  for name in spec.backbone_names}
    deps = deps if deps is not None else run_dependencies(spec, backbones)
    contract = Contract.start(spec, data_facts(read_prepared(bench_dir).manifest, bench_dir),
                              {n: load_prompt(n).sha256 for n in prompts}, generation, run_dir,
                              deps)
    contract.write(run_dir)
    return Run(
        spec=spec, run_dir=run_dir, bench_dir=bench_dir, backbone=backbones[spec.backbone],
        judges=tuple(backbones[j] for j in spec.judges), contract=contract,
        questions=tuple(select_questions(bench_dir, spec.benchmark)),
        construct=backbones[spec.construct_backbone] if spec.construct_backbone else None,
        deps=deps, probe=os.environ.get(PROBE_ENV, ""), local=local,
        retrievals=(resources or Resources()).retrievals_per_actor)


def in_order(runs: list[Run]) -> list[Run]:
    """The runs with each question's place among the sweep's questions (runs in grid order,
    a run's questions as selected): the engines run waiting requests by it, so questions
    finish in that order and a run's results are complete early, rather than every question
    advancing a call at a time and all of them finishing together at the end."""
    first, ordered = 0, []
    for run in runs:
        order = {qid: first + index for index, (qid, _) in enumerate(run.questions)}
        ordered.append(dataclasses.replace(run, order=order))
        first += len(run.questions)
    return ordered


def check_changed(specs: list[RunSpec], deps: Mapping[str, Mapping[str, Deps]],
                  bench_dirs: Mapping[str, Path], root: Path, on_changed: str, log: Log
                  ) -> None:
    """Log the stored records each run redoes because what produced them changed (`deps`
    and `bench_dirs`, the prepared data, by run), or raise a `ResultsError` (naming the
    first) when the sweep says to refuse them."""
    changed = [c for spec in specs
               for c in changed_records(spec.run_id, root / spec.run_id, deps[spec.run_id],
                                        shared_data(bench_dirs[spec.run_id]))]
    if changed and on_changed == "refuse":
        more = f" (and {len(changed) - 1} more stages)" if len(changed) > 1 else ""
        raise ResultsError(f"{changed[0].describe()}{more}; on_changed = \"refuse\": "
                             f"nothing run (on_changed = \"redo\" redoes them)")
    for change in changed:
        log(f"{change.describe()}: redone")
