"""T2Mem (paper §3-4): light episode metadata offline, memory built by an LLM loop at test time.

`T2Mem.prepare` extracts and indexes a conversation's metadata (cached on disk), `retrieve`
is the initial SearchMeta, `construct` runs the SearchMeta / ReadRaw / Answer loop;
It and its ablations are registered methods (`t2mem`, `t2mem_no_raw`, ...); `render_trace`
shows one loop.
"""

from tmem_core.methods._base import NotPrepared
from tmem_core.methods.t2mem._config import Action, EpisodeMode, T2MemConfig, Units
from tmem_core.methods.t2mem._episodes import Episode, episode_mode, fit_lines, segment
from tmem_core.methods.t2mem._extract import (
    CONTEXT_MARGIN,
    EXTRACT_STAGE,
    ConstructionStats,
    Entry,
    extraction_schema,
)
from tmem_core.methods.t2mem._index import MemoryIndex
from tmem_core.methods.t2mem._loop import STEP_STAGE, step_schema
from tmem_core.methods.t2mem._method import T2Mem
from tmem_core.methods.t2mem._render import render_trace

__all__ = [
    "CONTEXT_MARGIN",
    "EXTRACT_STAGE",
    "STEP_STAGE",
    "Action",
    "ConstructionStats",
    "Entry",
    "Episode",
    "EpisodeMode",
    "MemoryIndex",
    "NotPrepared",
    "T2Mem",
    "T2MemConfig",
    "Units",
    "episode_mode",
    "extraction_schema",
    "fit_lines",
    "render_trace",
    "segment",
    "step_schema",
]
