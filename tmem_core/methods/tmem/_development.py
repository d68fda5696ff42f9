"""The development split that chose Temporal Evidence Discovery's defaults, and the figures
that chose them (evaluation side: gold evidence is read here, never by a method).

- Development: messages with their own times only. The synthetic set (2,000 messages, group
  chats of GroupMemBench's shape) with seeds 100 and 101, base and interleaved, and the
  EverMemBench-Dynamic sample the project ships (`tests/fixtures/evermembench/dynamic`, when
  given). The GroupMemBench sample has no evidence ids, so nothing of it can be scored.
- Reported: synthetic seeds 0, 1 and 2, base and interleaved (seed 0 is the set the tests and
  `make run` use), and every LoCoMo conversation of the file. LoCoMo stamps each turn with its
  session's time; on the message clock (`_discovery.message_clock`) a session's turns follow
  each other in turn order, one unit apart, so it is read, but it chooses nothing.

The relevant-episode rate is measured, not searched: the median rate of the clusters that hold
gold evidence (at the reference depth, with the candidate minimum duration, gap and padding),
and its growth with the anchors is the least-squares slope of log median rate on log depth.
The minimum duration, the gap, the padding and the threshold's position between the rates are
then searched on the development split for the best `score` (see `Metrics.score`) among the
admissible points: those where a lone seed in a quiet group fails the test at every depth
from the smallest (`lone_seed_fails`). `python -m jobs.tune_discovery` runs it all and prints
the figures of both splits.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tmem_core.benchmarks import LoadRequest, build
from tmem_core.evaluation import recall_scorable
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._discovery import (
    Seeding,
    density_threshold,
    group_anchors,
    interval_rate,
    on_message_clock,
    padded_members,
    search,
    seed,
    temporal_clusters,
)
from tmem_core.methods.tmem._rerank import ContextReranker
from tmem_core.methods.tmem._timeline import Timeline
from tmem_core.retrieval import Conversation, IndexStore, conversations_from_table
from tmem_core.schema import Question, gold_from_table, questions_from_table

DEPTHS = (12, 24, 36, 48)
SYNTHETIC_DEVELOPMENT, SYNTHETIC_REPORTED = (100, 101), (0, 1, 2)
SYNTHETIC_VARIANTS = ("base", "interleaved")
SYNTHETIC_SIZE = 2000
GRID = {"min_duration": (5.0, 10.0, 20.0, 40.0), "max_gap": (10.0, 30.0, 90.0),
        "padding": (1, 2, 3), "threshold_position": (0.25, 0.5, 0.75)}
"""In message-clock units (the conversation's typical interval between messages)."""


@dataclass(frozen=True)
class Part:
    """One data set of a split: a benchmark request and the conversations it keeps."""

    name: str
    benchmark: str
    request: LoadRequest
    conversations: tuple[str, ...] = ()  # empty: all


def split(which: str, locomo: Path, evermembench: Path | None = None) -> list[Part]:
    """The parts of the "development" split (the EverMemBench sample when given) or of the
    "reported" one (LoCoMo's file)."""
    development = which == "development"
    synthetic = [Part(f"synthetic {variant} seed {s}", "synthetic",
                      LoadRequest(size=SYNTHETIC_SIZE, seed=s, variant=variant))
                 for variant in SYNTHETIC_VARIANTS
                 for s in (SYNTHETIC_DEVELOPMENT if development else SYNTHETIC_REPORTED)]
    if not development:
        return [*synthetic, Part("locomo (session stamps)", "locomo", LoadRequest(source=locomo))]
    sample = [Part("evermembench sample", "evermembench", LoadRequest(source=evermembench))]
    return [*synthetic, *(sample if evermembench else [])]


@dataclass(frozen=True)
class Seeded:
    """One scorable question seeded at the deepest depth, with its gold evidence positions."""

    part: str
    question: Question
    seeding: Seeding
    conversation: Conversation
    timeline: Timeline
    evidence: frozenset[int]


def seeded_questions(parts: Iterable[Part], store_root: Path | None = None,
                     config: DiscoveryConfig | None = None) -> list[Seeded]:
    """Every scorable question of the parts, seeded once at `max(DEPTHS)` anchors."""
    config = config or DiscoveryConfig()
    out = []
    for part in parts:
        prepared = build(part.benchmark, part.request)
        conversations = {k: c for k, c in conversations_from_table(prepared.messages).items()
                         if not part.conversations or k in part.conversations}
        store = (IndexStore(conversations, root=store_root) if store_root
                 else IndexStore(conversations))
        gold = gold_from_table(prepared.questions)
        timelines = {k: Timeline.of(c) for k, c in conversations.items()}
        for q in questions_from_table(prepared.questions):
            if q.conv_id not in conversations or not recall_scorable(gold[q.qid]):
                continue
            index = store.index(q.conv_id, config.metadata)
            conversation = index.conversation
            out.append(Seeded(part.name, q, seed(q, index, config, max(DEPTHS)), conversation,
                              timelines[q.conv_id],
                              frozenset(conversation.position[e]
                                        for e in gold[q.qid].evidence_ids)))
    return out


def relevant_rates(questions: Sequence[Seeded], config: DiscoveryConfig, depth: int
                   ) -> list[float]:
    """The rate of every cluster whose padded interval holds gold evidence (on the message
    clock, as `search` reads it)."""
    rates = []
    for q in questions:
        timeline = on_message_clock(q.timeline)
        for positions in group_anchors(q.seeding.top(depth).anchors, timeline).values():
            for c in temporal_clusters(positions, timeline, config):
                if q.evidence & set(padded_members(c, timeline, config)):
                    rates.append(interval_rate(len(c), timeline.span(c[0], c[-1]), config))
    return rates


def fit_episode_rate(questions: Sequence[Seeded], config: DiscoveryConfig) -> DiscoveryConfig:
    """`config` with the episode rate measured at its reference depth and its exponent the
    slope of log median relevant rate on log depth."""
    medians = {d: statistics.median(relevant_rates(questions, config, d)) for d in DEPTHS}
    xs = [math.log(d) for d in DEPTHS]
    ys = [math.log(medians[d]) for d in DEPTHS]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
             / sum((x - mx) ** 2 for x in xs))
    reference = statistics.median(relevant_rates(questions, config, config.reference_anchors))
    return replace(config, episode_rate=round(reference, 2),
                   episode_exponent=round(max(slope, 0.0), 2))


