"""T2Mem parameters (paper §4 defaults, our engineering settings) and its named ablations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tmem_core import check_range
from tmem_core.methods._reasoning import ReasonedSteps

EpisodeMode = Literal["auto", "session", "channel_day", "topic_window"]
Units = Literal["metadata", "summary", "graph", "raw"]
Action = Literal["search", "read", "answer"]


@dataclass(frozen=True)
class T2MemConfig(ReasonedSteps):
    """Paper defaults (§4, §A.3): the first SearchMeta takes the grid's `top_k` entries (k = 5
    in the paper; every method's initial retrieval depth), each later one `search_top_k`
    (k = 1), at most `max_steps` steps (Tmax = 5), each step's output up to
    `step_max_tokens` = 1,024 tokens (answers up to 1,024). A step's text fields and an
    episode's extracted entries are bounded by the tokens of their call, not by characters;
    `max_entries` (None: no limit) bounds the entries of an episode where a config asks for
    lighter metadata (the CPU configs, whose 512-token extraction holds 3).

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
    wherever the context allows. A step prompt shows the memory notes written so far, the
    newest first within `memory_tokens` (the room a prompt keeps for them; older notes stay
    in the final memory and the step record counts those left out of a prompt).

    The grid's `reasoning_budget` N (paper A.3): each step's prompt asks for at most N
    tokens of reasoning and memory note, its output is cut at N + 64 tokens, and the schema
    bounds the reasoning and memory fields to N tokens' characters between them (the action
    and argument to the 64 tokens' characters), so a step ends within its output.
    A parameter the other settings leave unused is refused when given (`ignored`).
    """

    episodes: EpisodeMode = "auto"
    units: Units = "metadata"
    read_raw: bool = True
    rollout: bool = True
    search_top_k: int = 1
    max_steps: int = 5
    episode_tokens: int = 2048
    raw_tokens: int = 2048
    memory_tokens: int = 640
    topic_gap_hours: float = 24.0
    max_entries: int | None = None  # metadata entries per episode (None: no limit)
    max_triples: int = 12  # graph triples per episode
    extract_max_tokens: int = 1024

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("search_top_k", "max_steps", "episode_tokens", "raw_tokens",
                     "memory_tokens", "max_triples", "extract_max_tokens"):
            check_range(name, getattr(self, name))
        if self.max_entries is not None:
            check_range("max_entries", self.max_entries)
        check_range("topic_gap_hours", self.topic_gap_hours, 0, above=True)

    def ignored(self) -> dict[str, str]:
        """Parameters these settings leave unused, each with the setting that does."""
        unused = [("topic_gap_hours", "episodes", self.episodes != "topic_window"),
                  ("max_entries", "units", self.units != "metadata"),
                  ("max_triples", "units", self.units != "graph"),
                  ("extract_max_tokens", "units", self.units == "raw"),
                  ("raw_tokens", "read_raw", not self.read_raw),
                  *((name, "rollout", not self.rollout)
                    for name in ("search_top_k", "max_steps", "memory_tokens", "raw_tokens"))]
        return {name: f"{setting} = {getattr(self, setting)!r}"
                for name, setting, unused_here in unused if unused_here}

    @property
    def steps(self) -> int:
        """Construction steps: Tmax, or 1 without rollout."""
        return self.max_steps if self.rollout else 1

    def actions(self, step: int) -> tuple[Action, ...]:
        """Actions allowed at `step` (from 1): only Answer at the last one."""
        if step >= self.steps:
            return ("answer",)
        return ("search", "read", "answer") if self.read_raw else ("search", "answer")
