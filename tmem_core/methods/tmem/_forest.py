"""The evidence forest (paper §4.3-4.4): its nodes and edges, the constraints and repair rule
that build it from the LLM's proposals, the budget compression of its text, and its
linearisation into the answer context.

Edges. Constraints on an edge child -> parent: the parent is an earlier selected message (by
time, then conversation order), in the same topic when both have one, and not in a later
phase than the child when both have one. Phases run per topic (a project's or topic's own
stages), so their order is each discovery group's own: first appearance among the group's
messages (topic, else channel, session, conversation). Since every parent is strictly
earlier, no cycle can form.

Repair rule (deterministic): a message whose proposal is missing or breaks a constraint
becomes an EXPAND of the nearest earlier message of its discovery group (topic, else channel,
else session) that satisfies the constraints; with none, it is a ROOT. A proposed ROOT is kept
as a ROOT. In the untyped forest UPDATE and EXPAND both become RELATED after repair.

Withheld metadata (paper Exp-6): a module that withholds a field reads every message with that
field set to null: in its indexes and groups (discovery), in its prompts (selection,
structuring) and in its code-level checks (structuring's same-topic and phase-order
constraints, its repair groups). The other modules, and the answer context, see the messages
unchanged.

Compression (paper §4.3, appendix F.2). Each node's text is split into spans (sentences, and
clauses joined by a conjunction). A span is protected when it holds a query entity (a
capitalised word, number or quoted term of the question, or the asking user), at least two
query words, a date or time, a number or value, or a state-change cue ("update", "instead",
"roll back", "now", "changed", ...). Protected spans and each node's best span are
mandatory. Other spans are scored by information density: query words absent from the parent's
text count 1, other words absent from it count `NOVEL_WEIGHT`, per token of the span. While
over budget, the lowest-density span goes first (ties: earlier node, earlier span). Nodes,
their headers (metadata, relation) and edges are never touched; the result is under budget
whenever the mandatory content fits.

Linearisation (paper §4.4): trees by root time, nodes in chronological pre-order, each line
`<indent>- <RELATION> (depth d, parent [id]) <render_message>`. Trees are separated by a blank
line. A flat forest (the no-structuring ablation) renders as plain `render_message` lines in
selection rank order.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import numpy as np

from tmem_core.llm import TokenCounter
from tmem_core.methods._context import render_message
from tmem_core.retrieval import Conversation, lexical_tokens
from tmem_core.schema import Message, Question

# Group by topic; when it is null fall back to channel, then session, then the conversation.
GROUP_FIELDS = ("topic", "channel", "session_id")


def group_key(message: Message) -> str:
    for name in GROUP_FIELDS:
        if (value := getattr(message, name)) is not None:
            return f"{name}:{value}"
    return f"conversation:{message.conv_id}"


@dataclass(frozen=True)
class Timeline:
    """Per message: its group key, its index among the group's messages, its time (seconds)."""

    keys: tuple[str, ...]
    members: dict[str, np.ndarray]  # group key -> message positions, ascending
    ordinal: np.ndarray
    seconds: np.ndarray

    @classmethod
    def of(cls, conversation: Conversation) -> Timeline:
        keys = tuple(group_key(m) for m in conversation.messages)
        lists: dict[str, list[int]] = {}
        ordinal = np.zeros(len(keys), dtype=np.int64)
        for position, key in enumerate(keys):
            group = lists.setdefault(key, [])
            ordinal[position] = len(group)
            group.append(position)
        members = {k: np.asarray(v, dtype=np.int64) for k, v in lists.items()}
        seconds = np.asarray([m.timestamp.timestamp() for m in conversation.messages])
        return cls(keys, members, ordinal, seconds)

    def span(self, a: int, b: int) -> float:
        """Seconds between the messages at positions a and b."""
        return abs(float(self.seconds[b] - self.seconds[a]))

    def extent(self) -> float:
        """Seconds from the conversation's first message to its last."""
        return float(self.seconds[-1] - self.seconds[0]) if len(self.seconds) else 0.0

    def group_extent(self, key: str) -> float:
        """Seconds from the group's first message to its last."""
        members = self.members[key]
        return self.span(int(members[0]), int(members[-1]))

    def within(self, a: int, b: int, seconds: float) -> bool:
        """Whether the messages at positions a and b are at most `seconds` apart."""
        return self.span(a, b) <= seconds


WITHHOLDABLE = ("topic", "phase")


