"""The answer stage: the question and its context in the benchmark's answer prompt."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tmem_core.benchmarks import get_protocol
from tmem_core.evaluation import answer_prompt
from tmem_core.llm import ChatRequest
from tmem_core.pipeline._stage import GoldStage, Output, Row
from tmem_core.prompts import as_chat


class AnswerStage(GoldStage):
    name = "answer"
    reads = ("kind", "context")
    writes = ("prediction",)

    def process(self, row: Row, stored: Mapping[str, Row]) -> Output:
        question = self.questions[row["qid"]]
        gold = self.gold[question.qid]
        messages, prompt = answer_prompt(
            question, row["kind"], row["context"], get_protocol(self.job.run.benchmark.name),
            gold.options if gold.answer_kind == "choice" else None)
        llm = self.proxy(self.job.backbone, question.qid)
        (response,) = llm.generate([ChatRequest(as_chat(messages))])
        values: dict[str, Any] = {"prompt_name": prompt.name, "prompt_sha256": prompt.sha256,
                                  "prompt": json.dumps(messages),
                                  "latency_s": response.latency_s}
        if not response.ok:
            return Output([self.record(row, ok=False, error=response.error, prediction=None,
                                       **values)], llm.records)
        return Output([self.record(row, prediction=response.text.strip(), **values)],
                      llm.records)
