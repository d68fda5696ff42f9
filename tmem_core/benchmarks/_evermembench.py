"""EverMemBench in either upstream shape, detected from the files (or named by --variant).

`eval`, the layout its evaluation code reads (EverMind-AI/EverMemBench,
eval/src/core/loaders.py and qa_loader.py):
    <root>/dataset/<batch>/dialogue.json     {"dialogues": {date: {group: [message, ...]}}}
    <root>/dataset/<batch>/qa_<batch>.json   {"qars": [{id, Q, A, task_id, options}, ...]},
                                             or the legacy {"questions": [...]} (a bare list
                                             too) of {question_id, question, answer,
                                             options: ["A. ...", ...], correct_option}
`dynamic`, the EverMemBench-Dynamic dataset release (rows: a JSON list or JSON Lines):
    <root>/<topic>/dialogue.json    rows {topic_id, date, dialogues: {group: [message] | null}}
    <root>/<topic>/qa_<topic>.json  rows {topic_id, id, Q, A, R, options}
    <root>/profiles.json            {Name, Title, Dept, ...} per person, or {"members": [...]}
A message is {speaker, time (a full timestamp), dialogue, message_index (restarting every
date)}; a question's R lists {date, group, message_index: "1, 4-5"}, resolved to message ids
as gold evidence. The evaluation code's questions carry no R (answer accuracy needs none):
they are kept without evidence, counted, and recall leaves them out. Where a question's
`task_id` names tasks that messages list in their `task_ids`, those messages are its coarse
task evidence, kept apart in its gold metadata (`task_evidence_ids`), never as evidence.
`--source` is the repository root (or its dataset/ folder), the release root, or one batch
or topic folder: one conversation per folder.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tmem_core.benchmarks._evidence import parse_index_ranges
from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.benchmarks._source import parse_time, read_json_or_lines, require
from tmem_core.evaluation import Protocol
from tmem_core.schema import DataError, Gold, Message, Option, Question

SHAPES = {"eval": '{"dialogues": {date: {group: [message, ...]}}}',
          "dynamic": "rows {topic_id, date, dialogues: {group: [message, ...] | null}}"}
CAPABILITIES = {"F": "Fine-grained Recall", "MA": "Memory Awareness",
                "P": "Profile Understanding"}
CATEGORIES = ("F_SH", "F_MH", "F_TP", "F_HL", "MA_C", "MA_P", "MA_U", "P_Style", "P_Skill",
              "P_Title")
_MESSAGE_FIELDS = {"speaker", "time", "dialogue", "text", "message_index"}
_QUESTION_FIELDS = {"id", "Q", "A", "R", "options"}
_LEGACY_FIELDS = {"question_id", "question", "answer", "options", "correct_option"}
_TYPE_CATEGORIES = ("multiple_choice", "open_ended")  # legacy ids carry no task prefix
_OPTION = re.compile(r"^\s*([A-Za-z])\s*[.):]\s*(.*)$", re.S)
_ROLE_KEYS = ("title", "role", "position", "occupation")
_DEPT_KEYS = ("dept", "department")
_ID_KEYS = ("name", "topic_id")  # with the role and department keys: the directory fields
_SPACE = re.compile(r"\s+")
_CLOCK = re.compile(r"^\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?$")
_EXPECTED = ("expected EverMemBench's eval-code layout (dataset/<batch>/dialogue.json with "
             "qa_<batch>.json) or the EverMemBench-Dynamic release (<topic>/dialogue.json with "
             "qa_<topic>.json, profiles.json at the root)")

_Key = tuple[str, str, int]  # (date, group, message_index): a message's identity upstream


@dataclass(frozen=True)
class _Folder:
    """One conversation: a batch (eval code) or a topic (Dynamic release)."""

    path: Path
    qa: Path
    profiles: Path | None

    @property
    def dialogue(self) -> Path:
        return self.path / "dialogue.json"


@dataclass(frozen=True)
class _Day:
    date: str  # YYYY-MM-DD
    groups: Mapping[str, Any]
    record: str


@dataclass(frozen=True)
class _Row:
    """One source message and where it was read."""

    when: datetime
    day: _Day
    group: str
    index: int | None
    pos: int
    msg: Mapping[str, Any]
    record: str


@dataclass
class _Stats:
    """Adapter facts for the manifest."""

    shapes: dict[str, str] = field(default_factory=dict)
    capabilities: Counter[str] = field(default_factory=Counter)
    withheld: Counter[str] = field(default_factory=Counter)
    withheld_profile: Counter[str] = field(default_factory=Counter)
    question_formats: dict[str, str] = field(default_factory=dict)
    null_groups: int = 0
    untimed: int = 0
    unresolved: int = 0
    without_evidence: int = 0
    task_linked: int = 0

    def details(self) -> dict[str, object]:
        return {"shapes": self.shapes, "question_formats": self.question_formats,
                "capabilities": dict(sorted(self.capabilities.items())),
                "withheld_message_fields": dict(sorted(self.withheld.items())),
                "withheld_profile_fields": dict(sorted(self.withheld_profile.items())),
                "null_groups": self.null_groups, "messages_without_time": self.untimed,
                "unresolved_references": self.unresolved,
                "questions_without_evidence": self.without_evidence,
                "questions_with_task_evidence": self.task_linked}


@dataclass
class _Messages:
    """A conversation's message ids by upstream identity, and by task they list."""

    by_key: dict[_Key, str] = field(default_factory=dict)
    by_task: dict[str, list[str]] = field(default_factory=dict)


