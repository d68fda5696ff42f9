"""Evidence units: one retrieved message of one question, the filter's label, a confidence,
and what becomes of it (accepted, audited by a person, rejected); their files on disk.

Confidence that a unit is evidence = the mean of three votes: the filter's (1 for ANSWER or
BRIDGE, 0 for NONE, 0.5 when its batch failed), reverse retrieval's (1 within the first
`TOP_VOTE` candidates) and the text's (1 when the message holds at least half the content
words of the answer, or of the question for a BRIDGE). A unit the filter keeps with confidence
of at least 2/3 is accepted; one the filter drops with confidence of at least 2/3 (retrieval
and text both say evidence), one it keeps with less, and one whose batch failed are low
confidence: a person audits them. Every other unit is rejected.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tmem_core import DataError

Label = Literal["ANSWER", "BRIDGE", "NONE", "FAILED"]
Status = Literal["accepted", "audit", "rejected"]
KIND = {"ANSWER": "answer", "BRIDGE": "anchor"}  # the paper's answer-bearing / anchor units
TOP_VOTE = 10
HIGH = 2 / 3
UNITS_FILE, LOW_CONFIDENCE_FILE, AUDIT_FILE = "units.jsonl", "low_confidence.jsonl", "audit.json"
SETTINGS_FILE, PREPARED_DIR = "annotation.json", "prepared"


@dataclass(frozen=True)
class Unit:
    """One candidate message of one question, as the annotation judged it."""

    qid: str
    conv_id: str
    question: str
    answer: str
    msg_id: str
    text: str
    rank: int  # in the reverse retrieval, 0 = best
    label: Label
    lexical: float  # share of the reference's content words in the message
    confidence: float
    status: Status

    @property
    def key(self) -> str:
        return f"{self.qid}|{self.msg_id}"

    @property
    def kind(self) -> str | None:
        """"answer" or "anchor" (a bridge) for a unit the filter keeps; None otherwise."""
        return KIND.get(self.label)

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "key": self.key, "kind": self.kind}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Unit:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


def judged(qid: str, conv_id: str, question: str, answer: str, msg_id: str, text: str,
           rank: int, label: Label, lexical: float) -> Unit:
    """A unit with its confidence and status (see the module doc)."""
    votes = ({"ANSWER": 1.0, "BRIDGE": 1.0, "NONE": 0.0, "FAILED": 0.5}[label],
             float(rank < TOP_VOTE), float(lexical >= 0.5))
    confidence = sum(votes) / len(votes)
    kept = label in KIND
    status: Status
    if label == "FAILED" or (kept and confidence < HIGH) or (not kept and confidence >= HIGH):
        status = "audit"
    else:
        status = "accepted" if kept else "rejected"
    return Unit(qid, conv_id, question, answer, msg_id, text, rank, label, lexical,
                round(confidence, 4), status)


def write_units(directory: Path, units: Iterable[Unit]) -> None:
    """Every unit, and the low-confidence ones again for a person to audit."""
    rows = [u.to_json() for u in units]
    _write_lines(directory / UNITS_FILE, rows)
    _write_lines(directory / LOW_CONFIDENCE_FILE, [r for r in rows if r["status"] == "audit"])


def read_units(directory: Path, name: str = UNITS_FILE) -> list[Unit]:
    path = directory / name
    if not path.is_file():
        raise DataError("not an annotation folder (no units); run jobs.annotate first",
                        file=str(path))
    return [Unit.from_json(json.loads(line)) for line in path.read_text().splitlines() if line]


def read_audit(directory: Path) -> dict[str, dict[str, str]]:
    """Decisions by unit or group key: {"decision": "accept" | "reject", "at": ISO time}."""
    path = directory / AUDIT_FILE
    if not path.is_file():
        return {}
    decisions: dict[str, dict[str, str]] = json.loads(path.read_text())
    return decisions


def final_status(unit: Unit, decisions: Mapping[str, Mapping[str, str]]) -> Status:
    """A low-confidence unit takes the person's decision; undecided it stays out."""
    if unit.status != "audit":
        return unit.status
    decision = decisions.get(unit.key, {}).get("decision")
    return "accepted" if decision == "accept" else "rejected" if decision == "reject" \
        else "audit"


def write_audit(directory: Path, decisions: Mapping[str, Mapping[str, str]]) -> None:
    tmp = directory / f".{AUDIT_FILE}.tmp"
    tmp.write_text(json.dumps(decisions, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, directory / AUDIT_FILE)


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    os.replace(tmp, path)
