"""Read a sweep's results: run configs from contract.json, and each store's records in force
(`in_force`: under the dependencies the contract and the prepared data say are in force)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from tmem_core import DataError
from tmem_core.benchmarks import get_protocol, read_prepared
from tmem_core.evaluation import recall_scorable
from tmem_core.results._attempts import contract_attempts, mixed
from tmem_core.results._count import HISTORY_COLUMNS, counted_calls
from tmem_core.results._current import QuestionData, expected_deps, question_data
from tmem_core.results._evidence import basis_columns
from tmem_core.results._layout import (
    CALIBRATION,
    CALLS,
    CONTRACT_FILE,
    MEMORY_QUALITY,
    RECORD_STAGES,
    STORES,
    SWEEP_FILE,
    calibration_store,
    calls_store,
    memory_quality_store,
    run_dirs,
    stage_store,
)
from tmem_core.results._store import InForce, in_force
from tmem_core.schema import Gold, gold_from_table

LARGE_COLUMNS = ("context", "trace", "payload", "prompt")  # not read by the reports
QUESTION_SCHEMA = pl.Schema({"run_id": pl.String, "qid": pl.String, "conv_id": pl.String,
                             "category": pl.String, "answer_kind": pl.String,
                             "evidence": pl.Int64, "scorable": pl.Boolean,
                             "separate": pl.Boolean})
RUN_SCHEMA = pl.Schema({
    "run_id": pl.String, "benchmark": pl.String, "dataset": pl.String,
    "question_set": pl.String, "categories": pl.String, "method": pl.String, "addition": pl.Boolean,
    "params": pl.String,
    "backbone": pl.String, "construct_backbone": pl.String, "judges": pl.String,
    "top_k": pl.Int64, "budget": pl.Int64,
    "reasoning_budget": pl.Int64, "steps": pl.Int64, "judge_repeats": pl.Int64,
    "config_sha256": pl.String, "git_commit": pl.String,
    "started_at": pl.Float64, "ended_at": pl.Float64, "wall_s": pl.Float64,
    "data_dir": pl.String})
VALIDATOR_SCHEMA = pl.Schema({"run_id": pl.String(), "validator": pl.String(),
                              "passed": pl.Boolean(), "checked": pl.Int64(),
                              "problem_count": pl.Int64(), "problems": pl.List(pl.String)})
ATTEMPTS_SCHEMA = pl.Schema({"run_id": pl.String, "attempts": pl.Int64, "commits": pl.String,
                             "mixed": pl.String})
CONSTRUCT = "construct"
_HISTORY = ("run_id", "key", "qid", "conv_id", "ok", "error", "written_at")


@dataclass(frozen=True)
class SweepResults:
    """A sweep's results as polars frames; every frame has a `run_id` column.

    `records[store]`: the successful record in force per key of each run (`in_force`;
    stores: retrieve, construct, answer, judge, calibration, memory_quality, calls), without
    the large text columns; construct records also have `evidence_basis` and `linked_ids`
    (see `evidence_basis`). `calls`: every call identity of each run as `counted_calls`
    counts it (the one count of tokens and cost; read it, not `records["calls"]`, for
    totals). `failures`: every failed attempt, `resolved` unless its key's record in force
    is a failure. `stale`: per store, the keys with no record under the dependencies in force,
    their newest record (made under superseded ones: counted, never scored). `questions`: every
    question with a record in a run, with its gold facts. `gold[run_id]`: gold by qid.
    `attempts`: per run, how many drivers' passes its contract records, their commits, and
    what they differ in (`mixed`: code and package versions; null when nothing).
    """

    root: Path
    name: str
    runs: pl.DataFrame
    validators: pl.DataFrame
    records: Mapping[str, pl.DataFrame]
    calls: pl.DataFrame
    failures: pl.DataFrame
    questions: pl.DataFrame
    gold: Mapping[str, Mapping[str, Gold]]
    attempts: pl.DataFrame
    stale: pl.DataFrame


@dataclass(frozen=True)
class _Benchmark:
    gold: dict[str, Gold]
    category: dict[str, str]
    data: dict[str, QuestionData]

    @classmethod
    def read(cls, data_dir: Path) -> _Benchmark:
        prepared = read_prepared(data_dir)
        table = prepared.questions
        qids, categories = (table.column(c).to_pylist() for c in ("qid", "category"))
        return cls(gold_from_table(table), dict(zip(qids, categories, strict=True)),
                   question_data(prepared.messages, table))


@dataclass(frozen=True)
class _Run:
    contract: dict[str, Any]
    data_dir: Path
    records: dict[str, pl.DataFrame]
    calls: pl.DataFrame
    failures: pl.DataFrame
    qids: pl.DataFrame
    stale: pl.DataFrame


def read_sweep(root: Path) -> SweepResults:
    """Every run under `root` (each folder with a contract.json)."""
    found = run_dirs(root)
    if not found:
        raise DataError(f"no runs (no */{CONTRACT_FILE}): not a sweep folder", file=str(root))
    benchmarks: dict[Path, _Benchmark] = {}
    runs = [_read_run(d, root, benchmarks) for d in found]
    return SweepResults(
        root=root, name=_sweep_name(root),
        runs=pl.DataFrame([_run_row(r) for r in runs], schema=RUN_SCHEMA),
        validators=_validators(runs),
        records={s: pl.concat([r.records[s] for r in runs]) for s in STORES},
        calls=pl.concat([r.calls for r in runs]),
        failures=pl.concat([r.failures for r in runs]),
        questions=pl.concat([_questions(r, benchmarks[r.data_dir]) for r in runs]),
        gold={r.contract["run_id"]: benchmarks[r.data_dir].gold for r in runs},
        attempts=pl.DataFrame([_attempts_row(r.contract) for r in runs], schema=ATTEMPTS_SCHEMA),
        stale=pl.concat([r.stale for r in runs]))


def _sweep_name(root: Path) -> str:
    sweep_json = root / SWEEP_FILE
    return str(json.loads(sweep_json.read_text())["name"]) if sweep_json.exists() else root.name


def _read_run(run_dir: Path, root: Path, benchmarks: dict[Path, _Benchmark]) -> _Run:
    """A run's records; `benchmarks`: the prepared benchmarks read so far, by folder."""
    contract = json.loads((run_dir / CONTRACT_FILE).read_text())
    run_id = pl.lit(contract["run_id"]).alias("run_id")  # the contract's id names the run
    data_dir = _data_dir(contract, root)
    if data_dir not in benchmarks:
        benchmarks[data_dir] = _Benchmark.read(data_dir)
    data = benchmarks[data_dir].data
    stores = {**{s: stage_store(run_dir, s) for s in RECORD_STAGES},
              CALIBRATION: calibration_store(run_dir),
              MEMORY_QUALITY: memory_quality_store(run_dir), CALLS: calls_store(run_dir)}
    tables = {name: store.read_all() for name, store in stores.items()}  # read once
    forced = {name: in_force(t, None if name == CALLS  # calls: `counted_calls` counts them
                             else expected_deps(contract.get("deps"), name, data))
              for name, t in tables.items()}
    histories = {name: _history(t).with_columns(run_id) for name, t in tables.items()}
    qids = pl.concat([histories[s].select("qid", "conv_id") for s in RECORD_STAGES])
    return _Run(
        contract=contract,
        data_dir=data_dir,
        records={name: _latest(name, f.done).with_columns(run_id)
                 for name, f in forced.items()},
        calls=counted_calls(_frame(tables[CALLS].select(list(HISTORY_COLUMNS)))
                            .with_columns(run_id)),
        failures=pl.concat([_failed(name, histories[name], forced[name]) for name in STORES]),
        qids=qids.unique("qid", keep="first", maintain_order=True),
        stale=pl.concat([_stale(name, forced[name]).with_columns(run_id)
                         for name in STORES if name != CALLS]))


