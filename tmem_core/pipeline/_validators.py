"""End-of-run validators; each returns a verdict stored in the run contract."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tmem_core.evaluation import GUARDED_STAGES, Protocol, answer_prompt, gold_leaks
from tmem_core.methods import Check, MethodSpec
from tmem_core.schema import Gold, Question

MAX_LISTED = 20


@dataclass
class Verdict:
    passed: bool
    checked: int
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checked": self.checked,
                "problems": self.problems[:MAX_LISTED], "problem_count": len(self.problems)}


def verdict(checked: int, problems: Iterable[str]) -> Verdict:
    found = list(problems)
    return Verdict(not found, checked, found)


def question_counts(qids: list[str], stages: dict[str, pa.Table]) -> Verdict:
    """Every question has a record (success or error) in each stage it reached."""
    problems = []
    alive = set(qids)
    for stage, table in stages.items():
        rows = table.to_pylist()
        seen = {r["qid"] for r in rows}
        problems += [f"{stage}: no record for {q}" for q in sorted(alive - seen)]
        failed = {r["qid"] for r in rows if not r["ok"]} - {r["qid"] for r in rows if r["ok"]}
        alive -= failed | (alive - seen)
    return verdict(len(qids), problems)


def budget_respected(construct: pa.Table, budget: int) -> Verdict:
    rows = [r for r in construct.to_pylist() if r["ok"]]
    return verdict(len(rows), (f"{r['qid']}: {r['tokens']} tokens > {budget}"
                               for r in rows if r["tokens"] > budget))


def no_gold_ids_in_prompts(calls: pa.Table) -> Verdict:
    """No prompt of a guarded stage (memory, retrieve, construct, answer) held a gold-derived
    id: a source id or session of gold evidence, an abstention question's id, a gold_meta id
    (each call records what the stage's guard found in its prompt). A call recorded more than
    once (a question redone after a crash, a memory reused from an earlier run) counts once,
    flagged if any of its rows is."""
    flagged: dict[str, tuple[str, set[str]]] = {}
    for r in calls.select(["key", "stage", "qid", "leaks"]).to_pylist():
        if r["stage"] in GUARDED_STAGES:
            flagged.setdefault(r["key"], (f"{r['stage']} {r['qid']}", set()))[1].update(
                r["leaks"] or ())
    return verdict(len(flagged), (f"{call}: prompt holds {', '.join(sorted(leaks))}"
                                  for call, leaks in flagged.values() if leaks))


def no_gold_in_prompts(answers: pa.Table, construct: pa.Table, questions: dict[str, Question],
                       gold: dict[str, Gold], protocol: Protocol) -> Verdict:
    """No gold answer in an answer prompt outside its evidence context, beyond what the
    prompt shows that question without any evidence (its question and instructions)."""
    contexts = {r["qid"]: r for r in construct.to_pylist() if r["ok"]}
    rows = [r for r in answers.to_pylist() if r["prompt"]]
    problems = []
    for r in rows:
        construct_record = contexts.get(r["qid"], {})
        question, g = questions[r["qid"]], gold[r["qid"]]
        bare, _ = answer_prompt(question, construct_record.get("kind") or "flat", "", protocol,
                                g.options if g.answer_kind == "choice" else None)
        problems += gold_leaks(json.loads(r["prompt"]), construct_record.get("context") or "",
                               " ".join(m["content"] for m in bare), g)
    return verdict(len(rows), problems)


def context_checks(construct: pa.Table, spec: MethodSpec[Any]) -> dict[str, Verdict]:
    """The checks the run's method registered, on each stored context (its construct record
    and the ids it presents)."""
    rows = [r for r in construct.to_pylist() if r["ok"]]
    return {name: verdict(len(rows), (p for r in rows for p in _checked(check, spec, r)))
            for name, check in spec.checks.items()}


def _checked(check: Check, spec: MethodSpec[Any], record: dict[str, Any]) -> list[str]:
    try:
        problems = check(spec.stored_record(record["payload"]), record["context_ids"])
    except (TypeError, KeyError, ValueError) as exc:
        problems = [f"unreadable construct record ({type(exc).__name__}: {exc})"]
    return [f"{record['qid']}: {p}" for p in problems]
