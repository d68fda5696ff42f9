"""Sweep configuration: one TOML or YAML file expands into a grid of runs.

The types of a sweep's tables and of its runs; reading and checking a file is
`tmem_core.pipeline._config_load`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any, Literal

from tmem_core import ConfigError, allowed, check_range
from tmem_core.methods import get_method, method_names
from tmem_core.pipeline._judges import grid_judges, judge_prompt_identity, run_judges
from tmem_core.retrieval import EmbedderConfig


@dataclass(frozen=True)
class BenchmarkConfig:
    name: str
    source: str | None = None  # native file/folder, prepared on the fly
    prepared: str | None = None  # a folder written by jobs.prepare
    size: int = 2000  # synthetic only
    seed: int = 0
    variant: str = "base"
    limit: int | None = None  # first N questions (by qid) per benchmark
    categories: tuple[str, ...] = ()  # keep only these categories (empty: all)
    spread: str = "category"  # what `limit` takes questions round-robin over

    def __post_init__(self) -> None:
        _not_negative(self, "size", "seed", "limit")
        if self.spread not in SPREADS:
            raise ConfigError("", f"spread: unknown value {self.spread!r}; {allowed(SPREADS)}")

    def identity(self) -> dict[str, Any]:
        """The benchmark as a run's identity holds it (`spread` only when not the default,
        so that the ids of runs from before it existed stay as they were)."""
        fields_ = asdict(self)
        if self.spread == SPREADS[0]:
            del fields_["spread"]
        return fields_


SPREADS = ("category", "conversation")
"""`limit` over categories round-robin (a small limit still covers every category), or over
conversations round-robin, each conversation's questions in category round-robin order (a
limit spread evenly over a benchmark's conversations)."""


@dataclass(frozen=True)
class Resources:
    """Actors and resources of the stages. By default the stages are fused into one actor
    pool of max(retrieve_actors, llm_actors) actors of `cpus_per_actor` CPUs each; with
    `fuse_stages = false` each stage has its own pool (retrieval `retrieve_actors` actors of
    `cpus_per_actor` CPUs, the LLM stages `llm_actors` actors of 0.1 CPU).

    Questions stream: each stage call takes `batch_size` questions (0: at most 32, and at
    least 4 calls per actor where the sweep has the questions); fused stages pass each
    question on the moment it is done, a single stage a call's questions together. Every
    actor runs as many calls at once as it takes to keep
    `questions_in_flight` questions in each pool (0: enough to hold every replica of every
    backbone of the sweep at its engine's slots, `max_num_seqs`; never more than the sweep's
    questions). Of an actor's questions, at most `retrievals_per_actor` run their method's
    retrieval (CPU-bound, and what holds the most memory) at once; the others wait for their
    turn holding only their row, so an actor's memory stays bounded however many questions it
    keeps in flight. A call's records are on disk before its questions move on; when a run is
    done its parts are merged into one per store. Every backbone
    runs `engine_replicas` engine replicas unless its own `replicas` says otherwise; a
    replica of a GPU engine holds its engine's GPUs (tensor x pipeline parallel shards x
    `gpus_per_shard`), or `gpus_per_engine` if that is more.

    `cluster_gpus` and `gpus_per_node` state the GPU cluster the sweep is meant for (0: not
    stated); the driver and `jobs.plan` refuse engines that do not fit it. The driver waits
    `placement_timeout_s` for the engine replicas to be placed (and a Serve application to
    run) before it ends the sweep saying what could not be placed. A replica whose engine
    fails to start tries again after `engine_start_backoff_s` (doubling),
    `engine_start_attempts` times in all; when every replica of a backbone gave up, the
    sweep ends with one line saying why. A Serve application gives up after as many failed
    replica starts (Serve's `max_constructor_retry_count`)."""

    fuse_stages: bool = True
    retrieve_actors: int = 1
    llm_actors: int = 1
    batch_size: int = 0
    questions_in_flight: int = 0
    retrievals_per_actor: int = 2
    cpus_per_actor: float = 0.5  # retrieve actors (and vLLM stage actors); others take 0.1
    gpus_per_engine: float = 0.0  # at least this many per GPU replica (0: the engine's own)
    engine_replicas: int = 1
    max_task_retries: int = 2
    cluster_gpus: int = 0
    gpus_per_node: int = 0
    placement_timeout_s: float = 1800.0
    engine_start_attempts: int = 3
    engine_start_backoff_s: float = 30.0

    def __post_init__(self) -> None:
        _not_negative(self, *(f.name for f in fields(self) if f.name != "fuse_stages"))
        for key in ("engine_replicas", "engine_start_attempts", "retrievals_per_actor"):
            check_range(key, getattr(self, key))