def check_withheld(fields: Sequence[str], where: str) -> None:
    unknown = sorted(set(fields) - set(WITHHOLDABLE))
    if unknown:
        raise ValueError(f"{where}: cannot withhold {unknown}; allowed: "
                         f"{', '.join(WITHHOLDABLE)}")


def withheld(messages: Iterable[Message], fields: Sequence[str]) -> list[Message]:
    """The messages with `fields` set to null (the same objects when there are none)."""
    if not fields:
        return list(messages)
    blank = dict.fromkeys(fields)
    return [dataclasses.replace(m, **blank) for m in messages]  # type: ignore[arg-type]


def withheld_conversation(conversation: Conversation, fields: Sequence[str]) -> Conversation:
    if not fields:
        return conversation
    return Conversation(conversation.conv_id, tuple(withheld(conversation.messages, fields)))


def chronological(message: Message) -> tuple[datetime, int]:
    """Sort key of messages in time order (ties broken by conversation order)."""
    return message.timestamp, message.seq


def message_line(message: Message, text: str | None = None) -> str:
    """A message as every T-MEM step shows it: `render_message`, its text replaced by `text`
    when given (the forest's compressed text)."""
    return render_message(message if text is None else dataclasses.replace(message, text=text))


Relation = Literal["ROOT", "UPDATE", "EXPAND", "RELATED"]
EDGE_RELATIONS: tuple[Relation, ...] = ("UPDATE", "EXPAND")
PROPOSABLE: tuple[Relation, ...] = ("UPDATE", "EXPAND", "ROOT")
_PROPOSED: dict[str, Relation] = {r: r for r in PROPOSABLE}


@dataclass(frozen=True)
class Node:
    id: str
    parent: str | None
    relation: Relation
    depth: int
    at: datetime
    seq: int
    children: tuple[str, ...] = ()

    @property
    def order(self) -> tuple[datetime, int]:
        return self.at, self.seq

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "parent": self.parent, "relation": self.relation,
                "depth": self.depth, "at": self.at.isoformat(), "seq": self.seq,
                "children": list(self.children)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Node:
        return cls(data["id"], data["parent"], data["relation"], data["depth"],
                   datetime.fromisoformat(data["at"]), data["seq"], tuple(data["children"]))


@dataclass(frozen=True)
class Forest:
    """Nodes by id in time order; `roots` in time order (a flat forest's: in rank order)."""

    nodes: dict[str, Node]
    roots: tuple[str, ...]

    def preorder(self) -> list[Node]:
        """Trees by root time, each in chronological pre-order (children oldest first)."""
        out: list[Node] = []
        stack = [self.nodes[r] for r in reversed(self.roots)]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(self.nodes[c] for c in reversed(node.children))
        return out

    def leaves(self) -> list[str]:
        return [i for i, n in self.nodes.items() if not n.children]

    def without(self, leaf: str) -> Forest:
        """The forest minus one leaf; every other node and edge is unchanged."""
        node = self.nodes[leaf]
        if node.children:
            raise ValueError(f"{leaf} is not a leaf")
        nodes = {i: n for i, n in self.nodes.items() if i != leaf}
        if node.parent is not None:
            parent = nodes[node.parent]
            nodes[parent.id] = replace(parent, children=tuple(
                c for c in parent.children if c != leaf))
        return Forest(nodes, tuple(r for r in self.roots if r != leaf))

    def to_json(self) -> list[dict[str, Any]]:
        return [n.to_json() for n in self.nodes.values()]

    @classmethod
    def from_json(cls, data: Iterable[Mapping[str, Any]]) -> Forest:
        nodes = {n.id: n for n in map(Node.from_json, data)}
        return cls(nodes, tuple(i for i, n in nodes.items() if n.parent is None))


@dataclass(frozen=True)
class Proposal:
    """An edge as the LLM proposed it (parent None: ROOT); not yet validated."""

    parent: str | None
    relation: str


@dataclass(frozen=True)
class Repair:
    id: str
    proposed: Proposal | None
    problem: str
    parent: str | None
    relation: Relation

    def to_json(self) -> dict[str, Any]:
        proposed = None if self.proposed is None else {"parent": self.proposed.parent,
                                                       "relation": self.proposed.relation}
        return {"id": self.id, "proposed": proposed, "problem": self.problem,
                "parent": self.parent, "relation": self.relation}


PhaseRanks = Mapping[str, Mapping[str, int]]  # group key -> phase -> rank in that group


