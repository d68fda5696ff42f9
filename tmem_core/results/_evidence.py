"""Which messages a constructed context can be traced to, and how: the evidence basis of
recall and of the failure attribution, read from the construct record (see
`tmem_core.methods.Record`: its `basis` and `linked_ids`).

- `shown`: the context holds the messages' own text (`context_ids`): flat lists, T-MEM's
  forest, an external system's raw items.
- `read`: the context is what the method wrote after reading messages during construction:
  T2Mem's notes and Search-o1's condensed chain (`context_ids`: the lines its steps read), an
  external system's memories that name the messages they came from (`context_ids` plus the
  record's `linked_ids`).
- `untraceable`: a memory that reached the answer model names no source message, so which
  gold evidence the context carries is not measurable.

Records written before the construct record kept no basis: theirs is derived as it was then
(`_earlier_basis`): a memory context is `read` unless the external system's stored detail
lists what it recalled.
"""

from __future__ import annotations

import json

import pyarrow as pa

from tmem_core.evaluation._basis import READ, SHOWN, UNTRACEABLE, stored_basis

MEMORY_KIND = "memory"
BASIS_COLUMNS = ("evidence_basis", "linked_ids")


def evidence_basis(kind: str, payload: str | None, earlier: str | None = None
                   ) -> tuple[str, list[str]]:
    """A context's basis and the messages it is traced to beyond its `context_ids`, from its
    construct record (`payload`); `earlier`: the detail column of a record written before
    the construct record (read only when the payload has no basis)."""
    found = stored_basis(payload)
    if found is not None:
        return found[0], list(found[1])
    return _earlier_basis(kind, earlier)


def basis_columns(construct: pa.Table) -> dict[str, pa.Array]:
    """`evidence_basis` and `linked_ids` of each construct record."""
    kinds = construct.column("kind").to_pylist()
    payloads = construct.column("payload").to_pylist()
    earlier = construct.column("trace") if "trace" in construct.column_names else None
    found = [evidence_basis(kind, payloads[i], earlier[i].as_py()
                            if earlier is not None and kind == MEMORY_KIND else None)
             for i, kind in enumerate(kinds)]
    return {"evidence_basis": pa.array([b for b, _ in found], pa.string()),
            "linked_ids": pa.array([ids for _, ids in found], pa.list_(pa.string()))}


def _earlier_basis(kind: str, detail: str | None) -> tuple[str, list[str]]:
    """The basis as it was derived before the construct record: from the external system's
    list of what it recalled and how many items it showed."""
    if kind != MEMORY_KIND:
        return SHOWN, []
    if not detail or '"recalled"' not in detail:  # cheap: most memory details are not parsed
        return READ, []
    parsed = json.loads(detail)
    if "recalled" not in parsed:
        return READ, []
    shown = parsed["recalled"][:parsed["shown"]]
    derived = [item for item in shown if not item["raw"]]
    if any(not item["source_ids"] for item in derived):
        return UNTRACEABLE, []
    if not derived:
        return SHOWN, []
    return READ, list(dict.fromkeys(i for item in derived for i in item["source_ids"]))
