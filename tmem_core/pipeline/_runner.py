"""The driver: prepare data, start engines, stream each run through the stages, summarise."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import ray
from ray.data import ActorPoolStrategy
from ray.data.context import DEFAULT_TARGET_MAX_BLOCK_SIZE

from tmem_core._typed import ConfigError
from tmem_core.benchmarks import (
    LoadRequest,
    content_identity,
    get_protocol,
    prepare,
    read_prepared,
)
from tmem_core.benchmarks._prepare import prepared_variant
from tmem_core.llm import (
    SERVE_BACKEND,
    BackboneConfig,
    check_tokenizers,
    expected_tokenizers,
    get_backend,
    load_backbones,
    tokenizer_identity,
)
from tmem_core.methods import get_method
from tmem_core.pipeline._actors import (
    FLOW_SCHEMA,
    STAGES,
    FusedStages,
    PerRun,
    split_by_run,
    unpack,
)
from tmem_core.pipeline._answer_stage import AnswerStage
from tmem_core.pipeline._capacity import check_sweep_gpus, questions_in_flight, with_replicas
from tmem_core.pipeline._config import BenchmarkConfig, Resources, RunSpec, SweepConfig
from tmem_core.pipeline._contract import Contract
from tmem_core.pipeline._deps import RecordsChanged, changed_records, run_dependencies
from tmem_core.pipeline._engine import (
    StartWatch,
    await_placement,
    check_local_engines,
    close_local_engines,
    engine_handles,
    replica_gpus,
)
from tmem_core.pipeline._judge_stage import JudgeStage
from tmem_core.pipeline._method_stages import ConstructStage, RetrieveStage
from tmem_core.pipeline._probe import PROBE_ENV
from tmem_core.pipeline._serve import deploy as deploy_serve
from tmem_core.pipeline._serve import undeploy as undeploy_serve
from tmem_core.pipeline._stage import Stage, StageJob, shared_data
from tmem_core.pipeline._validators import (
    budget_respected,
    context_checks,
    no_gold_ids_in_prompts,
    no_gold_in_prompts,
    question_counts,
)
from tmem_core.pipeline._watch import ClusterWatch, Landed
from tmem_core.prompts import load_prompt, prompt_names
from tmem_core.results import (
    CALIBRATION,
    SWEEP_FILE,
    Deps,
    InForce,
    JudgeCalibration,
    Lease,
    calibration_store,
    calls_store,
    compact_run,
    degradation_counts,
    degraded,
    expected_deps,
    in_force,
    judge_calibrations,
    mean_exact_match,
    merge_run_levels,
    overall_accuracy,
    remove_leftovers,
    run_count,
    write_atomic,
)
from tmem_core.schema import gold_from_table, questions_from_table

Log = Callable[[str], None]
LOCAL_RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
PROPAGATED_ENV = ("TMEM_CACHE_DIR", "HF_HUB_OFFLINE", "HF_HOME")
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # set by Ray's job server for the entrypoint


def init_ray(num_cpus: int | None = None, env: Mapping[str, str] | None = None) -> None:
    """Join the cluster named by RAY_ADDRESS (with the token authentication settings of the
    environment, see cluster/env.sh), or start a local one on loopback; `env`: variables of
    every worker besides the driver's own that they need."""
    if ray.is_initialized():
        return
    for key, value in LOCAL_RAY_ENV.items():
        os.environ.setdefault(key, value)
    env_vars = worker_env(env or {})
    runtime_env = {"env_vars": env_vars} if env_vars else None
    address = cluster_address()
    if address:
        ray.init(address=address, log_to_driver=True, runtime_env=runtime_env)
    else:
        # address="local": a new cluster even when another one runs on this machine; it has
        # no job server, and token authentication is on if the environment turned it on
        # before Ray was imported (Ray reads it once)
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address="local", num_cpus=num_cpus, object_store_memory=256 * 1024**2,
                 include_dashboard=False, log_to_driver=True, runtime_env=runtime_env)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the job log gets one progress line per batch
    # each map task would poll its process's memory from a thread of its own every second:
    # a stage actor runs hundreds of question tasks at once
    context.memory_usage_poll_interval_s = None
    context.issue_detectors_config.high_memory_detector_config.detection_time_interval_s = -1