@dataclass(frozen=True)
class Constraints:
    """Which earlier message may be a message's parent (phase ranks per discovery group)."""

    phase_rank: PhaseRanks = field(default_factory=dict)

    def problem(self, child: Message, parent: Message) -> str | None:
        if chronological(parent) >= chronological(child):
            return "parent is not earlier"
        if child.topic is not None and parent.topic is not None and child.topic != parent.topic:
            return "parent is in another topic"
        ranks = self.phase_rank.get(group_key(child), {})
        child_rank = ranks.get(child.phase) if child.phase is not None else None
        parent_rank = ranks.get(parent.phase) if parent.phase is not None else None
        if child_rank is not None and parent_rank is not None and parent_rank > child_rank:
            return "phase order goes backwards"
        return None


def phase_order(messages: Iterable[Message]) -> dict[str, dict[str, int]]:
    """Per discovery group: phase -> rank by first appearance among the group's messages
    (messages in conversation order)."""
    ranks: dict[str, dict[str, int]] = {}
    for m in messages:
        if m.phase is not None:
            group = ranks.setdefault(group_key(m), {})
            group.setdefault(m.phase, len(group))
    return ranks


def build_forest(messages: Sequence[Message], proposals: Mapping[str, Proposal],
                 constraints: Constraints | None = None,
                 typed: bool = True) -> tuple[Forest, list[Repair]]:
    """A valid forest from proposed edges, repairing each invalid one (see module doc)."""
    constraints = constraints or Constraints()
    ordered = sorted(messages, key=chronological)
    by_id = {m.msg_id: m for m in ordered}
    edges: dict[str, tuple[str | None, Relation]] = {}
    repairs = []
    for k, m in enumerate(ordered):
        proposal = proposals.get(m.msg_id)
        edge = _validated(m, proposal, by_id, constraints)
        if isinstance(edge, str):
            problem, edge = edge, _fallback(m, ordered[:k], constraints)
            repairs.append(Repair(m.msg_id, proposal, problem, *edge))
        edges[m.msg_id] = edge if typed or edge[1] == "ROOT" else (edge[0], "RELATED")
    return _assemble(ordered, edges), repairs


def flat_forest(messages: Sequence[Message]) -> Forest:
    """Every message a ROOT, in the order given (selection rank): the flat list of the
    no-structuring ablation."""
    return _assemble(messages, {m.msg_id: (None, "ROOT") for m in messages})


def _validated(message: Message, proposal: Proposal | None, by_id: Mapping[str, Message],
               constraints: Constraints) -> tuple[str | None, Relation] | str:
    """The proposed edge (parent, relation) when valid, else what is wrong with it."""
    if proposal is None:
        return "no proposal"
    relation = _PROPOSED.get(proposal.relation)
    if relation is None:
        return f"unknown relation {proposal.relation!r}"
    if relation == "ROOT":
        return None, relation
    parent = by_id.get(proposal.parent) if proposal.parent is not None else None
    if parent is None:
        return f"unknown parent {proposal.parent!r}"
    return constraints.problem(message, parent) or (parent.msg_id, relation)


def _fallback(message: Message, earlier: Sequence[Message],
              constraints: Constraints) -> tuple[str | None, Relation]:
    group = group_key(message)
    for candidate in reversed(earlier):
        if group_key(candidate) == group and constraints.problem(message, candidate) is None:
            return candidate.msg_id, "EXPAND"
    return None, "ROOT"


def _assemble(ordered: Sequence[Message], edges: Mapping[str, tuple[str | None, Relation]]
              ) -> Forest:
    children: dict[str, list[str]] = {m.msg_id: [] for m in ordered}
    depth: dict[str, int] = {}
    for m in ordered:  # parents come first in time order
        parent = edges[m.msg_id][0]
        depth[m.msg_id] = 0 if parent is None else depth[parent] + 1
        if parent is not None:
            children[parent].append(m.msg_id)
    nodes = {m.msg_id: Node(m.msg_id, edges[m.msg_id][0], edges[m.msg_id][1], depth[m.msg_id],
                            m.timestamp, m.seq, tuple(children[m.msg_id])) for m in ordered}
    return Forest(nodes, tuple(i for i, n in nodes.items() if n.parent is None))


INDENT = "  "


@dataclass(frozen=True)
class Linearised:
    text: str
    order: tuple[str, ...]  # node ids as they appear


