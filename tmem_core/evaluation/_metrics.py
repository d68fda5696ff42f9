"""Deterministic answer metrics: LoCoMo's official token F1, exact match, choice, abstention."""

from __future__ import annotations

import re
import string
import sys
import threading
from collections import Counter
from functools import cache, lru_cache
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
ABSTENTION_CUES = ("no information available", "not mentioned")


def normalise(text: str) -> str:
    """LoCoMo's normalisation: drop commas, lowercase, strip punctuation, articles, 'and'."""
    text = text.replace(",", "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


_NLTK_IMPORT = threading.Lock()


@cache
def stemmer() -> Any:
    """nltk's Porter stemmer (the official LoCoMo scorer's), loaded at first use.

    nltk's package import also loads scipy.stats, about 2 s of CPU, for statistics it treats as
    optional and this module never uses. Unless something has loaded scipy.stats already, it
    is hidden during the import, so nltk takes its no-scipy path (0.6 s). The stemmer is pure
    Python either way; scipy.stats stays importable afterwards.
    """
    with _NLTK_IMPORT:
        hide = "nltk" not in sys.modules and "scipy.stats" not in sys.modules
        if hide:
            sys.modules["scipy.stats"] = None  # type: ignore[assignment]  # makes it ImportError
        try:
            from nltk.stem import PorterStemmer
        finally:
            if hide:
                del sys.modules["scipy.stats"]
    return PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(stemmer().stem(word))


def token_f1(prediction: str, answer: str) -> float:
    """Porter-stemmed token F1 between two strings (0 when nothing is shared)."""
    pred = [_stem(w) for w in normalise(prediction).split()]
    gold = [_stem(w) for w in normalise(answer).split()]
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def partial_f1(prediction: str, answer: str) -> float:
    """Multi-answer F1: each comma-separated gold part scored against its best predicted part."""
    preds = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in answer.split(",")]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def says_not_available(prediction: str) -> bool:
    lowered = prediction.lower()
    return any(cue in lowered for cue in ABSTENTION_CUES)


def locomo_f1(prediction: str, answer: str | None, category: str) -> float:
    """LoCoMo's official per-category score.

    multi-hop: partial F1 over comma-separated sub-answers; open-domain: the gold answer is
    cut at the first ';'; temporal and single-hop: plain token F1; adversarial: 1 when the
    output says the information is not available (not mentioned), else 0.
    """
    if category == "adversarial":
        return float(says_not_available(prediction))
    if answer is None:
        raise ValueError(f"a {category} question needs a gold answer")
    if category == "multi-hop":
        return partial_f1(prediction, answer)
    if category == "open-domain":
        answer = answer.split(";")[0].strip()
    return token_f1(prediction, answer)


def exact_match(prediction: str, answer: str) -> bool:
    """Normalised exact match (same normalisation as F1, whole string)."""
    return normalise(prediction) == normalise(answer)


_LEADING = re.compile(r"\(?([A-Z])\)?(?![A-Za-z])")
_STATED = re.compile(r"answer\s*(?:is|:)?\s*\(?([A-Z])\)?(?![A-Za-z])", re.IGNORECASE)
_STANDALONE = re.compile(r"(?<![A-Za-z])\(?([A-Z])\)?(?![A-Za-z])")


def choice_letter(prediction: str, labels: tuple[str, ...]) -> str | None:
    """The option label a prediction commits to, or None when it commits to none.

    In order: a label opening the answer ("B", "(C) ..."), a stated one ("the answer is D"),
    else the only label standing alone in the text.
    """
    text = prediction.strip()
    for pattern in (_LEADING, _STATED):
        match = pattern.match(text) if pattern is _LEADING else pattern.search(text)
        if match and match.group(1) in labels:
            return match.group(1)
    found = {m.group(1) for m in _STANDALONE.finditer(text)} & set(labels)
    return found.pop() if len(found) == 1 else None


def choice_correct(prediction: str, answer: str, labels: tuple[str, ...]) -> bool:
    """Multiple choice by exact letter, no LLM involved."""
    return choice_letter(prediction, labels) == answer.strip().upper()
