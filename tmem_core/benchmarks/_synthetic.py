"""The synthetic multi-party benchmark: seeded, deterministic, 200 to 120,000 messages.

Each conversation is a workspace of several channels, authors and roles. Topics (a system's
attribute within a project, e.g. "Atlas checkout retry limit") recur in dense episodes
separated by long gaps; decisions are proposed, elaborated (EXPAND), updated (UPDATE) and
sometimes rolled back. Decisive updates are often phrased without the topic's words: only
their episode ties them to the question. Distractors share words with the questions. Six
question kinds (GroupMemBench's) carry gold answers and gold evidence ids. The words and the
phrasing of the messages are `_synthetic_vocabulary.py`'s; this module generates with them.

Variants (`--variant`, joined with '+'): `native-revisions` generates 1-3 revision episodes
then a rollback in every topic (a project variant: it changes the random draws, so the whole
set differs from `base`; Exp-5's controlled condition is `revisions=N`, injected into an
otherwise identical copy by `benchmarks/_revisions.py`); `no-metadata` withholds topic and
phase; `interleaved`
(or `interleaved=N`, N from 2 to 6, default 4) makes channels and topics interleave: episodes
start together in busy windows of N channels (each episode of a topic in whichever channel its
window has free, so topics recur across channels), and half the noise falls in those windows,
so the evidence of an answer lies in a burst of one channel while the others carry unrelated
traffic. Without it each topic keeps one channel and episodes start independently.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tmem_core import DataError
from tmem_core.benchmarks import _synthetic_vocabulary as words
from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.evaluation import SUPERSEDED_KEY, Protocol, one_judge
from tmem_core.schema import Gold, Message, Question

ABSTAIN = "No information available."  # the gold answer of an abstention question

VARIANT_FLAGS = ("base", "native-revisions", "no-metadata", "interleaved")
INTERLEAVE_DEFAULT, INTERLEAVE_MAX = 4, 6  # channels active at once in a busy window
WINDOW_JOIN_MINUTES = 10  # episodes of a window start within this many minutes of it
WINDOW_NOISE_SHARE = 0.5  # share of the noise that falls in busy windows (interleaved)
WINDOW_NOISE_SECONDS = 3600  # ... within this long after a window starts
MESSAGES_PER_CONVERSATION = 30_000  # a GroupMemBench domain
MIN_SIZE, MAX_SIZE = 200, 200_000
TOPIC_SHARE_MAX = 0.8  # at most this share of a workspace is topic discussion



@dataclass
class _Event:
    """A message before ordering; ids are assigned once all events are sorted by time."""

    when: datetime
    author: str
    channel: str
    text: str
    topic: str | None
    phase: str | None
    reply_to: _Event | None = None
    msg_id: str = ""


@dataclass
class _Window:
    """A busy window: episodes of different topics starting together, one channel each."""

    start: datetime
    channels: list[str] = field(default_factory=list)


@dataclass
class _Topic:
    project: str
    system: str
    attribute: str
    channel: str  # of the episode under way (interleaved: each episode its window's channel)
    owner: str
    values: list[str]
    scope: str
    chain: list[tuple[_Event, str]] = field(default_factory=list)  # (event, value) states
    final_evidence: list[_Event] = field(default_factory=list)
    proposer: str = ""
    scope_event: _Event | None = None
    update_event: _Event | None = None

    @property
    def name(self) -> str:
        return f"{self.project} {self.system} {self.attribute}"


SYNTHETIC = Protocol(one_judge("judge/synthetic"), ("judge/synthetic",),
                     abstention_phrase=ABSTAIN,
                     temporal_categories=frozenset({"temporal"}),
                     judge_notes=("the project's own benchmark, judged by its own prompt",))


@benchmark("synthetic", protocol=SYNTHETIC,
           description="Seeded multi-party group-chat benchmark (generated)",
           needs_source=False)
def load_synthetic(request: LoadRequest) -> LoadedBenchmark:
    flags, interleave = _parse_variant(request.variant)
    if not MIN_SIZE <= request.size <= MAX_SIZE:
        raise DataError(f"--size must be between {MIN_SIZE} and {MAX_SIZE}, got {request.size}")
    out = LoadedBenchmark(messages=[], questions=[])
    n_conv = max(1, round(request.size / MESSAGES_PER_CONVERSATION))
    sizes = [request.size // n_conv + (i < request.size % n_conv) for i in range(n_conv)]
    for index, size in enumerate(sizes):
        conv = _Conversation(f"syn-{request.seed}-{index}", size,
                             random.Random(f"{request.seed}:{index}"), flags, interleave)
        conv.generate(out)
    out.details["variant"] = sorted(flags)
    if interleave:
        out.details["interleave"] = interleave
    return out


def _parse_variant(variant: str) -> tuple[set[str], int]:
    """The variant's flags (without `base`) and its interleaving degree (0: off)."""
    flags = set(variant.split("+")) if variant else {"base"}
    degrees = sorted(f for f in flags if f.startswith("interleaved="))
    if len(degrees) > 1:
        raise DataError(f"variant {variant!r}: more than one interleaving degree")
    interleave = 0
    for flag in degrees:
        degree = flag.removeprefix("interleaved=")
        if not degree.isdigit() or not 2 <= int(degree) <= INTERLEAVE_MAX:
            raise DataError(f"variant {flag!r}: the degree must be an integer from 2 to "
                            f"{INTERLEAVE_MAX}")
        flags = flags - {flag} | {"interleaved"}
        interleave = int(degree)
    if "revisions" in flags:
        raise DataError("variant 'revisions' is now 'native-revisions' (the generator's own "
                        "revision episodes, other random draws) or 'revisions=1|2|3' (Exp-5: "
                        "chains injected into an otherwise identical copy)")
    unknown = flags - set(VARIANT_FLAGS)
    if unknown:
        raise DataError(f"unknown variant {sorted(unknown)}; allowed: {', '.join(VARIANT_FLAGS)} "
                        "(join several with '+'; interleaved=N sets the degree)")
    if "interleaved" in flags and not interleave:
        interleave = INTERLEAVE_DEFAULT
    return flags - {"base"}, interleave


