"""Repair of upstream evidence references (LoCoMo-style dialogue ids)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_TOKEN_SPLIT = re.compile(r"[;,\s]+")
_DIALOGUE_ID = re.compile(r"^D\s*:?\s*(\d+)\s*:\s*(\d+)$", re.IGNORECASE)


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
