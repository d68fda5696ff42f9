"""The timing model of a simulated engine: continuous batching in virtual time, for the `sim`
backend (`_sim`) and for capacity planning (`jobs.plan`).

`BatchModel` runs in virtual time. A request reaches the scheduler `ttft_s` after it is sent
and joins the running batch at the next step boundary (at most `max_num_seqs` run at once, the
others wait: by `ChatRequest.priority`, then arrival, as vLLM's priority scheduling runs them,
or by arrival alone with `scheduling_policy = "fcfs"`). A decode step costs `step_s`, plus
`step_s_per_seq` for each running sequence, plus `step_s_per_ktok` for each thousand tokens
the batch holds (prompts and outputs so far); the step that admits requests also prefills
their prompt tokens that the prefix cache does not hold, at `prefill_tokens_per_s`. Every
step adds one output token to each running sequence, so one sequence alone decodes at
1 / step time tokens/s.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import math
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from tmem_core import ConfigError
from tmem_core.llm._config import _require_non_negative, _require_policy, _require_positive

BLOCK_CHARS = 256  # prefix-cache granularity: full blocks of the prompt's text


@dataclass(frozen=True)
class SimEngineConfig:
    """A simulated engine; the defaults are close to a ~30B model on one large GPU."""

    seed: int = 0
    ttft_s: float = 0.005  # from sending to reaching the scheduler
    prefill_tokens_per_s: float = 10_000.0
    step_s: float = 0.02
    step_s_per_seq: float = 0.00005
    step_s_per_ktok: float = 0.0001
    max_num_seqs: int = 128
    scheduling_policy: str = "priority"  # vLLM's names: "priority" or "fcfs"
    min_output_tokens: int = 4  # free-text answers: a length drawn in [min, max]
    max_output_tokens: int = 64
    prefix_cache_blocks: int = 65536  # of BLOCK_CHARS characters; 0 = no prefix cache
    # A new revision is a new backbone that answers as the old one did: stage records and
    # request keys change, so every call is made again, but the texts do not (a benchmark
    # measuring the calls again keeps what was computed from the texts, such as embeddings).
    revision: str = ""
    # A request whose prompt holds this text kills the engine (a dead `EngineError`), as a
    # poisoned prompt does a real engine's core (tests of what a crash costs); "" for none.
    crash_on: str = ""

    def __post_init__(self) -> None:
        _require_positive(self, "prefill_tokens_per_s", "step_s", "max_num_seqs",
                          "min_output_tokens")
        _require_non_negative(self, "ttft_s", "step_s_per_seq", "step_s_per_ktok",
                              "prefix_cache_blocks")
        _require_policy(self.scheduling_policy)
        if self.max_output_tokens < self.min_output_tokens:
            raise ConfigError("", "max_output_tokens must be at least min_output_tokens, got "
                             f"{self.max_output_tokens!r}")

    def weights_identity(self) -> str:
        """What changes the answers (the timing does not)."""
        answers = f"sim:{self.seed}:{self.min_output_tokens}-{self.max_output_tokens}"
        return f"{answers}:{self.revision}" if self.revision else answers


@dataclass(frozen=True)
class Pace:
    """How fast a CPU engine answers on this machine, for `jobs.plan`'s wall time: prompt
    tokens read per second, and output tokens per second with every slot decoding (all
    together) and with one sequence alone. A step of the batch model takes a fixed part and a
    part per running sequence, fitted to the two output rates (`timing`)."""

    prompt_tokens_per_s: float
    output_tokens_per_s: float
    output_tokens_per_s_alone: float

    def __post_init__(self) -> None:
        _require_positive(self, "prompt_tokens_per_s", "output_tokens_per_s",
                          "output_tokens_per_s_alone")

    def timing(self, slots: int) -> SimEngineConfig:
        """The batch model of an engine of `slots` slots at this pace."""
        full, alone = slots / self.output_tokens_per_s, 1 / self.output_tokens_per_s_alone
        per_seq = max(0.0, full - alone) / max(1, slots - 1)
        return SimEngineConfig(ttft_s=0.0, prefill_tokens_per_s=self.prompt_tokens_per_s,
                               step_s=max(1e-9, full - per_seq * slots),
                               step_s_per_seq=per_seq, step_s_per_ktok=0.0,
                               max_num_seqs=slots, prefix_cache_blocks=0)


EMBEDDED_PACE = Pace(prompt_tokens_per_s=140.0, output_tokens_per_s=30.0,
                     output_tokens_per_s_alone=30.0)
"""SmolLM2 on llama.cpp (8 slots) inside sweeps on this machine (2 cores shared with the
sweep's stage actors): `make run`'s default.toml sweeps wrote 9,400-11,400 output tokens at
25-26 tok/s in all (README) and read prompts at about 140 tok/s (standalone, as the load
changed, 90-306 tok/s). Alone it decodes no slower than its 8 slots do in all (the two cores
are the limit: standalone, 38 and 117 tok/s alone against 8 and 69 with eight sequences of 64
tokens in two rounds), so one rate for both."""
VLLM_CPU_PACE = Pace(prompt_tokens_per_s=160.0, output_tokens_per_s=28.0,
                     output_tokens_per_s_alone=2.7)
"""SmolLM2 on vLLM's CPU build (`smollm2-vllm-cpu`: bf16, eager, 16 slots) on this machine
with its cores shared (load 15-25): four 1,378-token prompts read at 159 tok/s, one sequence
of 64 tokens decoded at 2.7 tok/s and sixteen at 27.9 tok/s in all (each step's fixed cost
dominates). On a quieter machine it ran at 249, 6.0 and 60.5 tok/s."""


@dataclass
class SimCounters:
    """What a simulated engine did since it started (busy: a batch was running)."""

    requests: int = 0
    steps: int = 0
    busy_s: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of them, found in the prefix cache
    completion_tokens: int = 0
    max_batch: int = 0  # most sequences in one step
    shared_steps: int = 0  # steps that ran more than one sequence
    cpu_s: float = 0.0  # CPU time of a live engine's process since its first request


@dataclass(eq=False)
class Seq:
    """One request inside the model."""

    prompt_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    priority: int = 0  # lower runs first (`ChatRequest.priority`)
    arrived: float = 0.0
    done: int = 0  # output tokens so far
    finished_at: float | None = None
    tag: Any = None  # the caller's handle (the live backend's future)


class BatchModel:
    """Continuous batching in virtual time: `submit` requests, `advance` the clock, collect
    the finished sequences; `next_event` is when the next one finishes if nothing arrives."""

    def __init__(self, config: SimEngineConfig, now: float = 0.0) -> None:
        self.config = config
        self.clock = now
        self.arriving: deque[Seq] = deque()  # submitted, not yet at the scheduler's clock
        self._ready: list[tuple[int, int, Seq]] = []  # heap: (priority, arrival order, seq)
        self._order = itertools.count()
        self.running: list[Seq] = []
        self.counters = SimCounters()
        self._prefill_s = 0.0  # owed by the next step
        self._held = 0  # tokens of the running batch

    def submit(self, seq: Seq, now: float) -> None:
        seq.arrived = now
        self.arriving.append(seq)

    @property
    def waiting(self) -> int:
        """Requests submitted and not running yet."""
        return len(self.arriving) + len(self._ready)

    def advance(self, now: float) -> list[Seq]:
        """Run the model up to `now`; the sequences that finished meanwhile."""
        finished: list[Seq] = []
        while True:
            self._admit()
            if not self.running:
                if self.arriving and self.arriving[0].arrived <= now:
                    self.clock = max(self.clock, self.arriving[0].arrived)
                    continue
                self.clock = max(self.clock, now)
                return finished
            step = self._step_s()
            steps = self._steps_to_event(step)
            if self.clock + self._prefill_s + steps * step > now:
                fit = math.floor((now - self.clock - self._prefill_s) / step)
                if fit > 0:
                    self._run(fit, step)
                return finished
            self._run(steps, step)
            finished.extend(self._retire())

    def next_event(self) -> float | None:
        """When the next sequence finishes (or the next waiting one can join), if no other
        request arrives; None when idle. Call after `advance`."""
        if self.running:
            step = self._step_s()
            return self.clock + self._prefill_s + self._steps_to_event(step) * step
        return self.arriving[0].arrived if self.arriving else None

    def _admit(self) -> None:
        config = self.config
        by_priority = config.scheduling_policy == "priority"
        while self.arriving and self.arriving[0].arrived <= self.clock:
            seq = self.arriving.popleft()
            heapq.heappush(self._ready, (seq.priority if by_priority else 0,
                                         next(self._order), seq))
        while self._ready and len(self.running) < config.max_num_seqs:
            seq = heapq.heappop(self._ready)[2]
            self._prefill_s += (seq.prompt_tokens - seq.cached_tokens) / config.prefill_tokens_per_s
            self._held += seq.prompt_tokens
            self.running.append(seq)
            self.counters.requests += 1
            self.counters.prompt_tokens += seq.prompt_tokens
            self.counters.cached_tokens += seq.cached_tokens
        self.counters.max_batch = max(self.counters.max_batch, len(self.running))

    def _step_s(self) -> float:
        config = self.config
        return (config.step_s + config.step_s_per_seq * len(self.running)
                + config.step_s_per_ktok * self._held / 1000)

    def _steps_to_event(self, step: float) -> int:
        steps = min(s.output_tokens - s.done for s in self.running)
        if self.arriving and len(self.running) < self.config.max_num_seqs:
            until = self.arriving[0].arrived - self.clock - self._prefill_s
            steps = min(steps, max(1, math.ceil(until / step)))
        return steps

    def _run(self, steps: int, step: float) -> None:
        elapsed = self._prefill_s + steps * step
        self.clock += elapsed
        self._prefill_s = 0.0
        counters = self.counters
        counters.busy_s += elapsed
        counters.steps += steps
        counters.completion_tokens += steps * len(self.running)
        if len(self.running) > 1:
            counters.shared_steps += steps
        for seq in self.running:
            seq.done += steps
        self._held += steps * len(self.running)

    def _retire(self) -> list[Seq]:
        done = [s for s in self.running if s.done >= s.output_tokens]
        for seq in done:
            seq.finished_at = self.clock
            self._held -= seq.prompt_tokens + seq.done
        self.running = [s for s in self.running if s.done < s.output_tokens]
        return done


class PrefixCache:
    """Which full text blocks of earlier prompts an engine holds (least recently used out)."""

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self._lru: OrderedDict[bytes, None] = OrderedDict()

    def cached_share(self, text: str) -> float:
        """The share of `text` found as a cached prefix; its blocks are cached from now on."""
        digest, hits, matching = b"", 0, True
        full = len(text) // BLOCK_CHARS
        for index in range(full):
            block = text[index * BLOCK_CHARS:(index + 1) * BLOCK_CHARS].encode()
            digest = hashlib.blake2b(digest + block, digest_size=16).digest()
            if matching and digest in self._lru:
                hits += 1
                self._lru.move_to_end(digest)
            else:
                matching = False
                self._lru[digest] = None
        while len(self._lru) > self.blocks:
            self._lru.popitem(last=False)
        return hits * BLOCK_CHARS / len(text) if text else 0.0
