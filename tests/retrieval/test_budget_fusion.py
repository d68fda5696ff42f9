"""Token budgets, the offline token counter, reciprocal-rank fusion."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tmem_core.retrieval import cl100k_tokens, within_tokens
from tmem_core.retrieval._fusion import rrf
from tmem_core.schema import Message


def _messages(*texts: str) -> list[Message]:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    return [Message("c", f"m{i}", i, t0, text) for i, text in enumerate(texts)]


def _words(text: str) -> int:
    return len(text.split())


def test_token_budget_is_never_exceeded() -> None:
    messages = _messages("one two three", "four five", "six", "seven eight nine ten")
    taken = within_tokens(messages, 7, _words)
    assert [m.msg_id for m in taken] == ["m0", "m1", "m2"]  # 3 + 2 + 1; the next 4 would not fit
    assert sum(_words(m.text) for m in taken) <= 7


@pytest.mark.parametrize("tokens", [1, 5, 9, 10, 40])
def test_token_budget_takes_the_longest_fitting_prefix(tokens: int) -> None:
    messages = _messages(*(["alpha beta gamma"] * 10))
    assert len(within_tokens(messages, tokens, _words)) == min(10, tokens // 3)


def test_cl100k_counter_works_offline() -> None:
    assert cl100k_tokens("hello world") == 2
    assert cl100k_tokens("") == 0


def test_rrf_hand_computed() -> None:
    # a: 1/61 + 1/62, b: 1/62 + 1/61, c: 1/63, d: 1/63 (+ nothing) -> a, b tie (first seen a)
    assert rrf([["a", "b", "c"], ["b", "a", "d"]]) == ["a", "b", "c", "d"]
    # an item ranked first by one list only loses to one ranked second by both
    assert rrf([["x", "y"], ["z", "y"]], k=1)[0] == "y"
    assert rrf([]) == []