def _data_dir(contract: dict[str, Any], root: Path) -> Path:
    """The prepared benchmark the run read; under this sweep's data/ when moved."""
    recorded = Path(contract["data"]["dir"])
    return recorded if recorded.exists() else root / "data" / recorded.name


def _latest(store: str, table: pa.Table) -> pl.DataFrame:
    """The successful records in force without their large columns; construct records with
    their evidence basis (read from the construct record before it is dropped)."""
    if store == CONSTRUCT:
        for name, column in basis_columns(table).items():
            table = table.append_column(name, column)
    return _frame(table.drop_columns([c for c in LARGE_COLUMNS if c in table.column_names]))


def _history(table: pa.Table) -> pl.DataFrame:
    extra = [c for c in ("stage", "error_kind") if c in table.column_names]
    return _frame(table.select([*_HISTORY, *extra]))


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _failed(store: str, history: pl.DataFrame, forced: InForce) -> pl.DataFrame:
    """Failed attempts of one store; `stage` is the store, or the LLM call's stage;
    `resolved` unless its key's record in force (`forced`) is a failure."""
    unresolved = pl.Series(forced.failed.column("key").to_pylist(), dtype=pl.String)
    stage = pl.col("stage") if store == CALLS else pl.lit(store)
    kind = pl.col("error_kind") if store == CALLS else pl.lit(None, pl.String)
    return history.filter(~pl.col("ok")).select(
        "run_id", pl.lit(store).alias("store"), stage.alias("stage"), "key", "qid", "error",
        kind.alias("error_kind"), "written_at",
        ~pl.col("key").is_in(unresolved.implode()).alias("resolved"))