def worker_env(needed: Mapping[str, str]) -> dict[str, str]:
    """The variables this driver adds to its workers' runtime env: `needed`, and the
    PROPAGATED_ENV the driver has (workers of an existing cluster do not inherit the driver's
    environment), less those the Ray job's own runtime env already sets (a submitted job's:
    `ray job submit --runtime-env`, a RayJob's `runtimeEnvYAML`). Ray refuses a driver whose
    runtime env names a variable the job's names too, even with the same value; a variable the
    job sets to another value than the driver needs is a `ConfigError`."""
    wanted = {**{k: os.environ[k] for k in PROPAGATED_ENV if k in os.environ}, **needed}
    job_env = job_runtime_env().get("env_vars") or {}
    clashes = [f"{k}={job_env[k]!r} (needed: {v!r})" for k, v in needed.items()
               if k in job_env and job_env[k] != v]
    if clashes:
        raise ConfigError("", f"the Ray job's runtime env sets {', '.join(clashes)}: leave "
                          f"{'these' if len(clashes) > 1 else 'it'} to the driver")
    return {k: v for k, v in wanted.items() if k not in job_env}


def job_runtime_env() -> dict[str, Any]:
    """The runtime env of the Ray job that started this driver (empty when none did)."""
    return dict(_job_config().get("runtime_env") or {})


def _job_config() -> dict[str, Any]:
    """The job config Ray's job server hands this driver (empty when none started it)."""
    return dict(json.loads(os.environ.get(JOB_CONFIG_ENV) or "{}"))


def cluster_address() -> str | None:
    """The GCS address ("host:port") of the cluster RAY_ADDRESS names; None when it names none.

    The job server's address (`http://...`, as cluster/env.sh sets it) stands for the head
    last started in the environment's RAY_TEMP_DIR (its `ray_current_cluster` file): Ray's
    own `address="auto"` reads /tmp/ray's, which names another head when this one was started
    in a folder of its own. RAY_ADDRESS is set to the result, which `ray.init` reads first."""
    address = os.environ.get("RAY_ADDRESS")
    if not address or not address.startswith("http"):
        return address or None
    current = Path(os.environ.get("RAY_TEMP_DIR") or "/tmp/ray") / "ray_current_cluster"
    try:
        gcs = current.read_text().strip()
    except OSError:
        raise ConfigError("RAY_ADDRESS", f"{address}: no Ray head was started in "
                                         f"{current.parent} (no {current.name} file); set "
                                         "RAY_TEMP_DIR to the head's --temp-dir, or RAY_ADDRESS "
                                         "to its GCS address (host:port)") from None
    os.environ["RAY_ADDRESS"] = gcs
    return gcs


@dataclass
class RunSummary:
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


def run_sweep(config: SweepConfig, log: Log = print, local: bool = False
              ) -> list[RunSummary]:
    """Every run of the grid, through one pipeline whose actors serve all runs in turn (so
    runs neither start actors nor drain the pipeline at their boundaries); each run's summary
    is logged as soon as its last question is out. `local` runs the stages in this process."""
    backbones = {name: with_replicas(b, config.resources)
                 for name, b in load_backbones(config.backbones_file).items()}
    check_sweep_gpus(config)
    check_tokenizers(backbones[n] for n in config.backbone_names)
    root = Path(config.results_dir).absolute() / config.name
    missing = [root / "data", *(f for f in (root, *root.parents) if not f.exists())]
    held = False
    try:
        with Lease(root, log) as lease:  # LeaseHeld: another driver writes this sweep
            assert lease.holder is not None
            held = True
            for path in remove_leftovers(root, lease.holder.since):
                log(f"removed {path}: left over by an interrupted write")
            runs = config.runs()
            deps = {run.run_id: run_dependencies(run, backbones) for run in runs}
            # the data first: a source that cannot be read ends the sweep before anything
            # else is written (a prepared copy is named by its content: no run reads it yet)
            bench_dirs = {b: prepare_benchmark(b, root / "data") for b in config.benchmarks}
            check_changed(runs, deps, {r.run_id: bench_dirs[r.benchmark] for r in runs}, root,
                          config.on_changed, log)  # before any record or contract changes
            write_atomic(root / SWEEP_FILE,
                         json.dumps(_sweep_json(config), indent=2, default=str))
            if not local:  # every worker checks that it counts tokens as this node does
                init_ray(env=expected_tokenizers(backbones[n] for n in config.backbone_names))
                lease.note(_ray_job())
            plans = in_order([plan_run(run, bench_dirs[run.benchmark], backbones, root,
                                       local, deps[run.run_id], config.resources)
                              for run in runs])
            return _run_held(config, plans, log, local)
    finally:  # a sweep that wrote nothing leaves no folder behind (rmdir: only empty ones)
        for folder in missing if held else ():
            with contextlib.suppress(OSError):
                folder.rmdir()


