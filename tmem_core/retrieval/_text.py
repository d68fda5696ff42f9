"""How messages (with optional metadata expansion) and questions become retrieval text."""

from __future__ import annotations

import re
from functools import cache

from tmem_core.schema import Message, Question

METADATA_FIELDS = ("author", "role", "channel", "topic", "phase")
_WORD = re.compile(r"\w\w+")


@cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS  # bm25s is slow to import: only when needed

    return frozenset(STOPWORDS_EN_PLUS)


def metadata_header(message: Message) -> str:
    """The message's present metadata values, e.g. `User_3 | PM | #eng | Atlas login timeout`."""
    values = (getattr(message, name) for name in METADATA_FIELDS)
    return " | ".join(v for v in values if v)


def document_text(message: Message, metadata: bool) -> str:
    """Text indexed for a message: its metadata prepended when `metadata` is on."""
    header = metadata_header(message) if metadata else ""
    return f"{header}: {message.text}" if header else message.text


def query_text(question: Question) -> str:
    """The retrieval query of every method: the question, after its asking user when it names
    one (`User_3: When is the review?`). One rule for every method family (README "Query
    rule"): the asker is part of the query (T-MEM §3: a query is its text and the requesting
    user); metadata expansion is the message side only."""
    if question.asking_user:
        return f"{question.asking_user}: {question.question}"
    return question.question


def lexical_tokens(text: str) -> list[str]:
    """Lower-cased words of two or more characters, English stopwords removed."""
    stopwords = _stopwords()
    return [w for w in _WORD.findall(text.lower()) if w not in stopwords]
