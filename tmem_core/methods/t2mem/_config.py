"""T2Mem parameters (paper §4 defaults, our engineering settings) and its named ablations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tmem_core.methods._reasoning import ReasoningBudget, reasoning_budget

EpisodeMode = Literal["auto", "session", "channel_day", "topic_window"]
Units = Literal["metadata", "summary", "graph", "raw"]
Action = Literal["search", "read", "answer"]


@dataclass(frozen=True)
class T2MemConfig:
    """Paper defaults: k = 5 for the first SearchMeta, k = 1 after it, at most 5 steps.

    Ablations: `units="raw"` (no metadata: SearchMeta searches raw messages), `units="summary"`
    (one summary per episode instead of structured metadata), `units="graph"` (an
    entity-relation graph per episode: at most `max_triples` subject-relation-object triples,
    each dated, each its own entry), `read_raw=False` (no ReadRaw),
    `rollout=False` (one step over the initial retrieval whose only action is Answer: the
    LazyMem-like one-shot baseline).

    Ours (not from the paper): `episodes="auto"` takes sessions when every message has a
    session id and at most two authors speak, else channel-days; `topic_window` groups a
    topic's messages (channel when there is no topic) and breaks where the gap exceeds
    `topic_gap_hours`. An episode longer than `episode_tokens` (or than the extraction prompt
    leaves of the backbone's context) is cut into balanced parts, each its own episode.
    A ReadRaw page holds at most `raw_tokens` tokens of rendered messages (less where a step
    prompt leaves less of the backbone's context); a part longer than a page is read page by
    page, so with the default (`raw_tokens` = `episode_tokens`) one read shows a whole part
    wherever the context allows.

    `reasoning_tokens` N (the grid's `reasoning_budget`, paper A.3): each step's prompt asks
    for at most N tokens of reasoning and memory note, its output is cut at N + 64 tokens
    (instead of `step_max_tokens`), and the schema's reasoning and memory limits scale with
    N (3 characters a token, shared as in the defaults, 3 to 4). None: no budget asked.
    """

    episodes: EpisodeMode = "auto"
    units: Units = "metadata"
    read_raw: bool = True
    rollout: bool = True
    k_initial: int = 5
    k_search: int = 1
    max_steps: int = 5
    episode_tokens: int = 2048
    raw_tokens: int = 2048
    topic_gap_hours: float = 24.0
    max_entries: int = 6  # metadata entries per episode
    max_triples: int = 12  # graph triples per episode
    extract_max_tokens: int = 1024
    step_max_tokens: int = 512
    reasoning_tokens: int | None = None

    def __post_init__(self) -> None:
        reasoning_budget(self.reasoning_tokens)  # positive when given
        for name in ("k_initial", "k_search", "max_steps", "episode_tokens", "raw_tokens",
                     "max_entries", "max_triples", "extract_max_tokens", "step_max_tokens"):
            if getattr(self, name) <= 0:
                raise ValueError(f"T2MemConfig.{name} must be positive, got {getattr(self, name)}")
        if self.topic_gap_hours <= 0:
            raise ValueError("T2MemConfig.topic_gap_hours must be positive")

    @property
    def budget(self) -> ReasoningBudget | None:
        return reasoning_budget(self.reasoning_tokens)

    @property
    def output_tokens(self) -> int:
        """`max_tokens` of a step: N + 64 under a reasoning budget, else `step_max_tokens`."""
        return self.step_max_tokens if self.budget is None else self.budget.max_tokens

    @property
    def steps(self) -> int:
        """Construction steps: Tmax, or 1 without rollout."""
        return self.max_steps if self.rollout else 1

    def actions(self, step: int) -> tuple[Action, ...]:
        """Actions allowed at `step` (from 1): only Answer at the last one."""
        if step >= self.steps:
            return ("answer",)
        return ("search", "read", "answer") if self.read_raw else ("search", "answer")