def _run_held(config: SweepConfig, plans: list[RunPlan], log: Log, local: bool
              ) -> list[RunSummary]:
    """`run_sweep` once its driver holds the sweep folder's lease and planned its runs."""
    summaries: list[RunSummary] = []
    started = 0.0  # when the stages start: each summary says when its run was done after it

    def finished(plan: RunPlan) -> None:
        summaries.append(finish_run(plan, time.time() - started))
        log(summaries[-1].line())

    replicas: dict[str, list[Any]] = {}  # the driver holds every replica for the whole sweep
    served: list[BackboneConfig] = []  # and every Ray Serve LLM application
    try:
        if not local:
            start_engines(plans, config, replicas, served)
        started = time.time()
        if local:
            _run_plain(plans, config.resources, Progress(plans, log, check_local_engines),
                       finished)
        else:
            with ClusterWatch(ray.get_runtime_context().gcs_address, lambda: landed(plans)):
                _stream(plans, config.resources,
                        Progress(plans, log, StartWatch(replicas).check), finished)
    finally:
        close_engines(h for handles in replicas.values() for h in handles)
        close_local_engines()
        for backbone in served:
            undeploy_serve(backbone)
    return summaries


def check_changed(runs: list[RunSpec], deps: Mapping[str, Mapping[str, Deps]],
                  bench_dirs: Mapping[str, Path], root: Path, on_changed: str, log: Log
                  ) -> None:
    """Log the stored records each run redoes because what produced them changed (`deps`
    and `bench_dirs`, the prepared data, by run), or raise `RecordsChanged` (naming the
    first) when the sweep says to refuse them."""
    changed = [c for run in runs
               for c in changed_records(run.run_id, root / run.run_id, deps[run.run_id],
                                        shared_data(bench_dirs[run.run_id]))]
    if changed and on_changed == "refuse":
        more = f" (and {len(changed) - 1} more stages)" if len(changed) > 1 else ""
        raise RecordsChanged(f"{changed[0].describe()}{more}; on_changed = \"refuse\": "
                             f"nothing run (on_changed = \"redo\" redoes them)")
    for change in changed:
        log(f"{change.describe()}: redone")


def _ray_job() -> str:
    """This driver's Ray job, with its submission id when `ray job submit` started it."""
    job = ray.get_runtime_context().get_job_id()
    submitted = _job_config().get("metadata") or {}
    submission = submitted.get("job_submission_id")
    return f"{submission} (driver job {job})" if submission else job




def start_engines(plans: list[RunPlan], config: SweepConfig, replicas: dict[str, list[Any]],
                  served: list[BackboneConfig]) -> None:
    """Deploy the sweep's Serve applications and create every backbone's replica actors
    (noted in `served` and `replicas`, so that they are stopped however this ends), waiting
    until they are placed."""
    resources = config.resources
    backbones = {b.name: b for plan in plans for b in plan.backbones}
    for backbone in backbones.values():
        if backbone.backend == SERVE_BACKEND:
            served.append(backbone)  # deleted when the sweep ends, even if it never ran
            deploy_serve(backbone, resources.placement_timeout_s,
                         resources.engine_start_attempts)
        replicas[backbone.name] = engine_handles(
            backbone, resources.gpus_per_engine, config.plugins,
            (resources.engine_start_attempts, resources.engine_start_backoff_s))
    await_placement(replicas, {name: replica_gpus(b, resources.gpus_per_engine)
                               for name, b in backbones.items()},
                    resources.placement_timeout_s)


def landed(plans: list[RunPlan]) -> tuple[Landed, ...]:
    return tuple(Landed(p.job.run.run_id, p.done, len(p.questions)) for p in plans)


def close_engines(handles: Iterable[Any]) -> None:
    """Stop each engine's backend (its server process), then the actor."""
    for handle in handles:
        try:
            ray.get(handle.close.remote(), timeout=60)
        except Exception as exc:  # a dead engine has nothing left to stop
            print(f"engine close: {exc}")
        ray.kill(handle)


