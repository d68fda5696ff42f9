"""The dependencies in force of a run's records: what a record of each store must carry in
its `deps` to count (`in_force`), for the stages that write them and every reader alike.

A record's `deps` are its stage's (`tmem_core.pipeline._deps`: method, backbones, prompts,
the run's contract keeps them as `deps`) and the data its question's record was made from:
`data question` (the question as a method sees it, with every message of its conversation)
for every stage; `data options` (the options shown to the answerer) from the answer stage
on, for a multiple-choice question; `data gold` (its gold record: answer, evidence, kind,
options, evaluation fields) for the judge's stores. So a changed gold answer redoes only
that question's judging, a changed message only its conversation's questions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tmem_core.results._layout import CALIBRATION, MEMORY_QUALITY
from tmem_core.schema import GOLD_COLUMNS, PUBLIC_QUESTION_COLUMNS

Deps = dict[str, str]
"""One stage's dependencies: name ("backbone smollm2", "prompt answer/flat") -> hash."""
DEPS_STAGE = {CALIBRATION: "judge", MEMORY_QUALITY: "judge"}
"""Stores whose records carry another stage's dependencies (the rest carry their own)."""
_SHOWN_FROM = ("answer", "judge")  # stages that see a choice question's options
_GOLD_FROM = ("judge",)  # stages that read gold answers


@dataclass(frozen=True)
class QuestionData:
    """Hashes of what a question's records were made from (see the module docstring)."""

    question: str
    options: str | None  # a multiple-choice question's shown options; None for others
    gold: str


def question_data(messages: pa.Table, questions: pa.Table) -> dict[str, QuestionData]:
    """Per question of a prepared benchmark, the hashes of its data."""
    conversations = _conversation_hashes(messages)
    out = {}
    for row in questions.to_pylist():
        public = {c: row[c] for c in PUBLIC_QUESTION_COLUMNS}
        conversation = conversations.get(row["conv_id"])
        shown = row["options"] if row["answer_kind"] == "choice" else None
        out[row["qid"]] = QuestionData(
            _sha([public, conversation.hexdigest() if conversation else None]),
            None if shown is None else _sha(shown),
            _sha({c: row[c] for c in GOLD_COLUMNS}))
    return out


def _conversation_hashes(messages: pa.Table) -> dict[str, Any]:
    """Per conversation, a hash of its messages, every column of each in table order (each
    row joined as text by Arrow: a history of 250,000 messages is hashed in a Python loop
    of one string per message)."""
    columns = [pc.fill_null(pc.cast(messages.column(name), pa.string()), NULL)
               for name in messages.column_names]
    rows = pc.binary_join_element_wise(*columns, SEPARATOR)
    hashes: dict[str, Any] = {}
    for conv_id, row in zip(messages.column("conv_id").to_pylist(), rows.to_pylist(),
                            strict=True):
        hashes.setdefault(conv_id, hashlib.sha256()).update(f"{row}\n".encode())
    return hashes


NULL, SEPARATOR = "\x00", "\x1f"


def record_deps(stage_deps: Mapping[str, str], store: str, data: QuestionData | None) -> str:
    """The `deps` of a record of `store` made under its stage's `stage_deps` from a
    question's `data` (None: a record that belongs to no question of the data)."""
    stage = DEPS_STAGE.get(store, store)
    deps = dict(stage_deps)
    if data is not None:
        deps["data question"] = data.question
        if data.options is not None and stage in _SHOWN_FROM:
            deps["data options"] = data.options
        if stage in _GOLD_FROM:
            deps["data gold"] = data.gold
    return deps_json(deps)


def expected_deps(contract_deps: Mapping[str, Mapping[str, str]] | None, store: str,
                  data: Mapping[str, QuestionData]) -> dict[str, str] | None:
    """Per question, the `deps` a record of `store` must carry to count, from the stages'
    dependencies a run's contract records (None, every record counting, for a contract
    that records none)."""
    stage_deps = (contract_deps or {}).get(DEPS_STAGE.get(store, store))
    if stage_deps is None:
        return None
    return {qid: record_deps(stage_deps, store, d) for qid, d in data.items()}


def deps_json(deps: Mapping[str, str]) -> str:
    """The `deps` column's value: one spelling for equal dependencies."""
    return json.dumps(dict(deps), sort_keys=True, separators=(",", ":"))


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _sha(value: Any) -> str:
    return hashlib.sha256(_json(value).encode()).hexdigest()
