"""EverMemBench's questions in any of upstream's formats (as its qa_loader.py reads them):
the evaluation code's `{"qars": [...]}`, the Dynamic release's rows, or the legacy
`{"questions": [...]}` / bare list of `question_id` items."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tmem_core import DataError
from tmem_core.benchmarks._evermembench_conversation import (
    Conversation,
    Key,
    group_key,
    iso_day,
    task_ids,
)
from tmem_core.benchmarks._evidence import parse_index_ranges
from tmem_core.benchmarks._source import read_json_or_lines, require
from tmem_core.schema import Gold, Option, Question

CAPABILITIES = {"F": "Fine-grained Recall", "MA": "Memory Awareness",
                "P": "Profile Understanding"}
CATEGORIES = ("F_SH", "F_MH", "F_TP", "F_HL", "MA_C", "MA_P", "MA_U", "P_Style", "P_Skill",
              "P_Title")
_QUESTION_FIELDS = {"id", "Q", "A", "R", "options"}
_LEGACY_FIELDS = {"question_id", "question", "answer", "options", "correct_option"}
_TYPE_CATEGORIES = ("multiple_choice", "open_ended")  # legacy ids carry no task prefix
_OPTION = re.compile(r"^\s*([A-Za-z])\s*[.):]\s*(.*)$", re.S)


def load_qa(conv: Conversation) -> None:
    """The folder's questions, in whichever of the formats its file has."""
    path = conv.folder.qa
    found, items = _question_items(read_json_or_lines(path))
    if not items:
        raise DataError('expected {"qars": [question, ...]} (eval code), {"questions": [...]} '
                        "(legacy) or question rows (Dynamic release), with at least one "
                        "question", file=str(path))
    conv.stats.question_formats[conv.conv_id] = found
    parse = _legacy_question if found == "legacy" else _question
    referenced = resolved = 0
    for pos, item in enumerate(items):
        question, gold = parse(conv, item, pos)
        referenced += bool(isinstance(item, Mapping) and item.get("R"))
        resolved += bool(gold.evidence_ids)
        conv.stats.without_evidence += not gold.evidence_ids
        conv.out.questions.append((question, gold))
    if referenced and not resolved:
        raise DataError("no question's R references resolve to a message: expected R = "
                        "[{date, group, message_index}] on the questions and message_index on "
                        "the messages", file=str(path))


def _question_items(raw: Any) -> tuple[str, list[Any]]:
    """The question format found and its items."""
    if isinstance(raw, Mapping) and "qars" in raw:
        return "qars", _items(raw["qars"])
    if isinstance(raw, Mapping) and "questions" in raw:
        return "legacy", _items(raw["questions"])
    items = _items(raw)
    legacy = bool(items) and all(isinstance(i, Mapping) and "question" in i and "Q" not in i
                                 for i in items)
    return ("legacy" if legacy else "rows"), items


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _question(conv: Conversation, item: Any, pos: int) -> tuple[Question, Gold]:
    """A `qars` item (or a Dynamic row): {id, Q, A, options: {label: text} | null, and
    R and task_id where the source has them}."""
    path = conv.folder.qa
    source_id = str(_object(item, path, f"qars[{pos}]").get("id") or f"q_{pos:04d}")
    qid = f"{conv.conv_id}:{source_id}"
    category = "_".join(source_id.split("_")[:2])  # as upstream's tools/analyze_results.py
    if category not in CATEGORIES:
        conv.warn(f"{qid}: unknown category {category!r}; known: {', '.join(CATEGORIES)}")
    evidence: list[str] = []
    if item.get("R"):
        evidence, problems = _evidence(item["R"], conv.by_key)
        conv.stats.unresolved += len(problems)
        for problem in problems:
            conv.warn(f"{qid}: {problem}")
    options = _options(item.get("options"), path, qid)
    answer = str(require(item, "A", file=path, record=qid))
    if options and answer.strip().upper() in {o.label for o in options}:
        answer = answer.strip().upper()
    elif options:
        conv.warn(f"{qid}: answer {answer!r} is not one of the option labels")
    extra = {k: v for k, v in item.items() if k not in _QUESTION_FIELDS}
    meta = {"references": item.get("R"), **extra}
    return _pair(conv, qid, category, str(require(item, "Q", file=path, record=qid)),
                 Gold(qid=qid, answer=answer, evidence_ids=tuple(evidence),
                      answer_kind="choice" if options else "text", options=options), meta)


