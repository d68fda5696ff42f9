"""A run's attempts: each driver's pass over it, as its contract records them, and whether
they mix code or packages."""

from __future__ import annotations

import dataclasses
import platform
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Attempt:
    """One driver's pass over a run: when, with which code and packages, on which host."""

    started_at: float = field(default_factory=time.time)
    git_commit: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    host: str = field(default_factory=platform.node)
    ended_at: float | None = None


ATTEMPT_FIELDS = tuple(f.name for f in dataclasses.fields(Attempt))


def contract_attempts(contract: dict[str, Any]) -> list[Attempt]:
    """A contract's attempts, oldest first (one written before attempts were kept: its own
    facts as its one attempt)."""
    listed = contract.get("attempts")
    written = ([a for a in listed if isinstance(a, dict)] if isinstance(listed, list) and listed
               else [contract])
    return [Attempt(**{k: a[k] for k in ATTEMPT_FIELDS if k in a}) for a in written]


def mixed(attempts: list[Attempt]) -> list[str]:
    """What the attempts differ in: "code a1b2c3d4, e5f6a7b8", "packages ray 2.9.0, 2.10.0"."""
    out = []
    commits = list(dict.fromkeys(str(a.git_commit)[:8] for a in attempts))
    if len(commits) > 1:
        out.append(f"code {', '.join(commits)}")
    names = sorted({n for a in attempts for n in a.packages})
    for name in names:
        versions = list(dict.fromkeys(a.packages.get(name, "absent") for a in attempts))
        if len(versions) > 1:
            out.append(f"packages {name} {', '.join(versions)}")
    return out