@dataclass(frozen=True)
class GridConfig:
    """What the runs vary: each run takes one benchmark, method, backbone, Top-k and budget.

    `top_k` is every method's retrieval depth, `budget` the context's token budget (the
    README's evidence contract says what each method does with them); `judges`: backbones
    that judge every run, or "self" (each run judged by its own backbone,
    `tmem_core.pipeline._judges`), by default the first backbone.

    Test-time computation (T2Mem paper Figure 2, A.3, A.5), absent unless given:
    `reasoning_budget` N (each reasoning call asks for at most N reasoning tokens, its
    `max_tokens` is N + 64, the answer stage reasons within N too) and `steps` (the
    construction steps, Tmax). Each applies to the methods that declare it (`axes` of the
    method registry: T2Mem and Search-o1 both, Naive RAG the reasoning budget); a sweep
    varying an axis refuses any other method. `memory_quality` asks the first judge to score
    each question's constructed memory (paper §5.3)."""

    methods: tuple[str, ...]
    backbones: tuple[str, ...]
    judges: tuple[str, ...] | Literal["self"] | None = None
    top_k: tuple[int, ...] = (36,)
    budget: tuple[int, ...] = (8192,)
    judge_repeats: int = 1
    reasoning_budget: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    memory_quality: bool = False

    def __post_init__(self) -> None:
        for key in ("methods", "backbones"):
            if not getattr(self, key):
                raise ConfigError(f"grid.{key}", "expected a non-empty list")
        object.__setattr__(self, "judges", grid_judges(self.judges))
        for key in ("top_k", "budget", *AXES):
            for value in getattr(self, key):
                if value <= 0:
                    raise ConfigError(f"grid.{key}", f"expected positive integers, got "
                                                     f"{value!r}")
        if self.judge_repeats <= 0:
            raise ConfigError("grid.judge_repeats", f"expected a positive integer, got "
                                                    f"{self.judge_repeats!r}")


AXES = ("reasoning_budget", "steps")
"""The grid's test-time computation axes; a run's identity holds one only when it is set."""


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: benchmark x method (+params) x backbone x judges x k x budget
    (x reasoning budget x steps, where the grid varies them)."""

    sweep: str
    benchmark: BenchmarkConfig
    method: str
    params: Mapping[str, Any]
    backbone: str
    judges: tuple[str, ...]
    top_k: int
    budget: int
    judge_repeats: int = 1
    judge_prompts: Mapping[str, str] = field(default_factory=dict)  # bundled name -> file
    plugins: tuple[str, ...] = ()  # modules that register methods, benchmarks or backends
    reasoning_budget: int | None = None
    steps: int | None = None
    memory_quality: bool = False
    construct_backbone: str | None = None  # the method's LLM steps' backbone, if not `backbone`
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)

    @cached_property
    def run_id(self) -> str:
        digest = hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()
        axes = "".join(f"_{tag}{value}" for tag, value in (("r", self.reasoning_budget),
                                                           ("s", self.steps)) if value)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{self.benchmark.name}_{self.method}_"
                                                   f"{self.backbone}_k{self.top_k}_b{self.budget}"
                                                   f"{axes}")
        return f"{slug}_{digest[:8]}"

    @property
    def backbone_names(self) -> tuple[str, ...]:
        """The backbones the run calls: its own, its construct backbone, its judges."""
        return tuple(dict.fromkeys([self.backbone, *filter(None, [self.construct_backbone]),
                                    *self.judges]))

    @property
    def axes(self) -> dict[str, int]:
        """The test-time axes this run sets."""
        return {a: v for a in AXES if (v := getattr(self, a)) is not None}

    @property
    def method_params(self) -> dict[str, Any]:
        """The method's parameter table with the parameters its axes set."""
        declared = get_method(self.method).axes if self.method in method_names() else {}
        return {**self.params, **{param: self.axes[a] for a, param in declared.items()
                                  if a in self.axes and param is not None}}

    def identity(self) -> dict[str, Any]:
        """Everything that changes a run's results (and so its id): a method revised since
        its first definition adds its version (so the ids of unchanged methods stay as they
        were), a judge prompt file its content's hash, a construct backbone its name (only
        when the sweep gives one), an embedder its model (only when not the default)."""
        return {"benchmark": self.benchmark.identity(), "method": self.method,
                **method_version(self.method),
                "params": dict(self.params), "backbone": self.backbone,
                "judges": list(self.judges), "top_k": self.top_k, "budget": self.budget,
                "judge_repeats": self.judge_repeats,
                "judge_prompts": judge_prompt_identity(self.benchmark.name, self.judge_prompts),
                **self.axes, **({"memory_quality": True} if self.memory_quality else {}),
                **({"construct_backbone": self.construct_backbone}
                   if self.construct_backbone is not None else {}),
                **self.embedder.identity()}


