"""Span compression: protected spans and every node survive, the budget is met when it can be."""

from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from tmem_core.llm import count_tokens
from tmem_core.methods.tmem import Item, QueryTerms, compress
from tmem_core.methods.tmem._compress import mandatory_text, split_spans
from tmem_core.schema import Question

COUNT = functools.partial(count_tokens, "smollm2")
QUESTION = Question("c", "q", "What is the current retry limit for Atlas checkout?", "ku",
                    asking_user="User_3")
TERMS = QueryTerms.of(QUESTION)
FILLER = "Let us grab lunch after the sync and talk about the offsite plans."


def _item(k: int, text: str, parent_text: str = "") -> Item:
    return Item(f"n{k}", text, parent_text, fixed_tokens=20)


def test_spans_are_sentences_and_conjunction_clauses() -> None:
    assert split_spans("We agreed. Then, it changed; really! Fine, but slow") == [
        "We agreed.", "Then, it changed;", "really!", "Fine,", "but slow"]
    assert split_spans("   ") == [""]


def test_query_terms_and_protection() -> None:
    assert "atlas" in TERMS.entities and "user_3" in TERMS.entities
    assert {"retry", "limit", "checkout"} <= TERMS.words
    protected = ["Atlas is fine.", "It is 5 now.", "On 3 May we met.", "Let's roll back.",
                 "We switched instead.", "Set it on Friday.", "The retry limit stays.",
                 "User_3 agreed.", "It costs $40k."]
    assert all(TERMS.protects(s) for s in protected)
    assert not any(TERMS.protects(s) for s in [FILLER, "The retry was slow.", "Sounds good."])


def test_under_budget_nothing_is_dropped() -> None:
    items = [_item(1, f"{FILLER} The limit is 5 attempts.")]
    out = compress(items, 10_000, TERMS, COUNT)
    assert out.texts == {"n1": items[0].text} and out.dropped == 0 and not out.over_budget


def test_lowest_density_spans_go_first_and_protected_spans_stay() -> None:
    items = [_item(1, f"{FILLER} We set the checkout retry limit to 5 attempts. "
                      "Sounds good to everyone here today."),
             _item(2, "Reminder about the checkout dashboard. Lunch plans are on the wiki.")]
    full = compress(items, 10_000, TERMS, COUNT).tokens
    out = compress(items, full - 10, TERMS, COUNT)
    assert out.tokens <= full - 10 and not out.over_budget
    assert "5 attempts" in out.texts["n1"] and out.texts["n2"]
    assert "checkout dashboard" in out.texts["n2"]  # a query word outweighs plain novelty


def test_content_already_in_the_parent_is_dropped_first() -> None:
    parent = "The checkout dashboard is slow."
    items = [_item(1, "The checkout dashboard is slow. Deploy logs show new queue errors.",
                   parent)]
    spans = split_spans(items[0].text)
    out = compress(items, 20 + COUNT(spans[1]), TERMS, COUNT)
    assert out.texts["n1"] == spans[1]
    both = compress([_item(1, "Fine, but the queue is slow", "")], 21, TERMS, COUNT)
    assert both.texts["n1"] in ("Fine", "but the queue is slow")  # clause separators go too


def test_mandatory_content_over_budget_is_reported_and_kept() -> None:
    items = [_item(k, f"Atlas moved to {k} attempts. {FILLER}") for k in range(5)]
    out = compress(items, 30, TERMS, COUNT)
    assert out.over_budget
    assert all(out.texts[f"n{k}"] == f"Atlas moved to {k} attempts." for k in range(5))


def test_mandatory_text_bounds_what_must_stay() -> None:
    assert mandatory_text(f"{FILLER} It is 5 now.", TERMS, COUNT) == "It is 5 now."
    assert mandatory_text(f"{FILLER} Sounds good.", TERMS, COUNT) == FILLER


_SENTENCES = st.sampled_from([
    FILLER, "Sounds good to me.", "The checkout retry limit is 5 attempts.", "Roll back now.",
    "Atlas is blocked.", "Coffee machine is broken again.", "Any risk for the migration?",
    "We meet on 3 May.", "Adding the folks to this thread."])


@given(st.lists(st.lists(_SENTENCES, min_size=1, max_size=4), min_size=1, max_size=8),
       st.integers(0, 400))
@settings(max_examples=150, deadline=None)
def test_compression_invariants(texts: list[list[str]], budget: int) -> None:
    items = [_item(k, " ".join(t), " ".join(texts[k - 1]) if k else "")
             for k, t in enumerate(texts)]
    out = compress(items, budget, TERMS, COUNT)
    mandatory = 0
    for item in items:
        kept, spans = out.texts[item.id], split_spans(item.text)
        assert any(s in kept for s in spans)  # every node keeps at least one span
        assert all(s in kept for s in spans if TERMS.protects(s))
        mandatory += item.fixed_tokens + sum(COUNT(s) for s in spans if TERMS.protects(s))
    if mandatory + sum(max(map(COUNT, split_spans(i.text))) for i in items) <= budget:
        assert out.tokens <= budget and not out.over_budget
    assert out.over_budget == (out.tokens > budget)
