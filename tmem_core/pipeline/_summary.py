"""A run's end: its records validated, its contract closed, its summary line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tmem_core.benchmarks import get_protocol
from tmem_core.methods import get_method
from tmem_core.pipeline._actors import STAGES
from tmem_core.pipeline._answer_stage import AnswerStage
from tmem_core.pipeline._judge_stage import JudgeStage
from tmem_core.pipeline._method_stages import ConstructStage
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._stage import shared_data, shared_prepared
from tmem_core.pipeline._validators import (
    budget_respected,
    context_checks,
    no_gold_ids_in_prompts,
    no_gold_in_prompts,
    question_counts,
)
from tmem_core.results import calls_store
from tmem_core.results._accuracy import mean_exact_match, overall_accuracy
from tmem_core.results._calibration import JudgeCalibration, judge_calibrations
from tmem_core.results._count import run_count
from tmem_core.results._current import expected_deps
from tmem_core.results._degradation import degradation_counts, degraded
from tmem_core.results._layout import CALIBRATION, calibration_store, compact_run
from tmem_core.results._store import InForce, in_force
from tmem_core.schema import gold_from_table, questions_from_table


@dataclass
class RunSummary:
    """What a run returns: its outcome as the job log and callers read it (what it was is
    its `Run`)."""

    run_id: str
    questions: int
    stage_errors: dict[str, int]
    accuracy: float | None
    judged: int  # questions with a score in `accuracy`
    tokens: int  # the method's calls as if run (`run_count`): reused memories once
    cost_usd: float  # spent now: every attempt that reached an engine, failed ones too
    seconds: float  # from the start of the sweep's stages to the run's last record
    run_dir: Path
    method_cost_usd: float = 0.0  # every call priced as if run (cache hits, reused memories)
    calibration_tokens: int = 0  # the judges' controls, never the method's
    calibration_cost_usd: float = 0.0  # spent now
    exact_match: float | None = None
    calibrations: tuple[JudgeCalibration, ...] = ()
    degradation: dict[str, int] = field(default_factory=dict)
    stale: dict[str, int] = field(default_factory=dict)  # per stage, keys under superseded deps

    def line(self) -> str:
        acc = "n/a" if self.accuracy is None else f"{self.accuracy:.3f}"
        unreliable = [c.describe() for c in self.calibrations if not c.reliable]
        if unreliable:  # an accuracy no one should quote without the reason
            acc = f"{acc} UNRELIABLE ({'; '.join(unreliable)})"
        em = "" if self.exact_match is None else f", exact match {self.exact_match:.3f}"
        errors = sum(self.stage_errors.values())
        worse = degraded(self.degradation)
        fallbacks = f", DEGRADED {worse}" if worse else ""
        stale = (f", {sum(self.stale.values())} stale {self.stale} (made under superseded "
                 "dependencies, not scored)" if self.stale else "")
        return (f"run {self.run_id}: {self.questions} questions, accuracy {acc} "
                f"({self.judged} judged){em}, {errors} errors {self.stage_errors}{stale}"
                f"{fallbacks}, "
                f"{self.tokens} tokens, ${self.cost_usd:.4f} spent now "
                f"(${self.method_cost_usd:.4f} as if run), calibration "
                f"{self.calibration_tokens} tokens ${self.calibration_cost_usd:.4f}, "
                f"done at {self.seconds:.1f}s")


def finish_run(run: Run, seconds: float) -> RunSummary:
    """Validate the run's records, close its contract and summarise it (`seconds`: when it
    was done, from the start of the sweep's stages); its parts are merged first."""
    compact_run(run.run_dir)
    histories = {s.name: s.store_for(run.run_dir).read_all() for s in STAGES}  # read once
    histories[CALIBRATION] = calibration_store(run.run_dir).read_all()
    data = shared_data(run.bench_dir)
    records = {name: in_force(history, expected_deps(run.deps, name, data))
               for name, history in histories.items()}
    run.contract.validators = _validate(run, histories, records)
    run.contract.finish()
    run.contract.write(run.run_dir)
    return summarise(run, seconds, records)


def _validate(run: Run, histories: dict[str, pa.Table], records: Mapping[str, InForce]
              ) -> dict[str, dict[str, Any]]:
    latest = {name: r.done for name, r in records.items()}
    prepared = shared_prepared(run.bench_dir)
    questions = {q.qid: q for q in questions_from_table(prepared.questions)}
    gold = gold_from_table(prepared.questions)
    out = {
        "question_counts": question_counts([q for q, _ in run.questions],
                                           {s.name: histories[s.name] for s in STAGES}),
        "budget": budget_respected(latest[ConstructStage.name], run.spec.budget),
        "no_gold_in_prompts": no_gold_in_prompts(
            latest[AnswerStage.name], latest[ConstructStage.name], questions, gold,
            get_protocol(run.spec.benchmark.name)),
        "no_gold_ids_in_prompts": no_gold_ids_in_prompts(calls_store(run.run_dir).read_all()),
        **context_checks(latest[ConstructStage.name], get_method(run.spec.method)),
    }
    return {name: v.as_dict() for name, v in out.items()}


def summarise(run: Run, seconds: float, records: Mapping[str, InForce]) -> RunSummary:
    """The run's summary line, from its stages' and calibration's records in force
    (`in_force`, the rule the report and the viewer count by); accuracy as the report
    defines it."""
    stages = [s.name for s in STAGES]
    judged_records = records[JudgeStage.name].done
    accuracy, judged = overall_accuracy(
        judged_records, get_protocol(run.spec.benchmark.name).reports_separately)
    count = run_count(calls_store(run.run_dir).read_all())
    return RunSummary(
        run_id=run.run_id, questions=len(run.questions),
        stage_errors={name: records[name].failed.num_rows for name in stages},
        accuracy=accuracy, judged=judged, tokens=count.tokens, cost_usd=count.cost_usd,
        seconds=seconds, run_dir=run.run_dir, method_cost_usd=count.method_cost_usd,
        calibration_tokens=count.calibration_tokens,
        calibration_cost_usd=count.calibration_cost_usd,
        exact_match=mean_exact_match(judged_records),
        calibrations=tuple(judge_calibrations(records[CALIBRATION].done, run.spec.judges)),
        degradation=degradation_counts(
            records[ConstructStage.name].done.column("degradation").to_pylist()),
        stale={name: n for name in stages if (n := records[name].stale.num_rows)})
