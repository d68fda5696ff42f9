"""LazyMem, T2Mem's test-time baseline (T2Mem paper §4, §5.1, §A.3), re-implemented from the
paper's description: no released code or package was found, so this is a labelled
re-implementation (a project addition in reports), not LazyMem's own code.

What it does: ONE retrieval pass over the raw messages (the grid's `top_k`, the sweep's
embedder by default, as the paper retrieves with BGE-M3) fixes the evidence set; then ONE
LLM call (the run's backbone standing in for LazyMem-4B, as the paper's runs did) constructs
a query-specific memory from exactly that set; the answer model reads the memory. Nothing is
built offline and nothing is retrieved after the first pass, so what the memory can hold is
bounded by the first retrieval's coverage (the failure the paper names, §5.1).

How it differs from `t2mem_no_rollout` (T2Mem's own ablation): that one searches T2Mem's
offline episode METADATA (built by an LLM per episode beforehand) and writes its memory in a
single Answer-only loop step, reading no raw message; LazyMem has no offline memory at all,
retrieves RAW messages and constructs its memory from their own text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from tmem_core.evaluation import question_block
from tmem_core.evaluation._basis import READ, SHOWN, Basis
from tmem_core.llm import ChatRequest
from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods._base import Evidence
from tmem_core.methods._context import LLM, Context, ContextMethod, render_message
from tmem_core.methods._record import Degradation, Record, Usage
from tmem_core.methods._registry import MethodEnv, method
from tmem_core.methods.baselines._ranked import RankedRetrieval
from tmem_core.methods.t2mem import fit_lines
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import Kind
from tmem_core.schema import Question

PROMPT = "lazymem/construct"
STAGE = "construct"


@dataclass(frozen=True)
class LazyMemParams:
    """`kind`: the one retrieval pass (dense: the sweep's embedder); `max_tokens`: output
    tokens of the construction call."""

    kind: Kind = "dense"
    max_tokens: int = 1024

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be 1 or more, got {self.max_tokens}")


@dataclass(frozen=True)
class LazyDegradation(Degradation):
    """The construction call failed or wrote nothing: the retrieved messages were shown."""

    fallback: int = 0


@dataclass(frozen=True, kw_only=True)
class LazyRecord(Record):
    """The fixed evidence set (`retrieved`, in the order the constructor read it), the memory
    it wrote, the call's usage and error; basis `read` (`shown` when the call failed and the
    evidence itself is the context)."""

    basis: Basis = READ
    degradation: LazyDegradation = field(default_factory=LazyDegradation)
    retrieved: tuple[str, ...] = ()
    memory: str = ""
    usage: Usage | None = None
    error: str | None = None


@dataclass
class LazyMem:
    """One retrieval pass, then one construction call over its messages (module docstring)."""

    retrieval: RankedRetrieval
    params: LazyMemParams
    top_k: int
    budget: int
    name: str = "lazymem"

    def retrieve(self, question: Question) -> Evidence:
        """The single retrieval pass: the `top_k` best messages."""
        return self.retrieval(question, self.top_k)

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        """The memory written from the fixed evidence (within the budget); the evidence itself,
        flagged `fallback`, when the call fails or writes nothing."""
        if llm is None:
            raise ValueError(f"{self.name} constructs its memory with an LLM; none was given")
        conversation = self.retrieval.store.conversations[question.conv_id]
        messages = sorted((conversation.messages[conversation.position[i]] for i in evidence.ids),
                          key=lambda m: conversation.position[m.msg_id])
        lines = fit_lines([render_message(m) for m in messages], self.budget, count_tokens)
        read = tuple(m.msg_id for m in messages[:len(lines)])
        prompt = load_prompt(PROMPT).chat(question=question_block(question),
                                          evidence="\n".join(lines) or "(nothing found)")
        sampling = dataclasses.replace(llm.backbone.sampling, max_tokens=self.params.max_tokens)
        [reply] = llm.generate([ChatRequest(prompt, sampling, stage=STAGE, qid=question.qid)])
        written = reply.text.strip() if reply.ok else ""
        text = "\n".join(fit_lines(written.splitlines() or lines, self.budget, count_tokens))
        usage = Usage(1, reply.usage.prompt_tokens, reply.usage.completion_tokens,
                      round(reply.latency_s, 3))
        record = LazyRecord(basis=READ if written else SHOWN,
                            degradation=LazyDegradation(int(not written)), retrieved=read,
                            memory=written, usage=usage, error=reply.error)
        return Context(question.qid, self.name, "memory", text, read, count_tokens(text), record)


@method("lazymem", config=LazyMemParams, record=LazyRecord, prompts=(PROMPT,),
        additions=("lazymem",),
        description="LazyMem (re-implemented from T2Mem's description): one retrieval pass "
                    "fixes the evidence, one LLM call constructs the memory from it")
def _lazymem(env: MethodEnv, params: LazyMemParams, name: str) -> ContextMethod:
    retrieval = RankedRetrieval(env.index_store, params.kind, name=name)
    return LazyMem(retrieval, params, env.top_k, env.budget, name)

