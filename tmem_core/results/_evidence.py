"""Which messages a constructed context can be traced to, and how: the evidence basis of
recall and of the failure attribution, from what the construct record already holds.

- `shown`: the context holds the messages' own text (`context_ids`): flat lists, T-MEM's
  forest, an external system's raw items.
- `read`: the context is what the method wrote after reading messages during construction:
  T2Mem's notes and Search-o1's condensed chain (`context_ids`: the lines its steps read), an
  external system's memories that name the messages they came from (`context_ids` plus the
  trace's `linked_ids`).
- `untraceable`: a memory that reached the answer model names no source message, so which
  gold evidence the context carries is not measurable.
"""

from __future__ import annotations

import json

import pyarrow as pa

SHOWN, READ, UNTRACEABLE = "shown", "read", "untraceable"
MEMORY_KIND = "memory"
READ_KINDS = frozenset({MEMORY_KIND, "chain"})  # what the method read and wrote (a chain too)
_RECALLED = '"recalled"'  # only an external system's trace lists what it recalled
BASIS_COLUMNS = ("evidence_basis", "linked_ids")


def evidence_basis(kind: str, trace: str | None) -> tuple[str, list[str]]:
    """A context's basis and the messages it is traced to beyond its `context_ids`."""
    if kind not in READ_KINDS:
        return SHOWN, []
    if not trace or _RECALLED not in trace:  # cheap: most memory traces are not parsed
        return READ, []
    parsed = json.loads(trace)
    if "recalled" not in parsed:
        return READ, []
    shown = parsed["recalled"][:parsed["shown"]]
    derived = [item for item in shown if not item["raw"]]
    if any(not item["source_ids"] for item in derived):
        return UNTRACEABLE, []
    if not derived:
        return SHOWN, []
    return READ, list(dict.fromkeys(i for item in derived for i in item["source_ids"]))


def basis_columns(construct: pa.Table) -> dict[str, pa.Array]:
    """`evidence_basis` and `linked_ids` of each construct record (traces of memory kinds
    only are read)."""
    kinds = construct.column("kind").to_pylist()
    traces = construct.column("trace")
    found = [evidence_basis(kind, traces[i].as_py() if kind == MEMORY_KIND else None)
             for i, kind in enumerate(kinds)]
    return {"evidence_basis": pa.array([b for b, _ in found], pa.string()),
            "linked_ids": pa.array([ids for _, ids in found], pa.list_(pa.string()))}
