"""Validator: no gold field in a prompt.

Methods never receive `Gold` objects (a structural guarantee, checked end to end by the
canary tests); this validator checks recorded answer prompts outside their evidence
context, where only the question and the instructions may appear.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping

from tmem_core.evaluation._metrics import normalise
from tmem_core.schema import Gold, Message, Question

_MIN_CHARS = 3  # shorter gold answers ("2", "no") match by chance


def gold_leaks(prompt_messages: list[dict[str, str]], context: str, question: str,
               gold: Gold) -> list[str]:
    """Gold values found in a prompt's text once its evidence context is taken out."""
    outside = normalise(" ".join(m["content"] for m in prompt_messages).replace(context, " "))
    asked = normalise(question)
    found = []
    for label, value in _gold_values(gold):
        norm = normalise(value)
        if len(norm) >= _MIN_CHARS and norm not in asked and f" {norm} " in f" {outside} ":
            found.append(f"{gold.qid}: gold {label} {value!r} in prompt")
    return found


def _gold_values(gold: Gold) -> list[tuple[str, str]]:
    # a choice answer is a letter, and an abstention answer is the protocol's own phrase,
    # which the answer instructions legitimately name
    values = [("answer", gold.answer)] if gold.answer and gold.answer_kind == "text" else []
    values += [("evidence id", e) for e in gold.evidence_ids]
    meta = json.loads(gold.gold_meta) if gold.gold_meta else {}
    values += [(f"gold_meta.{k}", v) for k, v in meta.items() if isinstance(v, str)]
    return [(label, str(v)) for label, v in values]


def gold_strings(evidence: Mapping[str, Message], questions: Iterable[Question],
                 gold: Mapping[str, Gold]) -> dict[str, tuple[str, ...]]:
    """Per conversation, the gold-derived strings that no prompt may contain: the source ids
    and source sessions of its questions' gold evidence (`evidence`: those messages, with
    their `meta`), the ids of its abstention questions, and the strings of their `gold_meta`.
    Strings shorter than a few characters are left out (they match by chance)."""
    found: dict[str, set[str]] = defaultdict(set)
    for question in questions:
        g = gold[question.qid]
        strings = found[question.conv_id]
        for msg_id in g.evidence_ids:
            meta = json.loads(evidence[msg_id].meta or "{}") if msg_id in evidence else {}
            strings.update(str(meta[k]) for k in ("source_id", "source_session") if k in meta)
        if g.answer_kind == "abstention":
            strings.add(question.qid)
        meta = json.loads(g.gold_meta) if g.gold_meta else {}
        for value in meta.values():
            strings.update(str(v) for v in (value if isinstance(value, list) else [value])
                           if isinstance(v, str))
    return {conv: tuple(sorted(s for s in strings if len(s) > _MIN_CHARS))
            for conv, strings in found.items()}