class _Conversation:
    def __init__(self, conv_id: str, size: int, rng: random.Random, flags: set[str],
                 interleave: int) -> None:
        self.conv_id, self.size, self.rng, self.flags = conv_id, size, rng, flags
        self.interleave = interleave
        self.windows: dict[int, list[_Window]] = {}  # episode day -> its busy windows
        self.authors = [f"User_{i}" for i in range(1, 5 + min(20, size // 1500) + 1)]
        self.roles = {a: words.ROLES[i % len(words.ROLES)] for i, a in enumerate(self.authors)}
        self.start = datetime(2025, 1, 6, 9, 0, tzinfo=UTC) + timedelta(days=rng.randrange(60))
        self.days = max(60, size // 100)
        self.events: list[_Event] = []

    # -- topics and episodes -------------------------------------------------------------
    def generate(self, out: LoadedBenchmark) -> None:
        topics: list[_Topic] = []
        for topic in self._topics():
            before = len(self.events)
            self._episodes(topic)
            if topics and len(self.events) > TOPIC_SHARE_MAX * self.size:
                del self.events[before:]  # leave room for noise: stop adding topics
                break
            topics.append(topic)
        self._noise(topics, self.size - len(self.events))
        self._finalise(out)
        self._questions(topics, out)

    def _topics(self) -> list[_Topic]:
        n_topics = max(6, round(self.size * 0.45 / 22))
        # ~12 topics per project: some share an attribute (term ambiguity needs such pairs)
        projects = words.PROJECTS[: max(1, min(len(words.PROJECTS), n_topics // 12))]
        combos = [(p, s, a) for p in projects for s in words.SYSTEMS for a in words.ATTRIBUTES]
        self.rng.shuffle(combos)
        chosen = combos[: min(n_topics, len(combos))]
        topics = []
        for project, system, attribute in chosen:
            values = list(words.ATTRIBUTES[attribute])
            self.rng.shuffle(values)
            topics.append(_Topic(project, system, attribute, self.rng.choice(words.CHANNELS),
                                 self.rng.choice(self.authors), values,
                                 self.rng.choice(words.SCOPES)))
        return topics

    def _episode_slots(self, topic: _Topic, count: int) -> list[tuple[datetime, str]]:
        """Episode starts and channels, spread over the timeline with gaps of at least four
        days: independent starts in the topic's channel, or places in busy windows."""
        days = sorted(self.rng.sample(range(0, self.days - 2, 4), count))
        if self.interleave:
            return [self._join_window(d) for d in days]
        return [(self._day_start(d), topic.channel) for d in days]

    def _day_start(self, day: int) -> datetime:
        return self.start + timedelta(days=day, hours=self.rng.randrange(9),
                                      minutes=self.rng.randrange(60))

    def _join_window(self, day: int) -> tuple[datetime, str]:
        """A start in the day's open busy window (a new one when it is full) and a channel
        that window does not use yet."""
        windows = self.windows.setdefault(day, [])
        if not windows or len(windows[-1].channels) >= self.interleave:
            windows.append(_Window(self._day_start(day)))
        window = windows[-1]
        channel = self.rng.choice([c for c in words.CHANNELS if c not in window.channels])
        window.channels.append(channel)
        return window.start + timedelta(minutes=self.rng.randrange(WINDOW_JOIN_MINUTES)), channel

    @staticmethod
    def _clock(topic: _Topic, slots: list[tuple[datetime, str]]) -> Iterator[tuple[int, datetime]]:
        """(episode index, start) in turn, moving the topic to each episode's channel."""
        for i, (when, channel) in enumerate(slots):
            topic.channel = channel
            yield i, when

    def _phase_at(self, when: datetime) -> str:
        """Project phases follow the timeline: planning first, launch last."""
        share = (when - self.start).total_seconds() / (self.days * 86400)
        return words.PHASES[min(len(words.PHASES) - 1, int(share * len(words.PHASES)))]

    def _episodes(self, topic: _Topic) -> None:
        n_updates = self.rng.choice((1, 1, 2))
        revisions = self.rng.randint(1, 3) if "native-revisions" in self.flags else 0
        rollback = revisions > 0 or self.rng.random() < 0.2
        n_episodes = 2 + n_updates + (1 if revisions else 0) + int(rollback)
        slots = self._episode_slots(topic, min(n_episodes, (self.days - 2) // 4))
        phase_of = {i: self._phase_at(when) for i, (when, _) in enumerate(slots)}
        clock = self._clock(topic, slots)
        self._opening_episode(topic, *next(clock), phase_of)
        for step in range(n_updates):
            if (slot := next(clock, None)) is not None:
                self._update_episode(topic, slot[0], slot[1], phase_of, topic.values[1 + step])
        if revisions and (slot := next(clock, None)) is not None:
            for r in range(revisions):
                value = topic.values[(1 + n_updates + r) % len(topic.values)]
                self._update_episode(topic, slot[0], slot[1] + timedelta(minutes=40 * r),
                                     phase_of, value, brief=True)
        if rollback and (slot := next(clock, None)) is not None:
            self._rollback_episode(topic, *slot, phase_of)
        if (slot := next(clock, None)) is not None:
            self._chatter_episode(topic, *slot, phase_of)

    def _say(self, topic: _Topic, when: datetime, phase: str, text: str, author: str | None = None,
             reply_to: _Event | None = None, channel: str | None = None) -> _Event:
        event = _Event(when, author or self.rng.choice(self.authors), channel or topic.channel,
                       text, topic.name, phase, reply_to)
        self.events.append(event)
        return event

    def _ticks(self, start: datetime) -> list[datetime]:
        minutes, out = 0, []
        for _ in range(16):
            minutes += self.rng.randint(1, 6)
            out.append(start + timedelta(minutes=minutes))
        return out

    def _opening_episode(self, topic: _Topic, i: int, start: datetime,
                         phase_of: dict[int, str]) -> None:
        t, ph, v0 = self._ticks(start), phase_of[i], topic.values[0]
        topic.proposer = self.rng.choice(self.authors)
        kickoff = self._say(topic, t[0], ph, f"Kicking off the {topic.name} discussion: we "
                            f"need to settle it before {words.PHASES[-1]}.")
        root = self._say(topic, t[1], ph, f"For the {topic.system} {topic.attribute} I propose "
                         f"{v0}; it is the safest option we have.", topic.proposer, kickoff)
        topic.chain.append((root, v0))
        self._say(topic, t[2], ph, f"Agreed, {v0} sounds reasonable to me.", reply_to=root)
        topic.scope_event = self._say(
            topic, t[3], ph, f"One constraint: whatever we pick should apply to {topic.scope}.",
            reply_to=root)
        self._say(topic, t[4], ph, f"I will own the {topic.system} {topic.attribute} work "
                  f"for {topic.project}.", topic.owner)
        for k in range(self.rng.randint(2, 5)):
            self._say(topic, t[5 + k], ph, self.rng.choice(words.EPISODE_FILLER).format(t=topic))

    def _update_episode(self, topic: _Topic, i: int, start: datetime, phase_of: dict[int, str],
                        value: str, brief: bool = False) -> None:
        t, ph = self._ticks(start), phase_of[i]
        opener = self._say(topic, t[0], ph, f"Reopening the {topic.project} {topic.system} "
                           f"{topic.attribute} question after the {ph} review.")
        # the decisive message shares almost no words with the question: only its episode
        # ties it to the topic.
        update = self._say(topic, t[1], ph, self.rng.choice(words.UPDATE_TEMPLATES).format(v=value),
                           reply_to=opener)
        topic.chain.append((update, value))
        topic.update_event = topic.update_event or update
        if brief:
            return
        self._say(topic, t[2], ph, f"Confirmed, {value} from the next release.", reply_to=update)
        for k in range(self.rng.randint(1, 4)):
            self._say(topic, t[3 + k], ph, self.rng.choice(words.EPISODE_FILLER).format(t=topic))

    def _rollback_episode(self, topic: _Topic, i: int, start: datetime,
                          phase_of: dict[int, str]) -> None:
        t, ph = self._ticks(start), phase_of[i]
        opener = self._say(topic, t[0], ph, f"Incident review for {topic.project} "
                           f"{topic.system}: the latest {topic.attribute} change caused trouble.")
        back = self._say(topic, t[1], ph, "Then let's roll back to what we originally agreed.",
                         reply_to=opener)
        topic.chain.append((back, topic.values[0]))
        self._say(topic, t[2], ph, "Rollback done, the original setting is live again.",
                  reply_to=back)

    def _chatter_episode(self, topic: _Topic, i: int, start: datetime,
                         phase_of: dict[int, str]) -> None:
        t = self._ticks(start)
        for k in range(self.rng.randint(3, 6)):
            text = self.rng.choice(words.EPISODE_FILLER).format(t=topic)
            self._say(topic, t[k], phase_of[i], text)

    # -- noise ---------------------------------------------------------------------------
    def _noise(self, topics: list[_Topic], count: int) -> None:
        windows = [w for day in self.windows.values() for w in day]
        for _ in range(count):
            when = self._noise_time(windows)
            if self.rng.random() < 0.25 and topics:
                t = self.rng.choice(topics)
                text = self.rng.choice(words.DISTRACTORS).format(t=t, v=self.rng.choice(t.values))
                topic, channel = t.name, self.rng.choice(words.CHANNELS)
            else:
                text = self.rng.choice(words.SMALL_TALK).format(s=self.rng.choice(words.SYSTEMS))
                topic = self.rng.choice(words.NOISE_TOPICS)
                channel = self.rng.choice(words.CHANNELS)
            self.events.append(_Event(when, self.rng.choice(self.authors), channel, text, topic,
                                      self._phase_at(when)))

    def _noise_time(self, windows: list[_Window]) -> datetime:
        """Anywhere on the timeline, or (interleaved, for a share of it) in a busy window."""
        if windows and self.rng.random() < WINDOW_NOISE_SHARE:
            window = self.rng.choice(windows)
            return window.start + timedelta(seconds=self.rng.randrange(WINDOW_NOISE_SECONDS))
        return self.start + timedelta(seconds=self.rng.randrange(self.days * 86400))

    def _finalise(self, out: LoadedBenchmark) -> None:
        order = sorted(range(len(self.events)), key=lambda k: (self.events[k].when, k))
        base = len(out.messages)
        for n, k in enumerate(order):
            self.events[k].msg_id = f"{self.conv_id}:m{n:06d}"
        hide = "no-metadata" in self.flags
        for n, k in enumerate(order):
            e = self.events[k]
            out.messages.append(Message(
                conv_id=self.conv_id, msg_id=e.msg_id, seq=base + n, timestamp=e.when,
                text=e.text, author=e.author, role=self.roles[e.author], channel=e.channel,
                topic=None if hide else e.topic, phase=None if hide else e.phase,
                reply_to=e.reply_to.msg_id if e.reply_to else None,
                session_id=f"{self.conv_id}:{e.when.date().isoformat()}",
            ))

    # -- questions -----------------------------------------------------------------------
    def _questions(self, topics: list[_Topic], out: LoadedBenchmark) -> None:
        kinds = ("knowledge_update", "temporal", "multi_hop", "user_implicit",
                 "term_ambiguity", "abstention")
        by_attr: dict[tuple[str, str], list[_Topic]] = {}
        for t in topics:
            by_attr.setdefault((t.project, t.attribute), []).append(t)
        for n, topic in enumerate(topics):
            kind = kinds[n % len(kinds)]
            made = _QUESTION_MAKERS[kind](topic, by_attr, topics)
            if made is None:
                made = _QUESTION_MAKERS["knowledge_update"](topic, by_attr, topics)
            assert made is not None
            text, answer, evidence, asking, answer_kind, kind = made
            qid = f"{self.conv_id}:q{n:05d}"
            out.questions.append((
                Question(conv_id=self.conv_id, qid=qid, question=text, category=kind,
                         asking_user=asking, question_time=self.start + timedelta(days=self.days)),
                Gold(qid=qid, answer=answer, evidence_ids=tuple(e.msg_id for e in evidence),
                     answer_kind=answer_kind,
                     gold_meta=_superseded(topic, answer) if kind == "knowledge_update" else None),
            ))


def _superseded(topic: _Topic, current: str) -> str | None:
    """`gold_meta` naming the values the topic's chain held before its current one (each
    once, oldest first by its last time in force), for judge calibration."""
    old = [value for _, value in topic.chain if value != current]
    latest_last = list(reversed(dict.fromkeys(reversed(old))))
    return json.dumps({SUPERSEDED_KEY: latest_last}) if old else None


_Made = tuple[str, str, list[_Event], str | None, str, str]


def _final_state(topic: _Topic) -> tuple[str, list[_Event]]:
    """The current value and the messages that establish it (a rollback needs the original)."""
    event, value = topic.chain[-1]
    if len(topic.chain) > 1 and event.text.startswith("Then let's roll back"):
        return value, [topic.chain[0][0], event]
    return value, [event]


def _q_update(t: _Topic, *_: object) -> _Made:
    value, ev = _final_state(t)
    return (f"What is the current {t.attribute} for {t.project} {t.system}?", value, ev, None,
            "text", "knowledge_update")


def _q_temporal(t: _Topic, *_: object) -> _Made | None:
    if t.update_event is None:
        return None
    value = next(v for e, v in t.chain if e is t.update_event)
    day = t.update_event.when
    return (f"On what date was the {t.project} {t.system} {t.attribute} first changed to "
            f"{value}?", f"{day.day} {day:%B %Y}", [t.update_event], None, "text", "temporal")


def _q_multi_hop(t: _Topic, *_: object) -> _Made | None:
    value, ev = _final_state(t)
    assert t.scope_event is not None
    return (f"Which {t.attribute} is in force for {t.project} {t.system}, and what does it "
            f"apply to?", f"{value}, {t.scope}", [*ev, t.scope_event], None, "text", "multi_hop")


def _q_user_implicit(t: _Topic, *_: object) -> _Made:
    root = t.chain[0][0]
    return (f"What did I originally propose for the {t.project} {t.system} {t.attribute}?",
            t.chain[0][1], [root], t.proposer, "text", "user_implicit")


def _q_term(t: _Topic, by_attr: dict[tuple[str, str], list[_Topic]], *_: object) -> _Made | None:
    if len(by_attr[(t.project, t.attribute)]) < 2:
        return None
    value, ev = _final_state(t)
    return (f"In {t.project}, which {t.attribute} applies to {t.system} (not to the other "
            f"systems)?", value, ev, None, "text", "term_ambiguity")


def _q_abstention(t: _Topic, _: object, topics: list[_Topic]) -> _Made | None:
    taken = {(x.project, x.system, x.attribute) for x in topics}
    missing = next((a for a in words.ATTRIBUTES if (t.project, t.system, a) not in taken), None)
    if missing is None:
        return None
    return (f"What is the {missing} for {t.project} {t.system}?", ABSTAIN, [], None,
            "abstention", "abstention")


_QUESTION_MAKERS: dict[str, Callable[[_Topic, dict[tuple[str, str], list[_Topic]],
                                       list[_Topic]], _Made | None]] = {
    "knowledge_update": _q_update,
    "temporal": _q_temporal,
    "multi_hop": _q_multi_hop,
    "user_implicit": _q_user_implicit,
    "term_ambiguity": _q_term,
    "abstention": _q_abstention,
}
