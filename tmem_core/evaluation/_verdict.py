"""Parsing a judge's verdict out of whatever text surrounds it."""

from __future__ import annotations

import re

POSITIVE = ("correct", "yes", "true")
NEGATIVE = ("wrong", "incorrect", "no", "false")
_WORD = re.compile(r"[a-z]+")
_STATED = re.compile(r"(?:verdict|label|grade|judgement|judgment)\"?\s*(?:is|:|=)\s*[\"*]*\s*"
                     r"([a-z]+)")  # also a JSON key: {"label": "CORRECT"}


def parse_verdict(text: str) -> bool | None:
    """True / False for a clear verdict, None when the text commits to none.

    In order: the first word when it is a label ("CORRECT. The response..."), a stated
    verdict ("Verdict: WRONG", or `{"label": "WRONG"}` after a reason), else the labels
    present when they all agree; in that last case "yes" and "no" do not count ("no
    information" is not a verdict).
    """
    lowered = text.lower()
    words = _WORD.findall(lowered)
    if not words:
        return None
    first = _label(words[0])
    if first is not None:
        return first
    stated = [_label(m.group(1)) for m in _STATED.finditer(lowered)]
    stated_labels = {s for s in stated if s is not None}
    if len(stated_labels) == 1:
        return stated_labels.pop()
    present = set()
    for before, word in zip(["", *words], words, strict=False):
        label = _label(word) if word not in ("yes", "no") else None
        if label is not None:
            present.add(label != (before == "not"))  # "not correct" counts as negative
    return present.pop() if len(present) == 1 else None


def _label(word: str) -> bool | None:
    if word in POSITIVE:
        return True
    if word in NEGATIVE:
        return False
    return None