@dataclass(frozen=True)
class Metrics:
    """Discovery on a set of questions at one depth (means over questions)."""

    questions: int
    pool_recall: float  # gold evidence among the candidates handed to selection
    seed_recall: float  # ... among the anchors alone
    reranked_recall: float  # ... among the no-LLM reranker's Top-k of the candidates
    pool_size: float
    kept: int  # intervals kept
    kept_with_evidence: int  # ... whose members hold gold evidence
    lone_kept: int  # kept intervals of a single seed
    lone: int  # clusters of a single seed

    @property
    def precision(self) -> float:
        return self.kept_with_evidence / self.kept if self.kept else 0.0

    @property
    def score(self) -> float:
        """What the search maximises: the reranked Top-k's recall (discovery's own result,
        where a needless interval's members crowd out evidence) plus the pool's recall."""
        return self.reranked_recall + self.pool_recall


def measure(questions: Sequence[Seeded], config: DiscoveryConfig, depth: int) -> Metrics:
    pool = seeds = reranked = size = 0.0
    kept = with_evidence = lone_kept = lone = 0
    reranker = ContextReranker()
    for q in questions:
        found = search(q.seeding.top(depth), q.conversation, q.timeline, config)
        ids = {c.message.msg_id for c in found.candidates}
        evidence = {q.conversation.messages[p].msg_id for p in q.evidence}
        top = reranker.select(q.question, found.candidates, depth)
        pool += len(ids & evidence) / len(evidence)
        seeds += len(set(found.anchors) & evidence) / len(evidence)
        reranked += len(set(top) & evidence) / len(evidence)
        size += len(ids)
        for iv in found.intervals:
            lone += len(iv.anchors) == 1
            if iv.kept:
                kept += 1
                with_evidence += bool(evidence & set(iv.members))
                lone_kept += len(iv.anchors) == 1
    n = len(questions)
    return Metrics(n, pool / n, seeds / n, reranked / n, size / n, kept, with_evidence,
                   lone_kept, lone)


def by_part(questions: Sequence[Seeded]) -> dict[str, list[Seeded]]:
    parts: dict[str, list[Seeded]] = {}
    for q in questions:
        parts.setdefault(q.part, []).append(q)
    return parts


def mean_score(questions: Sequence[Seeded], config: DiscoveryConfig) -> float:
    """The score averaged over depths and over parts (each part counts alike)."""
    parts = by_part(questions).values()
    return statistics.mean(measure(qs, config, d).score for qs in parts for d in DEPTHS)


def lone_seed_fails(config: DiscoveryConfig, depth: int = min(DEPTHS)) -> bool:
    """Whether one seed, alone in a group with no background, fails the test at `depth`
    anchors (and so at every deeper one)."""
    threshold = density_threshold(0.0, config.episode_rate_at(depth), config.threshold_position)
    return threshold is not None and interval_rate(1, 0.0, config) <= threshold


def grid(config: DiscoveryConfig) -> Iterator[DiscoveryConfig]:
    for values in itertools.product(*GRID.values()):
        duration, gap, padding, position = values
        yield replace(config, min_duration=duration, max_gap=gap,
                      padding=int(padding), threshold_position=position)


@dataclass(frozen=True)
class Point:
    """One grid point with its fitted episode rate, and its score when admissible."""

    config: DiscoveryConfig
    score: float | None  # None: a lone seed in a quiet group would pass


def choose(questions: Sequence[Seeded], base: DiscoveryConfig | None = None
           ) -> tuple[DiscoveryConfig, list[Point]]:
    """The best admissible grid point on `questions` (each with its episode rate fitted
    first), and every point."""
    points = []
    for candidate in grid(base or DiscoveryConfig()):
        fitted = fit_episode_rate(questions, candidate)
        points.append(Point(fitted, mean_score(questions, fitted) if lone_seed_fails(fitted)
                            else None))
    scored = [p for p in points if p.score is not None]
    if not scored:
        raise ValueError("no admissible grid point")
    return max(scored, key=lambda p: p.score or 0.0).config, points