def _evermembench_judge(_q: Question, g: Gold) -> str | None:
    return None if g.answer_kind == "choice" else "judge/evermembench_open"


EVERMEMBENCH = Protocol(_evermembench_judge, ("judge/evermembench_open",),
                        temporal_categories=frozenset({"F_TP"}), date_tolerance_days=1,
                        judge_notes=("multiple-choice questions are scored by their letter, "
                                     "without a judge, as eval/src/core/evaluator.py does",))


@benchmark("evermembench", protocol=EVERMEMBENCH,
           description="EverMemBench multi-group dialogues with profiles",
           fixtures_only=True)
def load_evermembench(request: LoadRequest) -> LoadedBenchmark:
    shape = _shape_option(request.variant)
    if request.source is None or not request.source.is_dir():
        raise DataError(_EXPECTED, file=str(request.source or ""))
    out = LoadedBenchmark(messages=[], questions=[])
    stats = _Stats()
    for folder in _folders(request.source):
        messages = _load_dialogue(folder, shape, out, stats)
        _load_qa(folder, messages, out, stats)
    out.details.update(stats.details())
    return out


def _shape_option(variant: str) -> str | None:
    if variant in ("base", "auto"):
        return None
    if variant not in SHAPES:
        raise DataError(f"unknown evermembench variant {variant!r}: expected auto (detect from "
                        f"the files), {' or '.join(SHAPES)}")
    return variant


def _folders(source: Path) -> list[_Folder]:
    if (source / "dialogue.json").is_file():
        paths = [source]
    else:
        base = source / "dataset" if (source / "dataset").is_dir() else source
        paths = sorted(p for p in base.iterdir() if (p / "dialogue.json").is_file())
    if not paths:
        raise DataError(f"{_EXPECTED}; found no dialogue.json", file=str(source))
    return [_Folder(p, _qa_file(p), _profiles_file(p)) for p in paths]


def _qa_file(folder: Path) -> Path:
    found = sorted({*folder.glob("qa_*.json"), *folder.glob("qa.json")})
    if len(found) != 1:
        raise DataError(f"expected one qa_{folder.name}.json beside dialogue.json, found "
                        f"{len(found)}", file=str(folder))
    return found[0]


def _profiles_file(folder: Path) -> Path | None:
    """`profiles.json` in the folder or up to two levels above (the release root)."""
    return next((f for f in (up / "profiles.json" for up in (folder, *list(folder.parents)[:2]))
                 if f.is_file()), None)