def node_line(node: Node, message: Message, text: str, flat: bool = False) -> str:
    """One node: structure (unless flat), then id, time, author and metadata, retained text."""
    body = message_line(message, text)
    if flat:
        return body
    parent = f"parent [{node.parent}]" if node.parent else "no parent"
    return f"{INDENT * node.depth}- {node.relation} (depth {node.depth}, {parent}) {body}"


def linearise(forest: Forest, messages: Mapping[str, Message], texts: Mapping[str, str],
              flat: bool = False) -> Linearised:
    """The forest as text; `texts` holds each node's retained text."""
    lines: list[str] = []
    order = forest.preorder()
    for node in order:
        if node.parent is None and lines and not flat:
            lines.append("")
        lines.append(node_line(node, messages[node.id], texts[node.id], flat))
    return Linearised("\n".join(lines), tuple(n.id for n in order))


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
class Compression:
    texts: dict[str, str]  # node id -> retained text
    tokens: int  # estimated: fixed costs plus retained span tokens
    spans: int
    dropped: int
    over_budget: bool  # the mandatory content alone exceeds the budget

    def to_json(self) -> dict[str, int | bool]:
        return {"tokens": self.tokens, "spans": self.spans, "dropped": self.dropped,
                "over_budget": self.over_budget}


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


ADMIT_SLACK = 2  # tokens per admitted node for line breaks and deeper indentation
MAX_CORRECTIONS = 3  # re-compressions with a tighter target when the estimate was short


@dataclass(frozen=True)
class Rendering:
    """How the forest becomes text: compressed or whole, as a forest or a flat list."""

    compression: bool
    flat: bool


@dataclass(frozen=True)
class Rendered:
    forest: Forest
    linearised: Linearised
    tokens: int
    compression: Compression | None
    trimmed: tuple[str, ...]


def admit(ranked: Sequence[Message], terms: QueryTerms, budget: int, count: TokenCounter,
          how: Rendering) -> list[Message]:
    """Best first, each message whose estimated cost as a forest line still fits (others are
    skipped); a flat list admits the same messages as the forest, in rank order."""
    admitted, used = [], 0
    for m in ranked:
        text = mandatory_text(m.text, terms, count) if how.compression else m.text
        probe = Node(m.msg_id, m.msg_id, "EXPAND", 1, m.timestamp, m.seq)
        cost = count(node_line(probe, m, text)) + ADMIT_SLACK
        if used + cost <= budget:
            admitted.append(m)
            used += cost
    return admitted


def fit(forest: Forest, messages: Mapping[str, Message], rank: Mapping[str, int],
        terms: QueryTerms, budget: int, count: TokenCounter, how: Rendering) -> Rendered:
    """Compress and linearise; tighten the target, then trim leaves, until within budget."""
    trimmed: list[str] = []
    target, corrections = budget, 0
    while True:
        texts, compression = _texts(forest, messages, terms, target, count, how)
        out = linearise(forest, messages, texts, flat=how.flat)
        tokens = count(out.text)
        if tokens <= budget or not forest.nodes:
            return Rendered(forest, out, tokens, compression, tuple(trimmed))
        if (compression is not None and not compression.over_budget
                and corrections < MAX_CORRECTIONS):
            target, corrections = target - (tokens - budget), corrections + 1
            continue
        leaf = max(forest.leaves(), key=rank.__getitem__)
        forest = forest.without(leaf)
        trimmed.append(leaf)
        target, corrections = budget, 0


def _texts(forest: Forest, messages: Mapping[str, Message], terms: QueryTerms, target: int,
           count: TokenCounter, how: Rendering) -> tuple[dict[str, str], Compression | None]:
    if not how.compression:
        return {i: messages[i].text for i in forest.nodes}, None
    items = [Item(n.id, messages[n.id].text, messages[n.parent].text if n.parent else "",
                  count(node_line(n, messages[n.id], "", how.flat)) + 1)
             for n in forest.nodes.values()]
    compression = compress(items, target, terms, count)
    return compression.texts, compression


def phase_constraints(conversation: Conversation, fields: Sequence[str],
                      cache: dict[str, PhaseRanks]) -> Constraints:
    """Phase ranks of the conversation as structuring sees it (`fields` withheld), kept in
    `cache` per conversation."""
    if conversation.conv_id not in cache:
        cache[conversation.conv_id] = phase_order(withheld(conversation.messages, fields))
    return Constraints(cache[conversation.conv_id])
