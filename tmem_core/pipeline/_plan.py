"""A dry run of a sweep: expected LLM calls, tokens, USD and wall time, before any engine starts.

A few questions of each run go through the real stages in this process on simulated twins of
the backbones (same names, tokenizers, sampling and prices; answers at once), which gives each
question's chain of calls with their real prompt sizes. The chains, repeated to the runs' full
question counts, then flow through `BatchModel`s of the engine replicas in virtual time, with
as many questions in flight as the sweep's stage actors hold. An engine on this machine's CPU
(embedded llama.cpp, vLLM's CPU build) runs at its measured `Pace` on its own slots.
"""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tmem_core.llm import BackboneConfig, BatchModel, Seq, SimEngineConfig, load_backbones
from tmem_core.llm._batch_model import Pace
from tmem_core.pipeline._capacity import questions_in_flight, sweep_backbones
from tmem_core.pipeline._config import SweepConfig
from tmem_core.pipeline._data import prepare_benchmark, select_questions
from tmem_core.pipeline._runner import run_sweep
from tmem_core.results import calls_store
from tmem_core.results._layout import conversation_of
from tmem_core.retrieval import EmbedderConfig

INSTANT = SimEngineConfig(ttft_s=0.0, prefill_tokens_per_s=1e12, step_s=1e-9,
                          step_s_per_seq=0.0, step_s_per_ktok=0.0)


@dataclass(frozen=True)
class Call:
    backbone: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class RunEstimate:
    run_id: str
    questions: int
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    chains: list[list[Call]] = field(default_factory=list)  # one per question of the run

    def line(self) -> str:
        return (f"run {self.run_id}: {self.questions} questions, {self.calls} calls, "
                f"{self.prompt_tokens} prompt + {self.completion_tokens} completion tokens, "
                f"${self.cost_usd:.2f}")


@dataclass
class Plan:
    runs: list[RunEstimate]
    replicas: int
    wall_s: float
    busy_s: dict[str, float]  # engine busy seconds by backbone, all its replicas
    in_flight: int = 0  # questions the stages hold at once (`questions_in_flight`)
    max_num_seqs: dict[str, int] = field(default_factory=dict)  # per backbone, one replica

    def lines(self) -> list[str]:
        calls = sum(r.calls for r in self.runs)
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in self.runs)
        usd = sum(r.cost_usd for r in self.runs)
        busy = ", ".join(f"{name} {busy / max(self.wall_s * self.replicas, 1e-9):.2f}"
                         for name, busy in sorted(self.busy_s.items()))
        return [*(r.line() for r in self.runs),
                f"total: {calls} calls, {tokens} tokens, ${usd:.2f}; wall time on "
                f"{self.replicas} replicas per backbone: {self.wall_s / 60:.1f} min "
                f"(engine utilisation {busy})", *self._capacity()]

    def _capacity(self) -> list[str]:
        """How many replicas the questions in flight can keep busy: one call in flight per
        question at a time, a replica full at its `max_num_seqs`."""
        return [f"{name}: {self.in_flight} questions in flight (resources.questions_in_flight"
                f" or the engines' slots, at most the sweep's questions) fill "
                f"{self.in_flight / seqs:.2f} of its {self.replicas} replicas at max_num_seqs "
                f"{seqs}; up to {min(self.replicas, self.in_flight)} have work"
                for name, seqs in sorted(self.max_num_seqs.items())]


def plan_sweep(config: SweepConfig, replicas: int, sample: int = 4,
               timing: SimEngineConfig | None = None, work_dir: Path | None = None) -> Plan:
    """The sweep's expected calls, tokens, USD and wall time on `replicas` replicas per
    backbone; `timing`: the engines' delay model (default: each backbone's own when it is
    simulated, else the built-in `sim` engine's)."""
    backbones = load_backbones(config.backbones_file)
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        sampled = _sample_calls(config, backbones, sample, Path(tmp))
    runs = [_extrapolate(run_id, calls, questions, backbones)
            for run_id, (calls, questions) in sampled.items()]
    models = {name: [BatchModel(_timing(backbones[name], timing)) for _ in range(replicas)]
              for name in {c.backbone for run in runs for chain in run.chains for c in chain}}
    slots = questions_in_flight(sweep_backbones(config, replicas), config.resources,
                                sum(run.questions for run in runs))
    wall = simulate(models, (chain for run in runs for chain in run.chains), slots)
    busy = {name: sum(m.counters.busy_s for m in ms) for name, ms in models.items()}
    seqs = {name: ms[0].config.max_num_seqs for name, ms in models.items() if ms}
    return Plan(runs, replicas, wall, busy, slots, seqs)


def _timing(backbone: BackboneConfig, timing: SimEngineConfig | None) -> SimEngineConfig:
    """`timing`, else a simulated backbone's own engine, an embedded (llama.cpp) or vLLM-CPU
    engine's measured `pace` on its slots, or the built-in `sim` engine (GPU-like)."""
    if timing is not None:
        return timing
    engine = backbone.engine
    if isinstance(engine, SimEngineConfig):
        return engine
    pace = getattr(engine, "pace", None)
    if isinstance(pace, Pace) and not getattr(engine, "gpus_per_shard", 0.0):
        return pace.timing(backbone.slots)
    sim: SimEngineConfig = load_backbones()["sim"].engine
    return sim


