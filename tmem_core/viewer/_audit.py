"""The audit page of an annotation folder (`jobs.annotate`): its low-confidence units, each
shown in its evidence group (units that establish the same claim, `annotation/_groups.py`),
accepted or rejected by a person one by one or a whole group at once; every decision is
written at once into the folder's audit file, which `jobs.annotate --apply` turns into the
prepared variant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tmem_core import DataError
from tmem_core.annotation import (
    AUDIT_FILE,
    LOW_CONFIDENCE_FILE,
    Group,
    candidate_groups,
    read_audit,
    read_units,
    record_decision,
)
from tmem_core.viewer._page import asset

DECISIONS = ("accept", "reject")


def audit_routes(folder: Path) -> list[Route]:
    """`/audit` (the page), `/api/audit` (the units and decisions) and
    `POST /api/audit/decision` ({"key", "decision"}: a unit's key or a group's) on the
    annotation folder `folder`."""
    read_units(folder, LOW_CONFIDENCE_FILE)  # a folder that is no annotation fails here

    def page(_: Request) -> Response:
        return HTMLResponse(asset("audit.html"))

    def units(_: Request) -> Response:
        return JSONResponse(audit_view(folder))

    async def decide(request: Request) -> Response:
        body = await request.json()
        key, decision = body.get("key"), body.get("decision")
        if not isinstance(key, str) or decision not in DECISIONS:
            return Response(f"error: expected {{key, decision}} with decision one of "
                            f"{', '.join(DECISIONS)}", status_code=400)
        try:
            decisions = record_decision(folder, key, decision)
        except DataError as exc:
            return Response(f"error: {exc}", status_code=404)
        return JSONResponse({"key": key, **decisions[key]})

    return [Route("/audit", page), Route("/api/audit", units),
            Route("/api/audit/decision", decide, methods=["POST"])]


def audit_view(folder: Path) -> dict[str, Any]:
    """The low-confidence units (with their group's key) and every group holding one."""
    decisions = read_audit(folder)
    low = read_units(folder, LOW_CONFIDENCE_FILE)
    audited = {u.key for u in low}
    groups = [g for g in candidate_groups(read_units(folder))
              if any(u.key in audited for u in g.units)]
    group_of = {u.key: g.key for g in groups for u in g.units}
    return {"folder": str(folder), "audit_file": AUDIT_FILE,
            "units": [{**u.to_json(), "group": group_of[u.key],
                       "decision": decisions.get(u.key, {}).get("decision")} for u in low],
            "groups": [_group(g, decisions) for g in groups]}


def _group(group: Group, decisions: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {"key": group.key, "kind": group.kind, "claim": list(group.claim),
            "decision": decisions.get(group.key, {}).get("decision"),
            "members": [{"key": u.key, "msg_id": u.msg_id, "status": u.status}
                        for u in group.units]}
