"""EverMemBench's dialogues in either upstream shape, with the directory fields of their
speakers' profiles: `eval` ({"dialogues": {date: {group: [message, ...]}}}) and `dynamic`
(rows {topic_id, date, dialogues: {group: [message, ...] | null}})."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tmem_core import DataError
from tmem_core.benchmarks._evermembench_conversation import (
    SPACE,
    Conversation,
    Key,
    group_key,
    iso_date,
    task_ids,
)
from tmem_core.benchmarks._source import parse_time, read_json_or_lines, require
from tmem_core.schema import Message

SHAPES = {"eval": '{"dialogues": {date: {group: [message, ...]}}}',
          "dynamic": "rows {topic_id, date, dialogues: {group: [message, ...] | null}}"}
_MESSAGE_FIELDS = {"speaker", "time", "dialogue", "text", "message_index"}
_ROLE_KEYS = ("title", "role", "position", "occupation")
_DEPT_KEYS = ("dept", "department")
_ID_KEYS = ("name", "topic_id")  # with the role and department keys: the directory fields
_CLOCK = re.compile(r"^\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?$")


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


def load_dialogue(conv: Conversation, shape: str | None) -> None:
    """Append the folder's messages in time order; note their ids by upstream identity and
    by the tasks they list (`task_ids`, itself withheld from the messages)."""
    path = conv.folder.dialogue
    found, days = _days(read_json_or_lines(path), path)
    if shape is not None and found != shape:
        raise DataError(f"expected the {shape} shape ({SHAPES[shape]}), found the {found} shape",
                        file=str(path))
    conv.stats.shapes[conv.conv_id] = found
    profiles = _profiles(conv)
    unmatched: set[str] = set()
    for row in sorted(_rows(conv, days), key=lambda r: r.when):
        local = f"p{row.pos}" if row.index is None else str(row.index)
        msg_id = f"{conv.conv_id}:{row.day.date}:{SPACE.sub('', row.group)}:{local}"
        if row.index is not None:
            _register(conv.by_key, (row.day.date, group_key(row.group), row.index), msg_id,
                      row, path)
        for task in task_ids(row.msg.get("task_ids")):
            conv.by_task.setdefault(task, []).append(msg_id)
        speaker = str(require(row.msg, "speaker", file=path, record=row.record))
        profile = profiles.get(_name_key(speaker))
        if profiles and profile is None:
            unmatched.add(speaker)
        conv.stats.withheld.update(k for k in row.msg if k not in _MESSAGE_FIELDS)
        directory = {k: v for k, v in (profile or {}).items() if str(k).lower() in _DEPT_KEYS}
        conv.out.messages.append(Message(
            conv_id=conv.conv_id, msg_id=msg_id, seq=len(conv.out.messages),
            timestamp=row.when, text=_text(row, path),
            session_id=f"{conv.conv_id}:{row.day.date}", channel=row.group, author=speaker,
            role=_role(profile),
            meta=json.dumps(directory, sort_keys=True) if directory else None,
        ))
    if unmatched:
        conv.warn(f"{conv.conv_id}: no profile for {', '.join(sorted(unmatched)[:10])}"
                  + (" ..." if len(unmatched) > 10 else ""))


def _register(index: dict[Key, str], key: Key, msg_id: str, row: _Row, path: Path) -> None:
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
        return "eval", [_Day(iso_date(date, path, str(date)),
                             require(raw["dialogues"], date, file=path, record=str(date),
                                     kind=Mapping), str(date))
                        for date in raw["dialogues"]]
    if isinstance(raw, list) and raw and all(isinstance(r, Mapping) and "dialogues" in r
                                             for r in raw):
        return "dynamic", [_Day(iso_date(require(r, "date", file=path, record=f"row {i}"),
                                         path, f"row {i}"),
                                require(r, "dialogues", file=path, record=f"row {i}",
                                        kind=Mapping), f"row {i}")
                           for i, r in enumerate(raw)]
    raise DataError(f"neither EverMemBench shape: expected {SHAPES['eval']} (eval code) or "
                    f"{SHAPES['dynamic']} (Dynamic release)", file=str(path))


def _rows(conv: Conversation, days: list[_Day]) -> Iterator[_Row]:
    path = conv.folder.dialogue
    for day in days:
        for group, msgs in day.groups.items():
            if msgs is None:
                conv.stats.null_groups += 1
                continue
            if not isinstance(msgs, list):
                raise DataError("a group must be a list of messages or null", file=str(path),
                                record=f"{day.record}/{group}")
            for pos, msg in enumerate(msgs):
                record = f"{day.record}/{group}[{pos}]"
                if not isinstance(msg, Mapping):
                    raise DataError(f"expected a message object, got {type(msg).__name__}",
                                    file=str(path), record=record)
                yield _Row(_when(conv, msg, day, record), day, str(group),
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


def _when(conv: Conversation, msg: Mapping[str, Any], day: _Day, record: str) -> datetime:
    """`time` is a full timestamp (space or T form, fractional seconds); a bare clock time is
    taken on the message's date, and a missing one as the date's midnight (as upstream)."""
    path = conv.folder.dialogue
    clock = msg.get("time")
    if clock is None or str(clock).strip() == "":
        conv.stats.untimed += 1
        return parse_time(day.date, file=path, record=record, field="date")
    text = str(clock).strip()
    return parse_time(f"{day.date} {text}" if _CLOCK.match(text) else text, file=path,
                      record=record, field="time")


def _profiles(conv: Conversation) -> dict[str, Mapping[str, Any]]:
    """Profiles of the conversation's people by normalised name (unscoped ones, and those
    under its topic). Only the directory fields (name, title or role, department) reach the
    messages: the persona fields (style, skills, ...) are what the P_ tasks ask about, so
    they are counted as withheld and nowhere else."""
    path = conv.folder.profiles
    if path is None:
        return {}
    found: dict[str, Mapping[str, Any]] = {}
    for topic, profile, _ in _profile_entries(read_json_or_lines(path), path, None, ""):
        if topic is None or topic == conv.conv_id:
            found[_name_key(str(_get(profile, "name")))] = profile
            conv.stats.withheld_profile.update(k for k in profile if str(k).lower() not in (
                *_ID_KEYS, *_ROLE_KEYS, *_DEPT_KEYS))
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