def _load_dialogue(folder: _Folder, shape: str | None, out: LoadedBenchmark,
                   stats: _Stats) -> _Messages:
    """Append the folder's messages in time order; return their ids by upstream identity and
    by the tasks they list (`task_ids`, itself withheld from the messages)."""
    found, days = _days(read_json_or_lines(folder.dialogue), folder.dialogue)
    if shape is not None and found != shape:
        raise DataError(f"expected the {shape} shape ({SHAPES[shape]}), found the {found} shape",
                        file=str(folder.dialogue))
    conv = folder.path.name
    stats.shapes[conv] = found
    profiles = _profiles(folder, conv, stats.withheld_profile)
    index = _Messages()
    unmatched: set[str] = set()
    for row in sorted(_rows(days, folder.dialogue, stats), key=lambda r: r.when):
        local = f"p{row.pos}" if row.index is None else str(row.index)
        msg_id = f"{conv}:{row.day.date}:{_SPACE.sub('', row.group)}:{local}"
        if row.index is not None:
            _register(index.by_key, (row.day.date, _group_key(row.group), row.index), msg_id,
                      row, folder.dialogue)
        for task in _task_ids(row.msg.get("task_ids")):
            index.by_task.setdefault(task, []).append(msg_id)
        speaker = str(require(row.msg, "speaker", file=folder.dialogue, record=row.record))
        profile = profiles.get(_name_key(speaker))
        if profiles and profile is None:
            unmatched.add(speaker)
        stats.withheld.update(k for k in row.msg if k not in _MESSAGE_FIELDS)
        directory = {k: v for k, v in (profile or {}).items() if str(k).lower() in _DEPT_KEYS}
        out.messages.append(Message(
            conv_id=conv, msg_id=msg_id, seq=len(out.messages), timestamp=row.when,
            text=_text(row, folder.dialogue), session_id=f"{conv}:{row.day.date}",
            channel=row.group, author=speaker, role=_role(profile),
            meta=json.dumps(directory, sort_keys=True) if directory else None,
        ))
    if unmatched:
        out.warnings.append(f"{conv}: no profile for {', '.join(sorted(unmatched)[:10])}"
                            + (" ..." if len(unmatched) > 10 else ""))
    return index


def _register(index: dict[_Key, str], key: _Key, msg_id: str, row: _Row, path: Path) -> None:
    if key in index:
        raise DataError(f"message_index {row.index} repeats in {row.group} on {row.day.date}",
                        file=str(path), record=row.record, field="message_index")
    index[key] = msg_id


def _text(row: _Row, path: Path) -> str:
    """`dialogue`, or `text` where a message has no `dialogue` (as upstream reads them)."""
    if row.msg.get("dialogue") is None and row.msg.get("text") is not None:
        return str(row.msg["text"])
    return str(require(row.msg, "dialogue", file=path, record=row.record))


def _days(raw: Any, path: Path) -> tuple[str, list[_Day]]:
    """The shape found, and its days with their groups."""
    if isinstance(raw, Mapping) and isinstance(raw.get("dialogues"), Mapping):
        return "eval", [_Day(_date(date, path, str(date)),
                             require(raw["dialogues"], date, file=path, record=str(date),
                                     kind=Mapping), str(date))
                        for date in raw["dialogues"]]
    if isinstance(raw, list) and raw and all(isinstance(r, Mapping) and "dialogues" in r
                                             for r in raw):
        return "dynamic", [_Day(_date(require(r, "date", file=path, record=f"row {i}"), path,
                                      f"row {i}"),
                                require(r, "dialogues", file=path, record=f"row {i}",
                                        kind=Mapping), f"row {i}")
                           for i, r in enumerate(raw)]
    raise DataError(f"neither EverMemBench shape: expected {SHAPES['eval']} (eval code) or "
                    f"{SHAPES['dynamic']} (Dynamic release)", file=str(path))


def _rows(days: list[_Day], path: Path, stats: _Stats) -> Iterator[_Row]:
    for day in days:
        for group, msgs in day.groups.items():
            if msgs is None:
                stats.null_groups += 1
                continue
            if not isinstance(msgs, list):
                raise DataError("a group must be a list of messages or null", file=str(path),
                                record=f"{day.record}/{group}")
            for pos, msg in enumerate(msgs):
                record = f"{day.record}/{group}[{pos}]"
                if not isinstance(msg, Mapping):
                    raise DataError(f"expected a message object, got {type(msg).__name__}",
                                    file=str(path), record=record)
                yield _Row(_when(msg, day, path, record, stats), day, str(group),
                           _message_index(msg.get("message_index"), path, record), pos, msg,
                           record)


