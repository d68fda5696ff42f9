"""T2Mem (paper §3-4): light episode metadata offline, memory built by an LLM loop at test time.

`T2Mem.prepare` extracts and indexes a conversation's metadata (cached on disk), `retrieve`
is the initial SearchMeta, `construct` runs the SearchMeta / ReadRaw / Answer loop;
`make_t2mem` builds it or an ablation by name (`VARIANTS`); `render_trace` shows one loop.
"""

from tmem_core.methods.t2mem._config import VARIANTS, Action, EpisodeMode, T2MemConfig, Units
from tmem_core.methods.t2mem._episodes import Episode, episode_mode, fit_lines, segment
from tmem_core.methods.t2mem._extract import (
    EXTRACT_STAGE,
    ConstructionStats,
    Entry,
    extraction_schema,
)
from tmem_core.methods.t2mem._index import MemoryIndex
from tmem_core.methods.t2mem._loop import STEP_STAGE, step_schema
from tmem_core.methods.t2mem._method import NotPrepared, T2Mem, make_t2mem
from tmem_core.methods.t2mem._render import render_trace

__all__ = [
    "EXTRACT_STAGE",
    "STEP_STAGE",
    "VARIANTS",
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
    "make_t2mem",
    "render_trace",
    "segment",
    "step_schema",
]
