"""Exp-5 (paper §5.6, A.5): revision chains injected into an otherwise identical copy of a
prepared benchmark.

For each Knowledge Update question whose original state is known (its gold evidence), one to
`condition` revisions (one message each) then one rollback to the original state are injected
after the state's last evidence message and before the question is asked. The number of
revisions is assigned, not drawn: the questions' counts are the quantiles of the uniform
distribution on 1..condition (`chain_lengths`), dealt to the questions in a seeded order, so
conditions 1, 2 and 3 give exactly 2.0, 2.5 and 3.0 injected messages per question (2.5 needs
an even number of questions: with an odd one, condition 2 gives 2.5 + 0.5/n). Revised values
are of the same kind as the original and never a question's answer (`_revised_values.py`); a
question with no such value gets no chain and is listed (`no_value`). Every base message is
kept field by field except `seq`, renumbered to make room (the base's order unchanged). An
injected message has an id of its own (`m<n>`, past the base's numbering), the channel, topic,
phase and session of the state's last evidence message, an author of the conversation with
that author's role, no reply link and no meta. Which message is a revision and which the
rollback, and the revised values, are written only into the question's evaluation-only
`gold_meta` (`revision_chain`), for scoring; the revised values, which the rollback
supersedes, also join its superseded values (`superseded_answers`, latest last), which judge
calibration's `superseded` control reads; the manifest's `revision_chains` records the
condition, the writer, the counts and the mean per question.

Texts come from templates (the default), or are written by a backbone (the paper's were
LLM-written); a chain the backbone fails to write falls back to the templates, and is listed.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import pyarrow as pa

from tmem_core import DataError
from tmem_core.benchmarks._revised_values import (
    Answers,
    Vocabulary,
    revision_candidates,
    superseded_values,
)
from tmem_core.benchmarks._synthetic_vocabulary import slot_values
from tmem_core.evaluation import SUPERSEDED_KEY
from tmem_core.llm import ChatRequest, ChatResponse
from tmem_core.llm._types import object_schema
from tmem_core.prompts import load_prompt
from tmem_core.schema import (
    Gold,
    Message,
    Question,
    gold_from_table,
    messages_from_table,
    messages_to_table,
    questions_from_table,
    questions_to_table,
    validate_tables,
)

CONDITIONS = (1, 2, 3)
VERSION = 2  # of the injection: a prepared variant made by another is made again
KNOWLEDGE_UPDATE = "knowledge_update"  # LongMemEval's "knowledge-update" too (`is_update`)
CHAIN_KEY = "revision_chain"  # in a question's gold_meta
MANIFEST_KEY = "revision_chains"
WRITE_PROMPT = "exp5/chain"
MIN_STEP, MAX_STEP = timedelta(minutes=5), timedelta(minutes=40)  # between injected messages
_ID = re.compile(r"^m(\d+)$")
REVISION_TEMPLATES = (
    "Change of plan on {topic}: we are going with {value} instead of {previous}.",
    "Update on {topic}: after the latest review it is {value} now, not {previous}.",
    "Heads up, {topic} moves to {value}; {previous} is off the table.",
)
ROLLBACK_TEMPLATES = (
    "Reverting the recent {topic} changes: we are back to {original}, as first agreed.",
    "Rolling back on {topic}: {original} again, the original decision stands.",
)


@dataclass(frozen=True)
class Chain:
    """One question's chain, before its texts are written."""

    question: Question
    answer: str
    state: tuple[Message, ...]  # the original state's evidence, in time order
    revisions: int
    values: tuple[str, ...]  # the revised values, one per revision

    @property
    def topic(self) -> str:
        last = self.state[-1]
        return last.topic or last.channel or "the plan"


@dataclass(frozen=True)
class Texts:
    revisions: tuple[str, ...]
    rollback: str


class Writer(Protocol):
    @property
    def name(self) -> str: ...

    def write(self, chains: Sequence[Chain]) -> list[Texts]: ...

    def stats(self) -> dict[str, Any]:
        """What writing cost (LLM calls and tokens) and which chains fell back, for the
        manifest."""
        ...


@dataclass
class TemplateWriter:
    """Texts from templates, each chosen by a seeded draw per question."""

    seed: int = 0
    name: str = "templates"

    def write(self, chains: Sequence[Chain]) -> list[Texts]:
        return [self.one(c) for c in chains]

    def stats(self) -> dict[str, Any]:
        return {}

    def one(self, chain: Chain) -> Texts:
        rng = random.Random(f"{self.seed}:{chain.question.qid}:texts")
        previous, revisions = chain.answer, []
        for value in chain.values:
            revisions.append(rng.choice(REVISION_TEMPLATES).format(
                topic=chain.topic, value=value, previous=previous))
            previous = value
        rollback = rng.choice(ROLLBACK_TEMPLATES).format(topic=chain.topic,
                                                         original=chain.answer)
        return Texts(tuple(revisions), rollback)