STALE_SCHEMA = pl.Schema({"store": pl.String, "key": pl.String, "qid": pl.String,
                          "deps": pl.String, "written_at": pl.Float64})


def _stale(store: str, forced: InForce) -> pl.DataFrame:
    """The keys of one store with no record in force: their newest record's identity."""
    table = forced.stale
    return pl.DataFrame({"store": [store] * table.num_rows,
                         **{c: table.column(c).to_pylist() for c in list(STALE_SCHEMA)[1:]}},
                        schema=STALE_SCHEMA)


def _run_row(run: _Run) -> dict[str, Any]:
    c = run.contract
    config = c["config"]
    ended = c.get("ended_at")
    return {
        "run_id": c["run_id"], "benchmark": config["benchmark"]["name"],
        "dataset": dataset_label(config["benchmark"]),
        "question_set": question_set(config["benchmark"]),
        "categories": ",".join(config["benchmark"].get("categories") or ()),
        "method": config["method"], "addition": bool(c.get("method", {}).get("addition")),
        "params": json.dumps(config["params"], sort_keys=True),
        "backbone": config["backbone"], "construct_backbone": config.get("construct_backbone"),
        "judges": ",".join(config["judges"]),
        "top_k": config["top_k"], "budget": config["budget"],
        "reasoning_budget": config.get("reasoning_budget"), "steps": config.get("steps"),
        "judge_repeats": config["judge_repeats"], "config_sha256": c["config_sha256"],
        "git_commit": c.get("git_commit"), "started_at": c["started_at"], "ended_at": ended,
        "wall_s": None if ended is None else ended - c["started_at"],
        "data_dir": str(run.data_dir)}


def _attempts_row(contract: dict[str, Any]) -> dict[str, Any]:
    attempts = contract_attempts(contract)
    differ = mixed(attempts)
    return {"run_id": contract["run_id"], "attempts": len(attempts),
            "commits": ", ".join(dict.fromkeys(str(a.git_commit)[:8] for a in attempts)),
            "mixed": "; ".join(differ) if differ else None}


def question_set(benchmark: dict[str, Any]) -> str:
    """Which questions a run asks: runs with the same benchmark config (source, size, seed,
    variant, limit, categories) ask the same ones."""
    text = json.dumps(benchmark, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def dataset_label(benchmark: dict[str, Any]) -> str:
    """The benchmark and which data of it: the file or folder it was read from (a synthetic
    set: its size and seed), and its variant when not the base one."""
    origin = benchmark.get("source") or benchmark.get("prepared")
    parts = [benchmark["name"]]
    if origin:
        parts.append(Path(origin).name)
    elif benchmark["name"] == "synthetic":
        parts.append(f"{benchmark.get('size')}/{benchmark.get('seed')}")
    if benchmark.get("variant", "base") != "base":
        parts.append(str(benchmark["variant"]))
    return " ".join(parts)


def _validators(runs: list[_Run]) -> pl.DataFrame:
    rows = [{"run_id": r.contract["run_id"], "validator": name, "passed": v["passed"],
             "checked": v["checked"], "problem_count": v["problem_count"],
             "problems": v["problems"]}
            for r in runs for name, v in sorted(r.contract.get("validators", {}).items())]
    return pl.DataFrame(rows, schema=VALIDATOR_SCHEMA)


def _questions(run: _Run, bench: _Benchmark) -> pl.DataFrame:
    """The run's questions (any record in any stage) with category and gold facts."""
    separate = get_protocol(run.contract["config"]["benchmark"]["name"]).reports_separately
    qids = run.qids.get_column("qid").to_list()
    gold = [bench.gold[q] for q in qids]
    return pl.DataFrame({
        "run_id": [run.contract["run_id"]] * len(qids), "qid": qids,
        "conv_id": run.qids.get_column("conv_id").to_list(),
        "category": [bench.category[q] for q in qids],
        "answer_kind": [g.answer_kind for g in gold],
        "evidence": [len(g.evidence_ids) for g in gold],
        "scorable": [recall_scorable(g) for g in gold],
        "separate": [bench.category[q] in separate for q in qids]}, schema=QUESTION_SCHEMA)