def _sweep_json(config: SweepConfig) -> dict[str, Any]:
    return {**asdict(config), "runs": [r.run_id for r in config.runs()]}


def prepare_benchmark(bench: BenchmarkConfig, data_root: Path) -> Path:
    """The prepared folder of a benchmark: given, or prepared once under the sweep, named by
    what it is made from (`content_identity`: the source's content, not its path, and the
    adapter's version), so that a changed source is prepared again."""
    if bench.prepared:  # as it is, or its revisions=N variant, made once
        return prepared_variant(Path(bench.prepared), bench.variant, bench.seed, data_root)
    request = LoadRequest(source=Path(bench.source) if bench.source else None,
                          size=bench.size, seed=bench.seed, variant=bench.variant)
    identity = content_identity(bench.name, request)
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    folder = f"{bench.name}-{digest}"
    target = data_root / folder
    if not (target / "manifest.json").exists():
        prepare(bench.name, request, data_root, folder=folder)
    return target


def select_questions(bench_dir: Path, bench: BenchmarkConfig) -> list[tuple[str, str]]:
    """(qid, conv_id) of the run: category filter (a category the benchmark does not have
    is refused), then the first `limit` round-robin over
    categories (so a small limit still covers every category), or with `spread =
    "conversation"` round-robin over conversations, each in that order."""
    table = read_prepared(bench_dir).questions.select(["qid", "conv_id", "category"])
    rows = sorted(table.to_pylist(), key=lambda r: r["qid"])
    known = {r["category"] for r in rows}
    if unknown := sorted(set(bench.categories) - known):
        raise ConfigError("benchmarks.categories", f"{bench.name} has no question of type "
                          f"{', '.join(unknown)}; its types: {', '.join(sorted(known))}")
    if bench.categories:
        rows = [r for r in rows if r["category"] in bench.categories]
    ordered = _round_robin(rows, "category")
    if bench.spread == "conversation":
        ordered = _round_robin(ordered, "conv_id")
    chosen = ordered[: bench.limit] if bench.limit else ordered
    return [(r["qid"], r["conv_id"]) for r in chosen]