class Generator(Protocol):
    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]: ...


@dataclass
class LLMWriter:
    """Texts written by a backbone, one request per chain (all in one batch); a chain whose
    output is unusable gets the templates' texts and is listed in `fallbacks`."""

    llm: Generator
    name: str
    seed: int = 0
    fallbacks: list[str] = field(default_factory=list)
    responses: list[ChatResponse] = field(default_factory=list)

    def write(self, chains: Sequence[Chain]) -> list[Texts]:
        self.responses = self.llm.generate([self._request(c) for c in chains])
        templates = TemplateWriter(self.seed)
        out = []
        for chain, response in zip(chains, self.responses, strict=True):
            texts = _parsed_texts(response, chain.revisions)
            if texts is None:
                self.fallbacks.append(chain.question.qid)
                texts = templates.one(chain)
            out.append(texts)
        return out

    def stats(self) -> dict[str, Any]:
        return {"calls": len(self.responses), "failed": len(self.fallbacks),
                "prompt_tokens": sum(r.usage.prompt_tokens for r in self.responses),
                "completion_tokens": sum(r.usage.completion_tokens for r in self.responses),
                "prompt": load_prompt(WRITE_PROMPT).name,
                "prompt_sha256": load_prompt(WRITE_PROMPT).sha256,
                "fallbacks": list(self.fallbacks)}

    def _request(self, chain: Chain) -> ChatRequest:
        chat = load_prompt(WRITE_PROMPT).chat(
            topic=chain.topic, answer=chain.answer, count=str(chain.revisions),
            values=", ".join(chain.values),
            state="\n".join(f"- {m.author or 'someone'}: {m.text}" for m in chain.state))
        schema = object_schema({
            "revisions": {"type": "array", "items": {"type": "string", "minLength": 1},
                          "minItems": chain.revisions, "maxItems": chain.revisions},
            "rollback": {"type": "string", "minLength": 1}})
        return ChatRequest(chat, None, schema, "exp5.write", chain.question.qid,
                           chain.question.conv_id)


def _parsed_texts(response: ChatResponse, revisions: int) -> Texts | None:
    parsed = response.parsed
    if not response.ok or not isinstance(parsed, dict):
        return None
    texts, rollback = parsed.get("revisions"), parsed.get("rollback")
    if (not isinstance(texts, list) or len(texts) != revisions or not isinstance(rollback, str)
            or not all(isinstance(t, str) and t.strip() for t in texts) or not rollback.strip()):
        return None
    return Texts(tuple(t.strip() for t in texts), rollback.strip())


@dataclass(frozen=True)
class Injected:
    """The benchmark's tables with the chains, and the manifest's `revision_chains`."""

    messages: pa.Table
    questions: pa.Table
    facts: dict[str, Any]


def split_condition(variant: str) -> tuple[str, int]:
    """`interleaved+revisions=2` -> (`interleaved`, 2); no `revisions=N`: (variant, 0)."""
    flags = [f for f in variant.split("+") if f] if variant else []
    asked = [f for f in flags if f.startswith("revisions=")]
    if not asked:
        return variant, 0
    condition = asked[-1].removeprefix("revisions=")
    if len(asked) > 1 or not condition.isdigit() or int(condition) not in CONDITIONS:
        raise DataError(f"variant {variant!r}: revisions=N takes one N of "
                        f"{', '.join(map(str, CONDITIONS))} (Exp-5's conditions)")
    rest = "+".join(f for f in flags if f not in asked)
    return rest or "base", int(condition)


