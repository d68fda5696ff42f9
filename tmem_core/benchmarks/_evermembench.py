"""EverMemBench: multi-group dialogues by date, speaker profiles, and QA (open or choice).

Expected layout: `<source>/` holding `*dialogue*.json`, `*qa*.json` and optionally
`profiles.json`; or one such folder per conversation below `<source>/`.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from tmem_core.benchmarks._registry import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.benchmarks._source import parse_time, read_json, require
from tmem_core.evaluation import Protocol
from tmem_core.schema import DataError, Gold, Message, Option, Question

CATEGORY_PREFIXES = ("F_SH", "F_Multi", "F_Temp", "MA_Const", "MA_Proact", "MA_U", "P_Style",
                     "P_Skill", "P_Role")
_ROLE_KEYS = ("role", "position", "occupation", "title")


def _evermembench_judge(_q: Question, g: Gold) -> str | None:
    return None if g.answer_kind == "choice" else "judge/evermembench_open"


EVERMEMBENCH = Protocol(_evermembench_judge, ("judge/evermembench_open",),
                        temporal_categories=frozenset({"F_Temp"}))


@benchmark("evermembench", protocol=EVERMEMBENCH,
           description="EverMemBench multi-group dialogues with profiles",
           fixtures_only=True)
def load_evermembench(request: LoadRequest) -> LoadedBenchmark:
    if request.source is None or not request.source.is_dir():
        raise DataError("evermembench needs --source DIR", file=str(request.source or ""))
    folders = [request.source] if _find(request.source, "dialogue", required=False) else sorted(
        p for p in request.source.iterdir() if p.is_dir())
    if not folders:
        raise DataError("no *dialogue*.json found", file=str(request.source))
    out = LoadedBenchmark(messages=[], questions=[])
    for folder in folders:
        index = _load_dialogue(folder, out)
        _load_qa(folder, index, out)
    return out


def _find(folder: Path, word: str, *, required: bool = True) -> Path | None:
    found = sorted(p for p in folder.glob(f"*{word}*.json"))
    if len(found) > 1 or (required and not found):
        raise DataError(f"expected one *{word}*.json, found {len(found)}", file=str(folder))
    return found[0] if found else None


def _load_profiles(folder: Path) -> dict[str, dict[str, Any]]:
    path = folder / "profiles.json"
    if not path.exists():
        return {}
    raw = read_json(path)
    if isinstance(raw, dict):
        return {str(k): v for k, v in raw.items() if isinstance(v, dict)}
    if isinstance(raw, list):
        return {str(require(p, "name", file=path, record=f"[{i}]")): p for i, p in enumerate(raw)}
    raise DataError("expected an object or a list of profiles", file=str(path))


def _load_dialogue(folder: Path, out: LoadedBenchmark) -> dict[str, str]:
    """Append the folder's messages; return source message_index -> msg_id."""
    path = _find(folder, "dialogue")
    assert path is not None
    conv_id = folder.name
    profiles = _load_profiles(folder)
    days = require(read_json(path), "dialogues", file=path, record=conv_id, kind=dict)
    rows: list[tuple[datetime, int, str, str, int, Any, str]] = []
    for date, groups in days.items():
        if not isinstance(groups, dict):
            raise DataError("expected an object keyed by group", file=str(path), record=date)
        for group, msgs in groups.items():
            for pos, msg in enumerate(msgs if isinstance(msgs, list) else []):
                record = f"{date}/{group}[{pos}]"
                clock = require(msg, "time", file=path, record=record)
                when = parse_time(f"{date} {clock}", file=path, record=record, field="time")
                rows.append((when, len(rows), date, str(group), pos, msg, record))
    index: dict[str, str] = {}
    for when, _, date, group, pos, msg, record in sorted(rows, key=lambda r: (r[0], r[1])):
        source_index = msg.get("message_index")
        local = f"{date}/{group}/{pos}" if source_index is None else str(source_index)
        msg_id = f"{conv_id}:{local}"
        if source_index is not None:
            index[str(source_index)] = msg_id
        speaker = str(require(msg, "speaker", file=path, record=record))
        profile = profiles.get(speaker, {})
        role = next((str(profile[k]) for k in _ROLE_KEYS if profile.get(k)), None)
        out.messages.append(Message(
            conv_id=conv_id, msg_id=msg_id, seq=len(out.messages), timestamp=when,
            text=str(require(msg, "dialogue", file=path, record=record)), channel=group,
            author=speaker, role=role, session_id=f"{conv_id}:{date}",
            meta=json.dumps({"profile": profile}, sort_keys=True) if profile else None,
        ))
    return index


def _load_qa(folder: Path, index: dict[str, str], out: LoadedBenchmark) -> None:
    path = _find(folder, "qa")
    assert path is not None
    conv_id = folder.name
    items = require(read_json(path), "qars", file=path, record=conv_id, kind=list)
    for pos, item in enumerate(items):
        source_id = str(require(item, "id", file=path, record=f"qars[{pos}]"))
        qid = f"{conv_id}:{source_id}"
        category = next((p for p in sorted(CATEGORY_PREFIXES, key=len, reverse=True)
                         if source_id.startswith(p)), None)
        if category is None:
            category = source_id.rsplit("_", 1)[0]
            out.warnings.append(f"{qid}: unknown category prefix, using {category!r}")
        refs = item.get("R") or []
        evidence = [index[str(r)] for r in (refs if isinstance(refs, list) else [refs])
                    if str(r) in index]
        if len(evidence) < (len(refs) if isinstance(refs, list) else 1):
            out.warnings.append(f"{qid}: evidence references without a matching message_index")
        options = item.get("options")
        out.questions.append((
            Question(conv_id=conv_id, qid=qid,
                     question=str(require(item, "Q", file=path, record=qid)), category=category),
            Gold(qid=qid, answer=str(require(item, "A", file=path, record=qid)),
                 evidence_ids=tuple(dict.fromkeys(evidence)),
                 answer_kind="choice" if options else "text",
                 options=tuple(Option(str(k), str(v)) for k, v in sorted(options.items()))
                 if isinstance(options, dict) and options else None,
                 gold_meta=json.dumps({"references": refs}, sort_keys=True)),
        ))
