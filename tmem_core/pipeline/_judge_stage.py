"""The judge stage: each judge's verdict on the prediction (per repeat), token F1 and exact
match where the benchmark defines them, and each judge's verdicts on the control answers that
calibrate it (`tmem_core.evaluation.ControlPool`: the kinds the question and data allow)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tmem_core.benchmarks import get_protocol
from tmem_core.evaluation import (
    Control,
    ControlPool,
    JudgeCall,
    Protocol,
    Rules,
    choice_correct,
    exact_match,
    says_not_available,
    stemmer,
)
from tmem_core.llm import BackboneConfig, ChatRequest, Sampling
from tmem_core.pipeline._engine import EngineProxy
from tmem_core.pipeline._memory_quality import score_memory
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._stage import GoldStage, Output, Row, StageResult
from tmem_core.prompts import load_prompt
from tmem_core.results._layout import (
    CALIBRATION_STAGE,
    MEMORY_QUALITY_STAGE,
    calibration_store,
    memory_quality_store,
)
from tmem_core.results._store import StageStore
from tmem_core.schema import Gold, Message, Question, messages_from_table

JUDGE_RETRIES = 1  # an unparseable verdict is asked once more, then becomes an error record


@dataclass(frozen=True)
class Verdict:
    score: float | None
    scored_by: str  # "llm", "choice" (exact letter) or "rule" (LoCoMo's not-mentioned rule)
    raw: str = ""
    prompt_name: str | None = None
    prompt_sha256: str | None = None
    error: str | None = None


class JudgeStage(GoldStage):
    """A question's records: one per judge and repeat (`<qid>|<judge>|<repeat>`), in the
    calibration store one per judge and control kind (`<qid>|<judge>|<kind>`, with its
    scorer, `scored_by`, and the control's hash, `control_sha256`), and with
    `memory_quality` the first judge's scores of the question's memory in its own store
    (`<qid>|<judge>|memory_quality`)."""

    name = "judge"
    reads = ("prediction", "context")

    def __init__(self, job: Run) -> None:
        self.calibration = calibration_store(Path(job.run_dir))
        self.quality = memory_quality_store(Path(job.run_dir))
        super().__init__(job)

    def warm_up(self) -> None:
        super().warm_up()
        stemmer()
        self.control_pool  # noqa: B018

    def stored(self) -> dict[str, Row]:
        """Reusable records; a control's verdict only on the control built now (its text
        and the builder's version: `Control.sha256`)."""
        controls = {key: row for key, row in self.reusable(self.calibration).items()
                    if row["control_sha256"] == self._control_hashes.get(key)}
        return {**super().stored(), **controls, **self.reusable(self.quality)}

    @cached_property
    def _control_hashes(self) -> dict[str, str]:
        """Every control's key and hash, over the questions and judges of the run."""
        return {key: control.sha256 for qid in self.questions for judge in self.job.judges
                for key, control in self._controls_of(qid, judge)}

    def keys(self, qid: str) -> list[str]:
        verdicts = [f"{qid}|{judge.name}|{repeat}" for judge in self.job.judges
                    for repeat in range(self.job.spec.judge_repeats)]
        return verdicts + [key for judge in self.job.judges
                           for key, *_ in self._controls_of(qid, judge)] + self._quality_keys(qid)

    def records(self, results: list[StageResult]) -> list[tuple[StageStore, list[Row]]]:
        return [*super().records(results),
                (self.calibration, [c for result in results for c in result.output.controls]),
                (self.quality, [q for result in results for q in result.output.quality])]

    def _quality_keys(self, qid: str) -> list[str]:
        run = self.job.spec
        return [f"{qid}|{self.job.judges[0].name}|memory_quality"] if run.memory_quality else []

    @cached_property
    def evidence_messages(self) -> dict[str, Message]:
        """The gold evidence messages, which the memory-quality judge is shown."""
        wanted = {e for g in self.gold.values() for e in g.evidence_ids}
        return {m.msg_id: m for m in messages_from_table(self.prepared.messages)
                if m.msg_id in wanted}

    @cached_property
    def protocol(self) -> Protocol:
        return get_protocol(self.job.spec.benchmark.name)

    def process(self, row: Row, stored: Mapping[str, Row]) -> Output:
        """Every verdict the question still needs: per judge, its verdicts on the prediction
        in one batch, then those on the control answers in another (one call each, asked
        one after the other, made each question's last stage a chain of calls; batches
        sent side by side split a question's calls over replicas)."""
        qid = row["qid"]
        question, gold = self.questions[qid], self.gold[qid]
        output = Output()
        for judge in self.job.judges:
            repeats = [(key, repeat) for repeat in range(self.job.spec.judge_repeats)
                       if (key := f"{qid}|{judge.name}|{repeat}") not in stored]
            controls = [(key, c) for key, c in self._controls_of(qid, judge) if key not in stored]
            if repeats:
                self._judge(output, row, question, gold, judge, repeats)
            if controls:
                self._control(output, row, question, gold, judge, controls)
        for key in self._quality_keys(qid):
            if key not in stored:
                self._quality(output, row, key, question, gold)
        return output

    def _judge(self, output: Output, row: Row, question: Question, gold: Gold,
               judge: BackboneConfig, repeats: list[tuple[str, int]]) -> None:
        """The judge's verdicts on the prediction, one per (key, repeat), into `output`."""
        llm = self.proxy(judge, question.qid)
        prediction = row["prediction"] or ""
        verdicts = self._verdicts(question, gold, [(prediction, r) for _, r in repeats], llm)
        token_f1 = self.protocol.token_f1
        f1 = token_f1(prediction, gold.answer, question.category) if token_f1 else None
        em = (exact_match(prediction, gold.answer)
              if gold.answer is not None and gold.answer_kind == "text" else None)
        output.records += [self.record(
            row, key=key, ok=verdict.error is None, error=verdict.error, judge=judge.name,
            repeat=repeat, category=question.category, answer_kind=gold.answer_kind,
            scored_by=verdict.scored_by, score=verdict.score, f1=f1, exact_match=em,
            raw=verdict.raw, prompt_name=verdict.prompt_name,
            prompt_sha256=verdict.prompt_sha256)
            for (key, repeat), verdict in zip(repeats, verdicts, strict=True)]
        output.calls += llm.records

    def _control(self, output: Output, row: Row, question: Question, gold: Gold,
                 judge: BackboneConfig, controls: list[tuple[str, Control]]) -> None:
        """The judge's verdicts on the control answers, one per (key, control), into
        `output`."""
        llm = self.proxy(judge, question.qid, CALIBRATION_STAGE)
        verdicts = self._verdicts(question, gold, [(c.prediction, 0) for _, c in controls], llm)
        output.controls += [self.record(
            row, key=key, ok=verdict.error is None, error=verdict.error, judge=judge.name,
            control=control.kind, other_qid=control.other_qid, category=question.category,
            expected=control.expected, prediction=control.prediction, score=verdict.score,
            scored_by=verdict.scored_by, control_sha256=control.sha256, raw=verdict.raw,
            prompt_name=verdict.prompt_name, prompt_sha256=verdict.prompt_sha256)
            for (key, control), verdict in zip(controls, verdicts, strict=True)]
        output.calls += llm.records

    def _quality(self, output: Output, row: Row, key: str, question: Question,
                 gold: Gold) -> None:
        judge = self.job.judges[0]
        llm = self.proxy(judge, question.qid, MEMORY_QUALITY_STAGE)
        values = score_memory(question, gold, row["context"] or "", self.evidence_messages, llm)
        output.quality.append(self.record(row, key=key, judge=judge.name,
                                          method=self.job.spec.method, **values))
        output.calls += llm.records

    def _controls_of(self, qid: str, judge: BackboneConfig) -> list[tuple[str, Control]]:
        """(key, control) of the judge's control answers, every kind that applies to the
        question (`tmem_core.evaluation.ControlPool`)."""
        question, gold = self.questions[qid], self.gold[qid]
        return [(f"{qid}|{judge.name}|{control.kind}", control)
                for control in self.control_pool.controls(question, gold)]

    @cached_property
    def control_pool(self) -> ControlPool:
        """Control answers from the benchmark's questions."""
        return ControlPool([(q, self.gold[q.qid]) for q in self.questions.values()],
                           Rules.of(self.protocol))

    def _verdicts(self, question: Question, gold: Gold, asked: list[tuple[str, int]],
                  llm: EngineProxy) -> list[Verdict]:
        """A verdict per (prediction, repeat): each attempt's requests in one batch, an
        unparseable verdict asked once more (`JUDGE_RETRIES`), then an error."""
        prompt_ref = self.protocol.judge_for(question, gold)
        if prompt_ref is None:
            return [_by_rule(gold, prediction) for prediction, _ in asked]
        call = JudgeCall(load_prompt(self.job.spec.judge_prompts.get(prompt_ref, prompt_ref)))
        prompt = call.prompt
        done: dict[int, Verdict] = {}
        raw = [""] * len(asked)
        pending = list(range(len(asked)))
        for attempt in range(1 + JUDGE_RETRIES):
            if not pending:
                break
            responses = llm.generate([judge_request(call, question, gold, *asked[i], attempt)
                                      for i in pending])
            unparsed = []
            for i, response in zip(pending, responses, strict=True):
                if not response.ok:
                    done[i] = Verdict(None, "llm", raw[i], prompt.name, prompt.sha256,
                                      response.error)
                    continue
                raw[i] = response.text
                parsed = call.read(raw[i], response.parsed)
                if parsed is None:
                    unparsed.append(i)
                else:
                    done[i] = Verdict(float(parsed), "llm", raw[i], prompt.name, prompt.sha256)
            pending = unparsed
        for i in pending:
            done[i] = Verdict(None, "llm", raw[i], prompt.name, prompt.sha256,
                              f"unparseable verdict after {1 + JUDGE_RETRIES} attempts: "
                              f"{raw[i][:120]!r}")
        return [done[i] for i in range(len(asked))]


def _by_rule(gold: Gold, prediction: str) -> Verdict:
    """A verdict without a judge: the exact option letter, or LoCoMo's not-mentioned rule."""
    if gold.answer_kind == "choice":
        labels = tuple(o.label for o in gold.options or ())
        return Verdict(float(choice_correct(prediction, gold.answer or "", labels)), "choice")
    return Verdict(float(says_not_available(prediction)), "rule")


def judge_request(call: JudgeCall, question: Question, gold: Gold, prediction: str,
                  repeat: int, attempt: int) -> ChatRequest:
    """A judge's call as its prompt says it is sent (`JudgeCall`: roles, `max_tokens`,
    response format): greedy on the first attempt of the first repeat, as every source
    judges, sampled otherwise."""
    messages = call.prompt.chat(question=question.question, answer=gold.answer or "",
                                response=prediction)
    sampling = Sampling(temperature=0.0 if repeat == 0 and attempt == 0 else 0.7,
                        max_tokens=call.max_tokens, seed=repeat * 100 + attempt)
    return ChatRequest(messages, sampling, schema=call.schema)