def method_version(name: str) -> dict[str, int]:
    """`{"method_version": v}` for a method revised since its first definition (v >= 2);
    nothing for one never revised, so the ids of its runs stay what they were."""
    version = get_method(name).version if name in method_names() else 1
    return {"method_version": version} if version > 1 else {}


@dataclass(frozen=True)
class SweepConfig:
    """A sweep file as loaded: `methods` holds each method's parameter table as given.

    `construct_backbones`: per method of the grid, the backbone its LLM steps (memory and
    construction: T-MEM's selection and structuring, say) run on instead of each run's
    backbone, which still answers; the judges are the grid's. A method none is given to runs
    them on the run's backbone; one whose construction calls no LLM is refused one.

    `on_changed`: what a re-run does with stored records whose dependencies (backbone
    definition, prompts, method version and parameters; `tmem_core.pipeline._deps`) changed
    since they were written: "redo" them (saying which and why), or "refuse" to start.

    `embedder`: the sentence embedder of every run's dense retrieval (`EmbedderConfig`)."""

    name: str
    benchmarks: tuple[BenchmarkConfig, ...]
    grid: GridConfig
    methods: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    results_dir: str = "results"
    backbones_file: str | None = None
    judge_prompts: Mapping[str, str] = field(default_factory=dict)
    construct_backbones: Mapping[str, str] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()
    on_changed: Literal["redo", "refuse"] = "redo"
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)

    def __post_init__(self) -> None:
        if not self.benchmarks:
            raise ConfigError("benchmarks", "expected a non-empty list")

    @property
    def judges(self) -> tuple[str, ...]:
        """Every backbone that judges a run of the sweep."""
        return tuple(dict.fromkeys(j for b in self.grid.backbones
                                   for j in run_judges(self.grid.judges, b, self.grid.backbones)))

    @property
    def backbone_names(self) -> tuple[str, ...]:
        """Every backbone the sweep runs engines for: the grid's, its judges', the methods'
        construct backbones."""
        return tuple(dict.fromkeys([*self.grid.backbones, *self.judges,
                                    *self.construct_backbones.values()]))

    def runs(self) -> list[RunSpec]:
        grid = self.grid
        return [
            RunSpec(self.name, bench, method, dict(self.methods.get(method, {})),
                    backbone, run_judges(grid.judges, backbone, grid.backbones), k, budget,
                    grid.judge_repeats,
                    dict(self.judge_prompts), self.plugins, reasoning, steps,
                    grid.memory_quality, self.construct_backbones.get(method),
                    self.embedder)
            for bench, method, backbone, k, budget, reasoning, steps in itertools.product(
                self.benchmarks, grid.methods, grid.backbones, grid.top_k, grid.budget,
                grid.reasoning_budget or (None,), grid.steps or (None,))
        ]


def _not_negative(config: object, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is not None:
            check_range(name, value, 0)