def _round_robin(rows: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    """`rows` taken one per value of `column` in turn (values in sorted order), keeping the
    order of each value's rows."""
    rank: Counter[str] = Counter()
    ranked = []
    for index, row in enumerate(rows):
        ranked.append((rank[row[column]], row[column], index, row))
        rank[row[column]] += 1
    return [row for *_, row in sorted(ranked, key=lambda r: r[:3])]


@dataclass
class RunPlan:
    """A run as the driver follows it: the stages' job, its questions, contract, progress."""

    job: StageJob
    questions: list[tuple[str, str]]
    contract: Contract
    prepared: Any
    out: set[str] = field(default_factory=set)  # qids of the questions out of the last stage
    failed: Counter[str] = field(default_factory=Counter)  # of them, failed, by stage

    @property
    def done(self) -> int:
        return len(self.out)

    @property
    def backbones(self) -> tuple[BackboneConfig, ...]:
        return self.job.backbones

    @property
    def run_dir(self) -> Path:
        return Path(self.job.run_dir)


def plan_run(run: RunSpec, bench_dir: Path, backbones: dict[str, BackboneConfig], root: Path,
             local: bool = False, deps: Mapping[str, Deps] | None = None,
             resources: Resources | None = None) -> RunPlan:
    """A run's contract (written now, with its earlier attempts), questions and stage job
    (`deps`: each stage's dependencies, `run_dependencies` by default; `resources`: the
    sweep's, the defaults if not given)."""
    run_dir = root / run.run_id
    prepared = read_prepared(bench_dir)
    prompts = [*prompt_names(), *run.judge_prompts.values()]
    generation = {name: {**backbones[name].generation(),
                         "tokenizer": tokenizer_identity(backbones[name].tokenizer)}
                  for name in run.backbone_names}
    deps = deps if deps is not None else run_dependencies(run, backbones)
    contract = Contract.start(run, _data_facts(prepared.manifest, bench_dir),
                              {n: load_prompt(n).sha256 for n in prompts}, generation, run_dir,
                              deps)
    contract.write(run_dir)
    questions = select_questions(bench_dir, run.benchmark)
    job = StageJob(run, str(run_dir), str(bench_dir), backbones[run.backbone],
                   tuple(backbones[j] for j in run.judges), os.environ.get(PROBE_ENV, ""),
                   local, deps, contract.git_commit,
                   backbones[run.construct_backbone] if run.construct_backbone else None,
                   (resources or Resources()).retrievals_per_actor)
    return RunPlan(job, questions, contract, prepared)


def in_order(plans: list[RunPlan]) -> list[RunPlan]:
    """The plans with each question's place among the sweep's questions (runs in grid order,
    a run's questions as selected): the engines run waiting requests by it, so questions
    finish in that order and a run's results are complete early, rather than every question
    advancing a call at a time and all of them finishing together at the end."""
    first = 0
    for plan in plans:
        order = {qid: first + index for index, (qid, _) in enumerate(plan.questions)}
        plan.job = dataclasses.replace(plan.job, order=order)
        first += len(plan.questions)
    return plans


def finish_run(plan: RunPlan, seconds: float) -> RunSummary:
    """Validate the run's records, close its contract and summarise it (`seconds`: when it
    was done, from the start of the sweep's stages); its parts are merged first."""
    run_dir = plan.run_dir
    compact_run(run_dir)
    histories = {s.name: s.store_for(run_dir).read_all() for s in STAGES}  # read once
    histories[CALIBRATION] = calibration_store(run_dir).read_all()
    data = shared_data(Path(plan.job.bench_dir))
    records = {name: in_force(history, expected_deps(plan.job.deps, name, data))
               for name, history in histories.items()}
    qids = [q for q, _ in plan.questions]
    plan.contract.validators = _validate(plan.job, qids, plan.prepared, histories, records)
    plan.contract.finish()
    plan.contract.write(run_dir)
    return summarise(plan.job.run, run_dir, len(qids), seconds, records)


def _data_facts(manifest: dict[str, Any], bench_dir: Path) -> dict[str, Any]:
    return {"dir": str(bench_dir), "source": manifest.get("source"),
            "messages": manifest.get("messages"), "questions": manifest.get("questions"),
            "schema_version": manifest.get("schema_version")}


def _flow_rows(job: StageJob, questions: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The run's questions as the rows that flow through the stages (`FLOW_SCHEMA`)."""
    empty = dict.fromkeys(FLOW_SCHEMA.names)
    return [{**empty, "run_id": job.run.run_id, "qid": q, "conv_id": c, "ok": True}
            for q, c in questions]


def _run_plain(plans: list[RunPlan], resources: Resources, progress: Progress,
               finished: Callable[[RunPlan], None]) -> None:
    """The same stages in this process without Ray: a debugging aid and the overhead baseline
    (each run's questions in chunks of the questions in flight)."""
    for plan in plans:
        stages = FusedStages(plan.job)
        rows = _flow_rows(plan.job, plan.questions)
        chunk = questions_in_flight(plan.job.backbones, resources, len(rows))
        for start in range(0, len(rows), chunk):
            out = stages(rows[start:start + chunk])
            progress.add(plan, pa.Table.from_pylist(out, schema=FLOW_SCHEMA))
            merge_run_levels(plan.run_dir)
        finished(plan)


def _stream(plans: list[RunPlan], resources: Resources, progress: Progress,
            finished: Callable[[RunPlan], None]) -> None:
    """All runs through one Ray Data pipeline (fed in grid order, which Ray Data need not
    keep); a run is finished when its last question comes out of the last stage."""
    for plan in [p for p in plans if not p.questions]:
        finished(plan)
    plans = [p for p in plans if p.questions]
    if not plans:
        return
    rows = [row for plan in plans for row in _flow_rows(plan.job, plan.questions)]
    pools = _stage_pools([p.job for p in plans], resources)
    in_flight = questions_in_flight([b for p in plans for b in p.job.backbones], resources,
                                    len(rows))
    size = block_size(resources, len(rows), pools[0][1], in_flight)
    # a block per stage call (`size` questions): blocks are Ray Data's unit of scheduling,
    # and they spread over all of a stage's actors (from_items builds the blocks here;
    # from_arrow_refs would start a task per block); what a fused call yields is passed on
    # at once (STREAMED_BLOCK_BYTES), one pool per stage keeps a call's questions one block
    ray.data.DataContext.get_current().target_max_block_size = (
        STREAMED_BLOCK_BYTES if resources.fuse_stages else DEFAULT_TARGET_MAX_BLOCK_SIZE)
    ds: ray.data.Dataset = ray.data.from_items(rows, override_num_blocks=-(-len(rows) // size))
    jobs = {plan.job.run.run_id: plan.job for plan in plans}
    for stage, actors, cpus in pools:
        # enough calls at once per actor (threads of its own) to keep `in_flight` questions
        # in the pool; no more queued at an actor than it runs, so a question waits for an
        # actor rather than behind another question
        calls = max(1, -(-in_flight // (actors * size)))
        pool = ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=calls,
                                 max_concurrent_calls_per_actor=calls,
                                 enable_true_multi_threading=True)
        with warnings.catch_warnings():
            # retries can only be bounded through the deprecated remote args (Ray Data's own
            # default retries a batch that kills its worker forever)
            warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
            ds = ds.map_batches(
                PerRun, fn_constructor_kwargs={"stage": stage, "jobs": jobs}, batch_size=None,
                batch_format="pyarrow", compute=pool, num_cpus=cpus, max_restarts=-1,
                max_task_retries=resources.max_task_retries)
    by_id = {plan.job.run.run_id: plan for plan in plans}
    merged: dict[str, float] = {}  # when each run's stores were last merged
    # no prefetch: with it, Ray Data hands each batch over only once the next one is done,
    # so every progress line and run summary would wait for the following batch
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0):
        for run_id, part in split_by_run(unpack(batch) if resources.fuse_stages else batch):
            plan = by_id[run_id]
            progress.add(plan, part)
            if plan.done == len(plan.questions):
                finished(plan)
            elif time.monotonic() - merged.get(run_id, 0.0) >= MERGE_EVERY_S:
                merge_run_levels(plan.run_dir)  # its stores keep few parts while it streams
                merged[run_id] = time.monotonic()
    # a call retried after its actor died yields its questions again, in the order they end,
    # and Ray drops what it yielded before by position: one may show twice and another not
    # at all; every record is on disk once the stream is done
    for plan in plans:
        if plan.done < len(plan.questions):
            finished(plan)


class Progress:
    """Job-log lines as questions come out of the last stage (the first, then at most one
    per `every_s` seconds, and each run's last): the run's questions done / total and
    failures by stage, the sweep's questions done / total, throughput and ETA. Questions
    with failures run `check` first (it raises to end the sweep, e.g. when no engine of a
    backbone will start)."""

    def __init__(self, plans: list[RunPlan], log: Log,
                 check: Callable[[], None] = lambda: None, every_s: float = 5.0) -> None:
        self.total = sum(len(plan.questions) for plan in plans)
        self.done = 0
        self.log, self.check, self.every_s = log, check, every_s
        self.started = time.time()
        self._logged: float | None = None

    def add(self, plan: RunPlan, part: pa.Table) -> None:
        """Questions out of the last stage; one already out (a retried call's) counts once."""
        qids = part.column("qid").to_pylist()
        fresh = [i for i, qid in enumerate(qids) if qid not in plan.out]
        plan.out.update(qids)
        part = part.take(pa.array(fresh, pa.int64())) if len(fresh) < len(qids) else part
        errors = [e for e in part.column("error").to_pylist() if e]
        if errors:
            self.check()
        plan.failed.update(e.split(":", 1)[0] for e in errors)
        self.done += part.num_rows
        now = time.time()
        if (self._logged is not None and now - self._logged < self.every_s and not errors
                and plan.done < len(plan.questions)):
            return
        self._logged = now
        rate = self.done / max(now - self.started, 1e-9)
        eta = (self.total - self.done) / rate
        failed = ", ".join(f"{stage} {n}" for stage, n in plan.failed.items()) or "none"
        self.log(f"[progress] {plan.job.run.run_id}: {plan.done}/{len(plan.questions)} "
                 f"questions through all stages (failed: {failed}); sweep "
                 f"{self.done}/{self.total}, {rate:.3g} q/s, ETA {eta:.0f}s")


MERGE_EVERY_S = 2.0
"""How often the driver merges a streaming run's store parts (`merge_run_levels`): a
question out of the stages used to merge each time, 1.3 ms each, 0.4 s of a 4.5 s warm-cache
run of 300 questions. The parts written meanwhile are bounded by the writers' group commits
in that time."""
BLOCK_MAX = 32
BLOCKS_PER_ACTOR = 4
STREAMED_BLOCK_BYTES = 1
"""Ray Data's target block size in a sweep: a block is passed on as soon as it holds
anything, so each packed row a fused call yields (its questions done together) moves on
alone (by default Ray Data gathers a call's outputs up to 128 MiB, here until the call ends,
and it splits a larger block into rows)."""


def block_size(resources: Resources, questions: int, actors: int, in_flight: int) -> int:
    """Questions per stage call: `resources.batch_size`, else at most BLOCK_MAX, few enough
    for BLOCKS_PER_ACTOR calls per actor, and no more than an actor's share of the questions
    `in_flight` (the calls run at once are counted to hold those). A fused call yields each
    question when it is done, so a call is no barrier: fewer, larger calls cost Ray Data
    fewer tasks (745 one-question tasks took 3.3 s to start half their questions in a
    16-replica sweep, 32-question calls 1.6 s, with a third less of the machine's CPU over
    the sweep)."""
    if resources.batch_size:
        return resources.batch_size
    return max(1, min(BLOCK_MAX, -(-questions // (actors * BLOCKS_PER_ACTOR)),
                      -(-in_flight // actors)))


def _stage_pools(jobs: list[StageJob], resources: Resources
                 ) -> list[tuple[type[Stage] | type[FusedStages], int, float]]:
    """(stage class, actors, CPUs per actor) of each actor pool, in flow order."""
    if resources.fuse_stages:
        actors = max(resources.retrieve_actors, resources.llm_actors)
        return [(FusedStages, actors, resources.cpus_per_actor)]
    in_process = any(get_backend(job.method_backbone.backend).in_process
                     or get_backend(job.backbone.backend).in_process for job in jobs)
    llm_cpus = resources.cpus_per_actor if in_process else 0.1  # else they wait on the engine
    return [(stage, resources.retrieve_actors, resources.cpus_per_actor)
            if stage is RetrieveStage else (stage, resources.llm_actors, llm_cpus)
            for stage in STAGES]


def _validate(job: StageJob, qids: list[str], prepared: Any, histories: dict[str, pa.Table],
              records: Mapping[str, InForce]) -> dict[str, dict[str, Any]]:
    latest = {name: r.done for name, r in records.items()}
    questions = {q.qid: q for q in questions_from_table(prepared.questions)}
    gold = gold_from_table(prepared.questions)
    out = {
        "question_counts": question_counts(qids, {s.name: histories[s.name] for s in STAGES}),
        "budget": budget_respected(latest[ConstructStage.name], job.run.budget),
        "no_gold_in_prompts": no_gold_in_prompts(
            latest[AnswerStage.name], latest[ConstructStage.name], questions, gold,
            get_protocol(job.run.benchmark.name)),
        "no_gold_ids_in_prompts": no_gold_ids_in_prompts(
            calls_store(Path(job.run_dir)).read_all()),
        **context_checks(latest[ConstructStage.name], get_method(job.run.method)),
    }
    return {name: v.as_dict() for name, v in out.items()}


def summarise(run: RunSpec, run_dir: Path, questions: int, seconds: float,
              records: Mapping[str, InForce]) -> RunSummary:
    """The run's summary line, from its stages' and calibration's records in force
    (`in_force`, the rule the report and the viewer count by); accuracy as the report
    defines it."""
    stages = [s.name for s in STAGES]
    judged_records = records[JudgeStage.name].done
    accuracy, judged = overall_accuracy(judged_records,
                                        get_protocol(run.benchmark.name).reports_separately)
    count = run_count(calls_store(run_dir).read_all())
    return RunSummary(
        run_id=run.run_id, questions=questions,
        stage_errors={name: records[name].failed.num_rows for name in stages},
        accuracy=accuracy, judged=judged, tokens=count.tokens, cost_usd=count.cost_usd,
        seconds=seconds, run_dir=run_dir, method_cost_usd=count.method_cost_usd,
        calibration_tokens=count.calibration_tokens,
        calibration_cost_usd=count.calibration_cost_usd,
        exact_match=mean_exact_match(judged_records),
        calibrations=tuple(judge_calibrations(records[CALIBRATION].done, run.judges)),
        degradation=degradation_counts(
            records[ConstructStage.name].done.column("degradation").to_pylist()),
        stale={name: n for name in stages if (n := records[name].stale.num_rows)})
