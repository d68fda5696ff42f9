"""Memory quality (T2Mem paper §5.3): a judge scores each question's constructed memory (the
context its method built: T2Mem's notes, T-MEM's forest, a baseline's messages, an external
system's memories) on five dimensions, each 1-5 (rubric and scale: the project's own,
`quality/memory`). It reads the gold answer and gold evidence, so its calls run under their
own stage, `memory_quality`, outside the leak guard (as every judge's). Opt-in per sweep
(`grid.memory_quality`); the first judge scores."""

from __future__ import annotations

from collections.abc import Mapping

from tmem_core.llm import ChatRequest, Sampling
from tmem_core.llm._types import object_schema
from tmem_core.methods import render_message
from tmem_core.pipeline._engine import EngineProxy
from tmem_core.prompts import load_prompt
from tmem_core.results._layout import MEMORY_QUALITY_DIMENSIONS, MEMORY_QUALITY_STAGE
from tmem_core.schema import Gold, Message, Question

PROMPT = "quality/memory"
SCALE = (1, 5)
_TOKENS = 96  # five small integers as JSON


def quality_schema() -> dict[str, object]:
    low, high = SCALE
    return object_schema({d: {"type": "integer", "minimum": low, "maximum": high}
                          for d in MEMORY_QUALITY_DIMENSIONS})


def score_memory(question: Question, gold: Gold, memory: str,
                 evidence: Mapping[str, Message], llm: EngineProxy
                 ) -> dict[str, object]:
    """The record's values: a score per dimension and their mean, the raw reply and the
    prompt's name and hash (`error` when the reply is unusable)."""
    prompt = load_prompt(PROMPT)
    shown = [render_message(evidence[i]) for i in gold.evidence_ids if i in evidence]
    messages = prompt.chat(question=question.question, answer=gold.answer or "",
                           evidence="\n".join(shown) or "(no gold evidence)",
                           memory=memory or "(empty)")
    request = ChatRequest(messages, Sampling(temperature=0.0, max_tokens=_TOKENS),
                          quality_schema(), stage=MEMORY_QUALITY_STAGE, qid=question.qid)
    (response,) = llm.generate([request])
    values: dict[str, object] = {"raw": response.text, "prompt_name": prompt.name,
                                 "prompt_sha256": prompt.sha256, "evidence": len(shown)}
    scores = _scores(response.parsed) if response.ok else None
    if scores is None:
        return {**values, "ok": False,
                "error": response.error or f"unusable scores: {response.text[:120]!r}"}
    return {**values, **scores, "mean": sum(scores.values()) / len(scores)}


def _scores(parsed: object) -> dict[str, float] | None:
    if not isinstance(parsed, dict):
        return None
    low, high = SCALE
    scores = {d: parsed.get(d) for d in MEMORY_QUALITY_DIMENSIONS}
    if not all(isinstance(v, int) and low <= v <= high for v in scores.values()):
        return None
    return {d: float(v) for d, v in scores.items() if isinstance(v, int)}
