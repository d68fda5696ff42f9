"""The answer stage: the question and its context in the benchmark's answer prompt.

Under a run's reasoning budget N (`grid.reasoning_budget`) the prompt also asks for at most N
reasoning tokens before an `Answer:` line, `max_tokens` is N + 64 (paper A.3), and the
prediction is what follows the marker. A context of kind `CHAIN` (Search-o1's reasoning
sequence) holds its own answer: the prediction is its last `\\boxed{}`, without a call."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tmem_core.benchmarks import get_protocol
from tmem_core.evaluation import answer_prompt
from tmem_core.llm import ChatRequest
from tmem_core.methods import CHAIN, boxed_answer, final_answer, reasoning_budget
from tmem_core.pipeline._stage import GoldStage, Output, Row
from tmem_core.prompts import as_chat


class AnswerStage(GoldStage):
    name = "answer"
    reads = ("kind", "context")
    writes = ("prediction",)

    def process(self, row: Row, stored: Mapping[str, Row]) -> Output:
        if row["kind"] == CHAIN:  # the method's own answer: no answer call
            return Output([self.record(row, prediction=boxed_answer(row["context"]),
                                       prompt_name=CHAIN, prompt_sha256="", prompt="",
                                       latency_s=0.0)], [])
        question = self.questions[row["qid"]]
        gold = self.gold[question.qid]
        messages, prompt = answer_prompt(
            question, row["kind"], row["context"], get_protocol(self.job.spec.benchmark.name),
            gold.options if gold.answer_kind == "choice" else None)
        chat, sampling = as_chat(messages), None
        budget = reasoning_budget(self.job.spec.reasoning_budget)
        if budget is not None:
            chat, sampling = budget.ask(chat, "budget/answer"), budget.sampling(
                self.job.backbone.sampling)
        llm = self.proxy(self.job.backbone, question.qid)
        (response,) = llm.generate([ChatRequest(chat, sampling)])
        values: dict[str, Any] = {"prompt_name": prompt.name, "prompt_sha256": prompt.sha256,
                                  "prompt": json.dumps([m.to_dict() for m in chat]),
                                  "latency_s": response.latency_s}
        if not response.ok:
            return Output([self.record(row, ok=False, error=response.error, prediction=None,
                                       **values)], llm.records)
        text = response.text.strip()
        prediction = text if budget is None else final_answer(text)
        return Output([self.record(row, prediction=prediction, **values)], llm.records)