def inject_revisions(name: str, messages_table: pa.Table, questions_table: pa.Table,
                     condition: int, seed: int = 0, writer: Writer | None = None) -> Injected:
    """The tables with a revision chain after each Knowledge Update question's state."""
    if condition not in CONDITIONS:
        raise DataError(f"revision condition must be one of {CONDITIONS}, got {condition}")
    messages = messages_from_table(messages_table)
    questions = questions_from_table(questions_table)
    gold = gold_from_table(questions_table)
    vocabulary = _vocabulary(name)
    chains, skipped = plan_chains(name, messages, questions, gold, condition, seed, vocabulary)
    writer = writer or TemplateWriter(seed)
    injected, labels = _injected(messages, chains, writer.write(chains), seed)
    revised = {c.question.qid: c.values for c in chains}
    items = [(q, _labelled(gold[q.qid], labels.get(q.qid), revised.get(q.qid, ())))
             for q in questions]
    table = messages_to_table(_merged(messages, injected))
    question_table = questions_to_table(items)
    validate_tables(table, question_table, source=f"{name} with revision chains")
    return Injected(table, question_table, {
        "condition": condition, "seed": seed, "writer": writer.name, "questions": len(chains),
        "injected": len(injected), "mean_injected_per_question": len(injected) / len(chains),
        "revision_counts": {str(n): sum(c.revisions == n for c in chains)
                            for n in range(1, condition + 1)},
        **skipped, "writer_stats": writer.stats()})


def plan_chains(name: str, messages: Sequence[Message], questions: Sequence[Question],
                gold: dict[str, Gold], condition: int, seed: int, vocabulary: Vocabulary
                ) -> tuple[list[Chain], dict[str, list[str]]]:
    """Each Knowledge Update question's chain (number of revisions and their values); the
    questions whose original state is unknown (no gold evidence, `skipped`) or that have no
    value to be revised to (`no_value`) get none."""
    by_id = {m.msg_id: m for m in messages}
    updates = [q for q in questions if is_update(q)]
    if not updates:
        raise DataError(f"{name}: no {KNOWLEDGE_UPDATE} questions; Exp-5 injects revision "
                        f"chains into Knowledge Update questions (synthetic, GroupMemBench)")
    answers = Answers.of(gold.values())
    skipped: dict[str, list[str]] = {"skipped": [], "no_value": []}
    eligible = []
    for q in updates:
        g = gold[q.qid]
        known = bool(g.evidence_ids and g.answer)
        pool = revision_candidates(g, vocabulary, answers) if known else []
        if g.answer and pool:
            eligible.append((q, g.answer, g.evidence_ids, pool))
        else:
            skipped["no_value" if known else "skipped"].append(q.qid)
    if not eligible:
        raise DataError(f"{name}: no {KNOWLEDGE_UPDATE} question has gold evidence and a value "
                        f"to be revised to, so no chain can be built; annotate the benchmark "
                        f"first (python -m jobs.annotate) and inject into the annotated variant")
    dealt = random.Random(f"{seed}:{condition}:order").sample(eligible, len(eligible))
    lengths = dict(zip((q.qid for q, *_ in dealt), chain_lengths(len(dealt), condition),
                       strict=True))
    chains = []
    for q, answer, evidence, pool in eligible:  # in the benchmark's order
        rng, count = random.Random(f"{seed}:{condition}:{q.qid}"), lengths[q.qid]
        state = tuple(sorted((by_id[e] for e in evidence), key=lambda m: (m.timestamp, m.seq)))
        chains.append(Chain(q, answer, state, count, _revised_values(rng, count, answer, pool)))
    return chains, skipped