def _legacy_question(conv: Conversation, item: Any, pos: int) -> tuple[Question, Gold]:
    """A legacy item: {question_id, question, answer, options: ["A. text", ...],
    correct_option}. No evidence; its category is its id's task prefix when it has one, else
    its question type (upstream's evaluator reports the legacy format by type)."""
    path = conv.folder.qa
    source_id = str(_object(item, path, f"questions[{pos}]").get("question_id")
                    or f"q_{pos:04d}")
    qid = f"{conv.conv_id}:{source_id}"
    answer = str(require(item, "answer", file=path, record=qid))
    options = _options(item.get("options"), path, qid)
    prefix = "_".join(source_id.split("_")[:2])
    category = prefix if prefix in CATEGORIES else _TYPE_CATEGORIES[0 if options else 1]
    gold = Gold(qid=qid, answer=answer, evidence_ids=(), answer_kind="text")
    if options:
        label = _correct_label(item.get("correct_option"), answer, options)
        if label is None:
            conv.warn(f"{qid}: no correct option (correct_option, or an answer naming one "
                      f"of the options)")
        gold = Gold(qid=qid, answer=label or answer, evidence_ids=(), answer_kind="choice",
                    options=options)
    meta = {"answer_text": answer, **{k: v for k, v in item.items()
                                      if k not in _LEGACY_FIELDS}}
    return _pair(conv, qid, category, str(require(item, "question", file=path, record=qid)),
                 gold, meta)


def _object(item: Any, path: Path, record: str) -> Mapping[str, Any]:
    """A question item, which must be an object; one without an id gets upstream's
    `q_<position>`."""
    if not isinstance(item, Mapping):
        raise DataError(f"expected a question object, got {type(item).__name__}",
                        file=str(path), record=record)
    return item


def _pair(conv: Conversation, qid: str, category: str, text: str, gold: Gold,
          meta: dict[str, Any]) -> tuple[Question, Gold]:
    """The question and its gold, the coarse task evidence in the gold's metadata."""
    conv.stats.capabilities[CAPABILITIES.get(category.split("_")[0], "unknown")] += 1
    tasks = task_ids(meta.get("task_id"))
    linked = list(dict.fromkeys(i for t in tasks for i in conv.by_task.get(t, ())))
    if linked:
        conv.stats.task_linked += 1
        meta["task_evidence_ids"] = linked
    return (Question(conv_id=conv.conv_id, qid=qid, category=category, question=text),
            dataclasses.replace(gold, gold_meta=json.dumps(meta, sort_keys=True)))


def _correct_label(given: Any, answer: str, options: tuple[Option, ...]) -> str | None:
    """The correct option's label: `correct_option`, else inferred from the answer as
    upstream's qa_loader does (a letter, a letter before `.`/`)`/`:`, or an option's text)."""
    labels = {o.label for o in options}
    for candidate in (str(given or "").strip().upper(), answer.strip().upper()):
        if candidate[:1] in labels and (len(candidate) == 1 or candidate[1] in ".):"):
            return candidate[0]
    return next((o.label for o in options if o.text.casefold() == answer.strip().casefold()),
                None)


def _evidence(refs: Any, index: dict[Key, str]) -> tuple[list[str], list[str]]:
    """Message ids of R's references, and what could not be resolved."""
    ids: list[str] = []
    problems: list[str] = []
    for ref in refs if isinstance(refs, list) else [refs]:
        day = iso_day(ref.get("date")) if isinstance(ref, Mapping) else None
        if day is None or ref.get("group") is None:
            problems.append(f"unreadable reference {ref!r}")
            continue
        indices, bad = parse_index_ranges(ref.get("message_index"))
        problems += [f"unparseable message_index {t!r} in {ref!r}" for t in bad]
        if not indices and not bad:
            problems.append(f"reference without message_index {ref!r}")
        for i in indices:
            key = (day, group_key(ref["group"]), i)
            if key in index:
                ids.append(index[key])
            else:
                problems.append(f"no message {i} in {ref['group']} on {ref['date']}")
    return list(dict.fromkeys(ids)), problems


def _options(raw: Any, path: Path, qid: str) -> tuple[Option, ...] | None:
    """Options as upstream writes them: `{label: text}` (qars, Dynamic rows) or
    `["A. text", ...]` (legacy; a text without its label is labelled by its position)."""
    if not raw:
        return None
    if isinstance(raw, Mapping):
        pairs = [(str(k), str(v)) for k, v in sorted(raw.items())]
    elif isinstance(raw, list):
        pairs = [(m[1], m[2].strip()) if (m := _OPTION.match(str(text))) else
                 (chr(ord("A") + pos), str(text).strip()) for pos, text in enumerate(raw)]
    else:
        raise DataError('expected options as an object {label: text}, a list ["A. text", '
                        '...] or null', file=str(path), record=qid, field="options")
    return tuple(Option(label.strip().upper(), text) for label, text in pairs)
