"""The evidence basis of a constructed context: how it relates to the messages whose recall is
scored (`shown`: their own text; `read`: the method wrote it after reading them; `untraceable`:
a memory that names no source). A construct record (`tmem_core.methods.Record`) carries it;
the results' readers read it back from the stored record without the methods."""

from __future__ import annotations

import json
from typing import Literal, cast, get_args

from tmem_core import DataError

Basis = Literal["shown", "read", "untraceable"]
SHOWN: Basis = "shown"
READ: Basis = "read"
UNTRACEABLE: Basis = "untraceable"


def stored_basis(payload: str | None) -> tuple[Basis, tuple[str, ...]] | None:
    """The basis and linked ids of a stored construct record of any method; None for none, or
    for a record written before records kept a basis."""
    data = json.loads(payload) if payload else None
    if not isinstance(data, dict) or "basis" not in data:
        return None
    basis, linked = data["basis"], data.get("linked_ids", [])
    if basis not in get_args(Basis) or not isinstance(linked, list) or not all(
            isinstance(i, str) for i in linked):
        raise DataError(f"a construct record's basis {basis!r} or linked_ids {linked!r} is "
                        f"malformed", field="payload")
    return cast(Basis, basis), tuple(linked)