def chain_lengths(questions: int, condition: int) -> list[int]:
    """Revisions per question, ascending: the midpoint quantiles of the uniform distribution
    on 1..condition. Symmetric about (1 + condition) / 2, so their mean is exactly that (for
    condition 2 and an odd count, the middle question's 2 adds 0.5 / questions)."""
    return [1 + condition * (2 * k + 1) // (2 * questions) for k in range(questions)]


def is_update(question: Question) -> bool:
    """A Knowledge Update question, whatever its benchmark's spelling of the category."""
    return question.category.lower().replace("-", "_") == KNOWLEDGE_UPDATE


def _vocabulary(name: str) -> Vocabulary:
    """The benchmark's slot vocabulary: the synthetic set's attribute values, and for every
    benchmark the values a question's gold says its state held before."""
    if name != "synthetic":
        return superseded_values
    return lambda gold: [*slot_values(gold.answer or ""), *superseded_values(gold)]


def _revised_values(rng: random.Random, count: int, answer: str, pool: Sequence[str]
                    ) -> tuple[str, ...]:
    """`count` values drawn from `pool`, each differing from the state before it where the
    pool allows."""
    values, previous = [], answer
    for _ in range(count):
        previous = rng.choice([v for v in pool if v != previous] or list(pool))
        values.append(previous)
    return tuple(values)


def _injected(messages: Sequence[Message], chains: Sequence[Chain], texts: Sequence[Texts],
              seed: int) -> tuple[list[Message], dict[str, dict[str, Any]]]:
    """The injected messages (seq still unset) and, per question, its chain's labels."""
    number = 1 + max((int(m.group(1)) for x in messages if (m := _ID.match(x.msg_id))),
                     default=-1)
    authors = _authors(messages)
    ends = _conversation_ends(messages)
    out, labels = [], {}
    for chain, text in zip(chains, texts, strict=True):
        rng = random.Random(f"{seed}:{chain.question.qid}:place")
        last = chain.state[-1]
        end = chain.question.question_time or ends[last.conv_id]
        times = _times(rng, last.timestamp, end, chain.revisions + 1)
        ids = [f"m{number + k}" for k in range(len(times))]
        number += len(times)
        for msg_id, when, body in zip(ids, times, (*text.revisions, text.rollback),
                                      strict=True):
            author, role = rng.choice(authors[last.conv_id])
            out.append(Message(last.conv_id, msg_id, -1, when, body, last.session_id, author,
                               role, last.channel, last.topic, last.phase))
        labels[chain.question.qid] = {"revisions": ids[:-1], "rollback": ids[-1],
                                      "original": [m.msg_id for m in chain.state],
                                      "values": list(chain.values)}
    return out, labels


def _times(rng: random.Random, after: datetime, before: datetime, count: int) -> list[datetime]:
    """`count` times after `after` and no later than `before`: a start drawn in the first
    half of the room, then steps of 5 to 40 minutes (shrunk when the room is short)."""
    room = before - after
    steps = [MIN_STEP + (MAX_STEP - MIN_STEP) * rng.random() for _ in range(count)]
    span = sum(steps, timedelta())
    if room <= timedelta(0):
        return [after] * count
    scale = min(1.0, room / (2 * span)) if span else 1.0
    start = after + (room - span * scale) * rng.random() * 0.5
    times, when = [], start
    for step in steps:
        when += step * scale
        times.append(min(_next_second(when), before))
    return times


def _next_second(when: datetime) -> datetime:
    """`when` rounded up to a whole second (chat times carry no fractions)."""
    whole = when.replace(microsecond=0)
    return whole if whole == when else whole + timedelta(seconds=1)


def _authors(messages: Sequence[Message]) -> dict[str, list[tuple[str | None, str | None]]]:
    """Per conversation: each author with the role it first appears with, in order."""
    out: dict[str, dict[str | None, str | None]] = {}
    for m in messages:
        out.setdefault(m.conv_id, {}).setdefault(m.author, m.role)
    return {conv: list(authors.items()) for conv, authors in out.items()}


def _conversation_ends(messages: Sequence[Message]) -> dict[str, datetime]:
    ends: dict[str, datetime] = {}
    for m in messages:
        ends[m.conv_id] = max(ends.get(m.conv_id, m.timestamp), m.timestamp)
    return ends


def _merged(base: Sequence[Message], injected: Sequence[Message]) -> list[Message]:
    """Base and injected messages of each conversation in time order (an injected message
    after the base ones of its time), conversations in the base's order, seq renumbered."""
    order = {conv: k for k, conv in enumerate(dict.fromkeys(m.conv_id for m in base))}
    keyed = [(order[m.conv_id], m.timestamp, 0, m.seq, k, m) for k, m in enumerate(base)]
    keyed += [(order[m.conv_id], m.timestamp, 1, 0, k, m) for k, m in enumerate(injected)]
    return [dataclasses.replace(m, seq=n) for n, (*_, m) in enumerate(sorted(keyed))]


def chain_of(gold: Gold) -> dict[str, Any] | None:
    """A question's chain labels (`revisions`, `rollback`, `original` ids, the revised
    `values`), if it has one."""
    meta = json.loads(gold.gold_meta) if gold.gold_meta else {}
    chain = meta.get(CHAIN_KEY) if isinstance(meta, dict) else None
    return chain if isinstance(chain, dict) else None


def _labelled(gold: Gold, label: dict[str, Any] | None, revised: Sequence[str]) -> Gold:
    """The gold with its chain's labels, and the chain's revised values after the values the
    data already knew superseded (each once, where it was last in force, latest last)."""
    if label is None:
        return gold
    meta = json.loads(gold.gold_meta) if gold.gold_meta else {}
    known = meta.get(SUPERSEDED_KEY)
    held = [v for v in (*(known if isinstance(known, list) else ()), *revised)
            if v != gold.answer]
    superseded = list(reversed(dict.fromkeys(reversed(held))))
    return dataclasses.replace(gold, gold_meta=json.dumps(
        {**meta, CHAIN_KEY: label, SUPERSEDED_KEY: superseded}, sort_keys=True))