def _message_index(value: Any, path: Path, record: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        raise DataError(f"message_index {value!r} is not a number", file=str(path),
                        record=record, field="message_index") from None


def _when(msg: Mapping[str, Any], day: _Day, path: Path, record: str,
          stats: _Stats) -> datetime:
    """`time` is a full timestamp (space or T form, fractional seconds); a bare clock time is
    taken on the message's date, and a missing one as the date's midnight (as upstream)."""
    clock = msg.get("time")
    if clock is None or str(clock).strip() == "":
        stats.untimed += 1
        return parse_time(day.date, file=path, record=record, field="date")
    text = str(clock).strip()
    return parse_time(f"{day.date} {text}" if _CLOCK.match(text) else text, file=path,
                      record=record, field="time")


def _date(value: Any, path: Path, record: str) -> str:
    return parse_time(value, file=path, record=record, field="date").date().isoformat()


def _profiles(folder: _Folder, conv: str, withheld: Counter[str]
              ) -> dict[str, Mapping[str, Any]]:
    """Profiles of the conversation's people by normalised name (unscoped ones, and those
    under its topic). Only the directory fields (name, title or role, department) reach the
    messages: the persona fields (style, skills, ...) are what the P_ tasks ask about, so
    they are counted in `withheld` and nowhere else."""
    if folder.profiles is None:
        return {}
    found: dict[str, Mapping[str, Any]] = {}
    raw = read_json_or_lines(folder.profiles)
    for topic, profile, _ in _profile_entries(raw, folder.profiles, None, ""):
        if topic is None or topic == conv:
            found[_name_key(str(_get(profile, "name")))] = profile
            withheld.update(k for k in profile
                            if str(k).lower() not in (*_ID_KEYS, *_ROLE_KEYS, *_DEPT_KEYS))
    return found


def _profile_entries(raw: Any, path: Path, topic: str | None, record: str
                     ) -> Iterator[tuple[str | None, Mapping[str, Any], str]]:
    """(topic or None, profile, record) for a profile with a Name (any key case), a list of
    them, a {"members": [...]} wrapper (with an optional topic_id), or an object keyed by
    topic (lists or wrappers) or by name (profiles)."""
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            yield from _profile_entries(item, path, topic, f"{record}[{i}]")
    elif isinstance(raw, Mapping) and "members" in raw:
        scope = raw.get("topic_id")
        yield from _profile_entries(raw["members"], path, topic if scope is None else str(scope),
                                    f"{record}.members")
    elif isinstance(raw, Mapping) and _get(raw, "name") is not None:
        scope = _get(raw, "topic_id")
        yield (topic if scope is None else str(scope)), raw, record
    elif isinstance(raw, Mapping) and raw and all(isinstance(v, list | Mapping)
                                                  for v in raw.values()):
        for key, value in raw.items():
            named = isinstance(value, Mapping) and "members" not in value
            yield from _profile_entries({"Name": key, **value} if named else value, path,
                                        topic if named else str(key), f"{record}.{key}")
    else:
        raise DataError("expected profiles with a Name, a list of them, or "
                        '{"members": [...]}', file=str(path), record=record.lstrip("."))


def _load_qa(folder: _Folder, messages: _Messages, out: LoadedBenchmark,
             stats: _Stats) -> None:
    """The folder's questions in any of upstream's formats (as its qa_loader.py reads them):
    the evaluation code's `{"qars": [...]}`, the Dynamic release's rows, or the legacy
    `{"questions": [...]}` / bare list of `question_id` items."""
    raw = read_json_or_lines(folder.qa)
    found, items = _question_items(raw)
    if not items:
        raise DataError('expected {"qars": [question, ...]} (eval code), {"questions": [...]} '
                        "(legacy) or question rows (Dynamic release), with at least one "
                        "question", file=str(folder.qa))
    stats.question_formats[folder.path.name] = found
    parse = _legacy_question if found == "legacy" else _question
    referenced = resolved = 0
    for pos, item in enumerate(items):
        question, gold = parse(folder, item, pos, messages, out, stats)
        referenced += bool(isinstance(item, Mapping) and item.get("R"))
        resolved += bool(gold.evidence_ids)
        stats.without_evidence += not gold.evidence_ids
        out.questions.append((question, gold))
    if referenced and not resolved:
        raise DataError("no question's R references resolve to a message: expected R = "
                        "[{date, group, message_index}] on the questions and message_index on "
                        "the messages", file=str(folder.qa))


def _question_items(raw: Any) -> tuple[str, list[Any]]:
    """The question format found and its items."""
    if isinstance(raw, Mapping) and "qars" in raw:
        return "qars", _items(raw["qars"])
    if isinstance(raw, Mapping) and "questions" in raw:
        return "legacy", _items(raw["questions"])
    items = _items(raw)
    legacy = bool(items) and all(isinstance(i, Mapping) and "question" in i and "Q" not in i
                                 for i in items)
    return ("legacy" if legacy else "rows"), items


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _question(folder: _Folder, item: Any, pos: int, messages: _Messages,
              out: LoadedBenchmark, stats: _Stats) -> tuple[Question, Gold]:
    """A `qars` item (or a Dynamic row): {id, Q, A, options: {label: text} | null, and
    R and task_id where the source has them}."""
    path = folder.qa
    source_id = str(_object(item, path, f"qars[{pos}]").get("id") or f"q_{pos:04d}")
    qid = f"{folder.path.name}:{source_id}"
    category = "_".join(source_id.split("_")[:2])  # as upstream's tools/analyze_results.py
    if category not in CATEGORIES:
        out.warnings.append(f"{qid}: unknown category {category!r}; known: "
                            f"{', '.join(CATEGORIES)}")
    evidence: list[str] = []
    if item.get("R"):
        evidence, problems = _evidence(item["R"], messages.by_key)
        stats.unresolved += len(problems)
        out.warnings += [f"{qid}: {p}" for p in problems]
    options = _options(item.get("options"), path, qid)
    answer = str(require(item, "A", file=path, record=qid))
    if options and answer.strip().upper() in {o.label for o in options}:
        answer = answer.strip().upper()
    elif options:
        out.warnings.append(f"{qid}: answer {answer!r} is not one of the option labels")
    extra = {k: v for k, v in item.items() if k not in _QUESTION_FIELDS}
    meta = {"references": item.get("R"), **extra}
    return _pair(folder, qid, category, str(require(item, "Q", file=path, record=qid)),
                 Gold(qid=qid, answer=answer, evidence_ids=tuple(evidence),
                      answer_kind="choice" if options else "text", options=options),
                 meta, messages, stats)


def _legacy_question(folder: _Folder, item: Any, pos: int, messages: _Messages,
                     out: LoadedBenchmark, stats: _Stats) -> tuple[Question, Gold]:
    """A legacy item: {question_id, question, answer, options: ["A. text", ...],
    correct_option}. No evidence; its category is its id's task prefix when it has one, else
    its question type (upstream's evaluator reports the legacy format by type)."""
    path = folder.qa
    source_id = str(_object(item, path, f"questions[{pos}]").get("question_id")
                    or f"q_{pos:04d}")
    qid = f"{folder.path.name}:{source_id}"
    answer = str(require(item, "answer", file=path, record=qid))
    options = _options(item.get("options"), path, qid)
    prefix = "_".join(source_id.split("_")[:2])
    category = prefix if prefix in CATEGORIES else _TYPE_CATEGORIES[0 if options else 1]
    gold = Gold(qid=qid, answer=answer, evidence_ids=(), answer_kind="text")
    if options:
        label = _correct_label(item.get("correct_option"), answer, options)
        if label is None:
            out.warnings.append(f"{qid}: no correct option (correct_option, or an answer "
                                f"naming one of the options)")
        gold = Gold(qid=qid, answer=label or answer, evidence_ids=(), answer_kind="choice",
                    options=options)
    meta = {"answer_text": answer, **{k: v for k, v in item.items()
                                      if k not in _LEGACY_FIELDS}}
    return _pair(folder, qid, category,
                 str(require(item, "question", file=path, record=qid)), gold, meta, messages,
                 stats)


def _object(item: Any, path: Path, record: str) -> Mapping[str, Any]:
    """A question item, which must be an object; one without an id gets upstream's
    `q_<position>`."""
    if not isinstance(item, Mapping):
        raise DataError(f"expected a question object, got {type(item).__name__}",
                        file=str(path), record=record)
    return item


def _pair(folder: _Folder, qid: str, category: str, text: str, gold: Gold,
          meta: dict[str, Any], messages: _Messages, stats: _Stats) -> tuple[Question, Gold]:
    """The question and its gold, the coarse task evidence in the gold's metadata."""
    stats.capabilities[CAPABILITIES.get(category.split("_")[0], "unknown")] += 1
    tasks = _task_ids(meta.get("task_id"))
    linked = list(dict.fromkeys(i for t in tasks for i in messages.by_task.get(t, ())))
    if linked:
        stats.task_linked += 1
        meta["task_evidence_ids"] = linked
    return (Question(conv_id=folder.path.name, qid=qid, category=category, question=text),
            dataclasses.replace(gold, gold_meta=json.dumps(meta, sort_keys=True)))


def _task_ids(value: Any) -> list[str]:
    """Task ids as a message's `task_ids` (a list or a string) or a question's `task_id`."""
    items = value if isinstance(value, list) else [value]
    return [str(v).strip() for v in items if v is not None and str(v).strip()]


def _correct_label(given: Any, answer: str, options: tuple[Option, ...]) -> str | None:
    """The correct option's label: `correct_option`, else inferred from the answer as
    upstream's qa_loader does (a letter, a letter before `.`/`)`/`:`, or an option's text)."""
    labels = {o.label for o in options}
    for candidate in (str(given or "").strip().upper(), answer.strip().upper()):
        if candidate[:1] in labels and (len(candidate) == 1 or candidate[1] in ".):"):
            return candidate[0]
    return next((o.label for o in options if o.text.casefold() == answer.strip().casefold()),
                None)


def _evidence(refs: Any, index: dict[_Key, str]) -> tuple[list[str], list[str]]:
    """Message ids of R's references, and what could not be resolved."""
    ids: list[str] = []
    problems: list[str] = []
    for ref in refs if isinstance(refs, list) else [refs]:
        day = _iso_day(ref.get("date")) if isinstance(ref, Mapping) else None
        if day is None or ref.get("group") is None:
            problems.append(f"unreadable reference {ref!r}")
            continue
        indices, bad = parse_index_ranges(ref.get("message_index"))
        problems += [f"unparseable message_index {t!r} in {ref!r}" for t in bad]
        if not indices and not bad:
            problems.append(f"reference without message_index {ref!r}")
        for i in indices:
            key = (day, _group_key(ref["group"]), i)
            if key in index:
                ids.append(index[key])
            else:
                problems.append(f"no message {i} in {ref['group']} on {ref['date']}")
    return list(dict.fromkeys(ids)), problems


def _options(raw: Any, path: Path, qid: str) -> tuple[Option, ...] | None:
    """Options as upstream writes them: `{label: text}` (qars, Dynamic rows) or
    `["A. text", ...]` (legacy; a text without its label is labelled by its position)."""
    if not raw:
        return None
    if isinstance(raw, Mapping):
        pairs = [(str(k), str(v)) for k, v in sorted(raw.items())]
    elif isinstance(raw, list):
        pairs = [(m[1], m[2].strip()) if (m := _OPTION.match(str(text))) else
                 (chr(ord("A") + pos), str(text).strip()) for pos, text in enumerate(raw)]
    else:
        raise DataError('expected options as an object {label: text}, a list ["A. text", '
                        '...] or null', file=str(path), record=qid, field="options")
    return tuple(Option(label.strip().upper(), text) for label, text in pairs)


def _iso_day(value: Any) -> str | None:
    try:
        return _date(value, Path(), "")
    except DataError:
        return None


def _group_key(group: Any) -> str:
    """"Group 1", "group1" and "1" name one group."""
    key = _SPACE.sub("", str(group)).lower()
    return f"group{key}" if key.isdigit() else key


def _name_key(name: str) -> str:
    return " ".join(name.split()).casefold()


def _get(mapping: Mapping[str, Any], key: str) -> Any:
    """A field in any key case (profiles use `Name`, `Title`, ...)."""
    return next((v for k, v in mapping.items() if str(k).lower() == key and v not in (None, "")),
                None)


def _role(profile: Mapping[str, Any] | None) -> str | None:
    if profile is None:
        return None
    return next((str(v) for key in _ROLE_KEYS if (v := _get(profile, key)) is not None), None)