def _sample_calls(config: SweepConfig, backbones: dict[str, BackboneConfig], sample: int,
                  tmp: Path) -> dict[str, tuple[Sampled, list[tuple[str, str]]]]:
    """Per run: the calls of its sampled questions, and all its (qid, conv_id). The sample
    embeds with the packaged stand-in: the configured embedder (BGE-M3, say) lives in the
    workers' model cache, not necessarily here, and changes which messages fill a context,
    not how many calls and tokens it takes."""
    twins = tmp / "backbones.yaml"
    twins.write_text(yaml.safe_dump({"backbones": {
        name: {**_fields(b), "backend": "sim", "engine": dataclasses.asdict(INSTANT)}
        for name, b in backbones.items()}}))
    small = dataclasses.replace(
        config, results_dir=str(tmp / "results"), backbones_file=str(twins),
        embedder=EmbedderConfig(),
        benchmarks=tuple(dataclasses.replace(b, limit=min(b.limit or sample, sample))
                         for b in config.benchmarks))
    run_sweep(small, log=lambda _: None, local=True)
    root = tmp / "results" / small.name
    return {run.run_id: (_sampled(root / part.run_id),
                         select_questions(prepare_benchmark(run.benchmark, root / "data"),
                                          run.benchmark))
            for run, part in zip(config.runs(), small.runs(), strict=True)}


def _fields(backbone: BackboneConfig) -> dict[str, object]:
    raw = dataclasses.asdict(backbone)
    return {k: v for k, v in raw.items() if k not in ("name", "engine", "replicas")}


@dataclass
class Sampled:
    """A sampled run's calls in the order they were sent: per question, and the memory
    calls per conversation (built once for all its questions)."""

    questions: list[list[Call]] = field(default_factory=list)
    memory: list[list[Call]] = field(default_factory=list)


def _sampled(run_dir: Path) -> Sampled:
    by_question: dict[str, list[tuple[float, Call]]] = defaultdict(list)
    by_conv: dict[str, list[tuple[float, Call]]] = defaultdict(list)
    for c in calls_store(run_dir).read_all().to_pylist():
        if c["ok"]:
            sent = c["finished_at"] - c["latency_s"]
            call = Call(c["backbone"], c["prompt_tokens"], c["completion_tokens"])
            if c["stage"] == "memory":
                by_conv[conversation_of(c["qid"])].append((sent, call))
            else:
                by_question[c["qid"]].append((sent, call))
    return Sampled([_in_order(v) for _, v in sorted(by_question.items())],
                   [_in_order(v) for _, v in sorted(by_conv.items())])


def _in_order(calls: list[tuple[float, Call]]) -> list[Call]:
    return [call for _, call in sorted(calls, key=lambda sent_call: sent_call[0])]


def _extrapolate(run_id: str, sampled: Sampled, questions: list[tuple[str, str]],
                 backbones: dict[str, BackboneConfig]) -> RunEstimate:
    """The run's chains: its conversations' memory first, then every question, each a copy
    of a sampled one."""
    estimate = RunEstimate(run_id, len(questions))
    conversations = len({conv for _, conv in questions})
    estimate.chains = [*_cycled(sampled.memory, conversations),
                       *_cycled(sampled.questions, len(questions))]
    for call in itertools.chain.from_iterable(estimate.chains):
        estimate.calls += 1
        estimate.prompt_tokens += call.prompt_tokens
        estimate.completion_tokens += call.completion_tokens
        prices = backbones[call.backbone].prices
        estimate.cost_usd += (call.prompt_tokens * prices.input_per_mtok
                              + call.completion_tokens * prices.output_per_mtok) / 1e6
    return estimate


def _cycled(chains: list[list[Call]], count: int) -> list[list[Call]]:
    return [chains[i % len(chains)] for i in range(count)] if chains else []


def simulate(models: dict[str, list[BatchModel]], chains: Iterator[list[Call]], slots: int
             ) -> float:
    """Virtual seconds until every chain is done, `slots` chains in flight at once, each call
    sent to the least busy replica of its backbone."""
    queue = deque(chain for chain in chains if chain)
    now = 0.0

    def send(chain: list[Call], position: int) -> None:
        call = chain[position]
        model = min(models[call.backbone], key=lambda m: len(m.running) + m.waiting)
        model.submit(Seq(call.prompt_tokens, max(1, call.completion_tokens),
                         tag=(chain, position)), now)

    for _ in range(min(slots, len(queue))):
        send(queue.popleft(), 0)
    everyone = [m for ms in models.values() for m in ms]
    while True:
        events = [t for m in everyone if (t := m.next_event()) is not None]
        if not events:
            return now
        now = max(now, min(events))
        finished = [seq for m in everyone for seq in m.advance(now)]
        for seq in finished:
            chain, position = seq.tag
            if position + 1 < len(chain):
                send(chain, position + 1)
            elif queue:
                send(queue.popleft(), 0)
