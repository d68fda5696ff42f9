"""Parsing and repair of upstream evidence references (LoCoMo dialogue ids, index ranges)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_TOKEN_SPLIT = re.compile(r"[;,\s]+")
_DIALOGUE_ID = re.compile(r"^D\s*:?\s*(\d+)\s*:\s*(\d+)$", re.IGNORECASE)
_DASH = re.compile(r"\s*[-\u2013\u2014]\s*")
_INDEX = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass
class EvidenceRepair:
    """Ids kept, and what was wrong with the rest (for the manifest)."""

    ids: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def repair_dialogue_refs(raw_refs: Iterable[object], known: set[str]) -> EvidenceRepair:
    """Map refs such as 'D1:3', 'D8:6; D9:17', 'D:11:26', 'D30:05' onto known dialogue ids.

    Unambiguous fixes (split lists, stray colon, zero padding, case) are applied and noted;
    references that cannot be parsed or name no existing turn are dropped and noted.
    """
    out = EvidenceRepair()
    for raw in raw_refs:
        text = str(raw).strip()
        for token in (t for t in _TOKEN_SPLIT.split(text) if t):
            match = _DIALOGUE_ID.match(token)
            if match is None:
                out.dropped.append(f"{text!r}: unparseable reference {token!r}")
                continue
            canonical = f"D{int(match.group(1))}:{int(match.group(2))}"
            if canonical not in known:
                out.dropped.append(f"{text!r}: no turn {canonical}")
            elif canonical in out.ids:
                continue
            else:
                out.ids.append(canonical)
                if token != text or canonical != token:
                    out.repaired.append(f"{text!r} -> {canonical}")
    return out


def parse_index_ranges(value: object) -> tuple[list[int], list[str]]:
    """The indices named by an int, a list, or a string of numbers and ranges ("1, 4-5"),
    in order without repeats; and the tokens that name none (for the manifest)."""
    items = value if isinstance(value, list) else [value]
    text = ",".join(str(v) for v in items if v is not None and not isinstance(v, bool))
    indices: list[int] = []
    bad: list[str] = []
    for token in (t for t in _TOKEN_SPLIT.split(_DASH.sub("-", text)) if t):
        match = _INDEX.match(token)
        if match is None or int(match.group(2) or match.group(1)) < int(match.group(1)):
            bad.append(token)
            continue
        indices += range(int(match.group(1)), int(match.group(2) or match.group(1)) + 1)
    return list(dict.fromkeys(indices)), bad
