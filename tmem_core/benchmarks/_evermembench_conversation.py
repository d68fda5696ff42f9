"""One EverMemBench conversation (a batch folder of the evaluation code, a topic folder of the
Dynamic release) as it is read: its files, what it adds to the benchmark, its message ids by
upstream identity, and the adapter's facts for the manifest."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmem_core import DataError
from tmem_core.benchmarks._registry import LoadedBenchmark
from tmem_core.benchmarks._source import parse_time

SPACE = re.compile(r"\s+")

Key = tuple[str, str, int]  # (date, group, message_index): a message's identity upstream


@dataclass(frozen=True)
class Folder:
    """One conversation's files: a batch (eval code) or a topic (Dynamic release)."""

    path: Path
    qa: Path
    profiles: Path | None

    @property
    def dialogue(self) -> Path:
        return self.path / "dialogue.json"


@dataclass
class Stats:
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
class Conversation:
    """A folder being read into `out` (the benchmark so far), its facts counted in `stats`
    (the benchmark's); `by_key` and `by_task` are its message ids by upstream identity and by
    the tasks they list, filled by its dialogue for its questions."""

    folder: Folder
    out: LoadedBenchmark
    stats: Stats
    by_key: dict[Key, str] = field(default_factory=dict)
    by_task: dict[str, list[str]] = field(default_factory=dict)

    @property
    def conv_id(self) -> str:
        return self.folder.path.name

    def warn(self, text: str) -> None:
        self.out.warnings.append(text)


def iso_date(value: Any, path: Path, record: str) -> str:
    return parse_time(value, file=path, record=record, field="date").date().isoformat()


def iso_day(value: Any) -> str | None:
    try:
        return iso_date(value, Path(), "")
    except DataError:
        return None


def group_key(group: Any) -> str:
    """"Group 1", "group1" and "1" name one group."""
    key = SPACE.sub("", str(group)).lower()
    return f"group{key}" if key.isdigit() else key


def task_ids(value: Any) -> list[str]:
    """Task ids as a message's `task_ids` (a list or a string) or a question's `task_id`."""
    items = value if isinstance(value, list) else [value]
    return [str(v).strip() for v in items if v is not None and str(v).strip()]
