"""External memory systems behind one seam, each a method of its own name.

A system implements `MemorySystem` (one conversation: `add`, `search`) and registers a
factory with `@memory_system(...)`; `ExternalMemory` builds each conversation's memory once
(on disk, across processes and runs) and points the system at an `AccountingEndpoint`, so
every LLM call it makes is recorded by the pipeline (stage `memory` while building, stage
`construct` while searching). A conversation whose build failed part-way fails its
questions (an `EngineError`: error records, never answers). A system's `search` returns
`Recalled` items (raw messages, or memories with the messages they came from); the method
keeps them in its construct record (`SystemRecord`), whose evidence basis they decide.
Bundled: `mem0` (Mem0, extra `mem0`) and `graphiti` (Graphiti on embedded Kuzu, extra
`graphiti`).
"""

from tmem_core.methods.external._registry import memory_system

__all__ = [
    "memory_system",
]
