"""Validator: no gold field in a prompt.

Methods never receive `Gold` objects (a structural guarantee, checked end to end by the
canary tests); this validator checks recorded answer prompts outside their evidence
context, where only the question and the instructions may appear.
"""

from __future__ import annotations

import json

from tmem_core.evaluation._metrics import normalise
from tmem_core.schema import Gold

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
