"""The sweep folder's lease: one driver writes a sweep at a time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from tmem_core.results._layout import remove_leftovers
from tmem_core.results._lease import Lease


@contextlib.contextmanager
def sweep_lease(root: Path, log: Callable[[str], None]) -> Iterator[Lease]:
    """The lease of the sweep folder `root` (a `ResultsError`: another driver writes this sweep),
    with what an interrupted write left in it removed; a sweep that wrote nothing leaves no
    folder behind."""
    missing = [root / "data", *(f for f in (root, *root.parents) if not f.exists())]
    held = False
    try:
        with Lease(root, log) as lease:
            assert lease.holder is not None
            held = True
            for path in remove_leftovers(root, lease.holder.since):
                log(f"removed {path}: left over by an interrupted write")
            yield lease
    finally:  # rmdir: only empty ones
        for folder in missing if held else ():
            with contextlib.suppress(OSError):
                folder.rmdir()
