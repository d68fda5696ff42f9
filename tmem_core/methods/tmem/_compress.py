"""Compression (paper §4.3, appendix F.2). Each node's text is split into spans (sentences, and
clauses joined by a conjunction). A span is protected when it holds a query entity (a
capitalised word, number or quoted term of the question, or the asking user), at least two
query words, a date or time, a number or value, or a state-change cue ("update", "instead",
"roll back", "now", "changed", ...). Protected spans and each node's best span are
mandatory. Other spans are scored by information density: query words absent from the parent's
text count 1, other words absent from it count `NOVEL_WEIGHT`, per token of the span. While
over budget, the lowest-density span goes first (ties: earlier node, earlier span). Nodes,
their headers (metadata, relation) and edges are never touched; the result is under budget
whenever the mandatory content fits."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tmem_core.llm._tokens import TokenCounter
from tmem_core.retrieval import lexical_tokens
from tmem_core.schema import Question

NOVEL_WEIGHT = 0.25
MIN_QUERY_WORDS = 2
_SPLIT = re.compile(r"((?<=[.!?;])\s+|\n+|,\s+(?=(?:but|and|so|because|while|although|"
                    r"though|whereas|which|since|unless)\b))")
_ENTITY = re.compile(r"\"([^\"]+)\"|\b(\d[\d,.:/-]*|[A-Z][\w'-]*)")
_QUESTION_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why",
                             "how", "is", "are", "was", "were", "did", "do", "does", "in", "on",
                             "the", "a", "an", "i", "for", "of", "and", "or", "not"})
_PROTECT = re.compile(
    r"\d|[$€£¥%]"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\b"
    r"|(?i:\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b"
    r"|\b(?:yesterday|today|tonight|tomorrow|ago|last (?:week|month|year)|next (?:week|month|year)"
    r"|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|hundred|thousand"
    r"|million|billion|twice|half|dozen|percent"
    r"|updat\w*|instead|roll(?:ed|ing|s)?[ -]?back|revert\w*|now|chang\w*|switch\w*|replac\w*"
    r"|no longer|anymore|correction|cancel\w*|effective|new plan|final(?:ly)?|decided)\b)")


@dataclass(frozen=True)
class QueryTerms:
    """The question's content words and entities (lower-cased)."""

    words: frozenset[str]
    entities: tuple[str, ...]

    @classmethod
    def of(cls, question: Question) -> QueryTerms:
        found = [quoted or term for quoted, term in _ENTITY.findall(question.question)]
        entities = [e.lower() for e in found if e.lower() not in _QUESTION_WORDS]
        if question.asking_user:
            entities.append(question.asking_user.lower())
        return cls(frozenset(lexical_tokens(question.question)), tuple(dict.fromkeys(entities)))

    def protects(self, span: str) -> bool:
        lowered = span.lower()
        return (bool(_PROTECT.search(span))
                or any(re.search(rf"\b{re.escape(e)}\b", lowered) for e in self.entities)
                or len(self.words & set(lexical_tokens(span))) >= MIN_QUERY_WORDS)


@dataclass(frozen=True)
class Item:
    """A node as compression sees it: its text, its parent's text, its fixed (header) cost."""

    id: str
    text: str
    parent_text: str
    fixed_tokens: int


@dataclass(frozen=True)
class Span:
    text: str
    tokens: int
    density: float
    mandatory: bool


@dataclass(frozen=True)
class Figures:
    """What compression did, as a record keeps it: estimated tokens, spans, spans dropped,
    whether the mandatory content alone exceeded the budget."""

    tokens: int
    spans: int
    dropped: int
    over_budget: bool


@dataclass(frozen=True)
class Compression:
    texts: dict[str, str]  # node id -> retained text
    tokens: int  # estimated: fixed costs plus retained span tokens
    spans: int
    dropped: int
    over_budget: bool  # the mandatory content alone exceeds the budget

    def figures(self) -> Figures:
        return Figures(self.tokens, self.spans, self.dropped, self.over_budget)


def split_spans(text: str) -> list[str]:
    """Sentences and conjunction-joined clauses (without their separators)."""
    return [s.strip() for s in _segments(text)]


def _segments(text: str) -> list[str]:
    """The spans with their trailing separators: joined, they give back the text."""
    parts = _SPLIT.split(text)
    pieces = [p + (parts[k + 1] if k + 1 < len(parts) else "") for k, p in
              enumerate(parts) if k % 2 == 0]
    return [p for p in pieces if p.strip()] or [text]


def node_spans(item: Item, terms: QueryTerms, count: TokenCounter) -> list[Span]:
    """The node's spans, scored; protected ones and the best one are mandatory."""
    parent = set(lexical_tokens(item.parent_text))
    texts = _segments(item.text)
    tokens = [max(1, count(t.strip())) for t in texts]
    density = [_information(t, terms, parent) / n for t, n in zip(texts, tokens, strict=True)]
    protected = [terms.protects(t) for t in texts]
    best = max(range(len(texts)), key=lambda k: (density[k], -k))
    return [Span(t, n, d, p or k == best) for k, (t, n, d, p)
            in enumerate(zip(texts, tokens, density, protected, strict=True))]


def compress(items: Sequence[Item], budget: int, terms: QueryTerms,
             count: TokenCounter) -> Compression:
    """Drop the lowest-density optional spans until the estimated total fits `budget`."""
    spans = {item.id: node_spans(item, terms, count) for item in items}
    total = sum(i.fixed_tokens for i in items) + sum(s.tokens for ss in spans.values() for s in ss)
    optional = sorted(((s.density, n, k, item.id) for n, item in enumerate(items)
                       for k, s in enumerate(spans[item.id]) if not s.mandatory))
    dropped: set[tuple[str, int]] = set()
    for _, _, k, node in optional:
        if total <= budget:
            break
        dropped.add((node, k))
        total -= spans[node][k].tokens
    texts = {node: "".join(s.text for k, s in enumerate(ss) if (node, k) not in dropped)
             .strip().rstrip(",") for node, ss in spans.items()}
    return Compression(texts, total, sum(map(len, spans.values())), len(dropped),
                       total > budget)


def mandatory_text(text: str, terms: QueryTerms, count: TokenCounter) -> str:
    """An upper bound of what compression must keep of a node, whatever its parent."""
    spans = _segments(text)
    kept = "".join(s for s in spans if terms.protects(s)).strip()
    return kept or max(spans, key=count).strip()


def _information(span: str, terms: QueryTerms, parent: set[str]) -> float:
    new = set(lexical_tokens(span)) - parent
    return len(new & terms.words) + NOVEL_WEIGHT * len(new - terms.words)
