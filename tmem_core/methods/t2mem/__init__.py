"""T2Mem (paper §3-4): light episode metadata offline, memory built by an LLM loop at test time.

`T2Mem.prepare` extracts and indexes a conversation's metadata (cached on disk), `retrieve`
is the initial SearchMeta, `construct` runs the SearchMeta / ReadRaw / Answer loop;
It and its ablations are registered methods (`t2mem`, `t2mem_no_raw`, ...); `render_trace`
shows one loop.
"""

from tmem_core.methods.t2mem._episodes import fit_lines
from tmem_core.methods.t2mem._extract import CONTEXT_MARGIN, ConstructionStats
from tmem_core.methods.t2mem._method import T2Mem
from tmem_core.methods.t2mem._record import LoopRecord
from tmem_core.methods.t2mem._render import render_trace

__all__ = [
    "CONTEXT_MARGIN",
    "ConstructionStats",
    "LoopRecord",
    "T2Mem",
    "fit_lines",
    "render_trace",
]
