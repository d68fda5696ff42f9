"""The audit page of an annotation folder (`jobs.annotate`): its low-confidence units, each
accepted or rejected by a person; every decision is written at once into the folder's audit
file (`annotation/_units.py`), which `jobs.annotate --apply` turns into the prepared variant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tmem_core.annotation import (
    AUDIT_FILE,
    LOW_CONFIDENCE_FILE,
    read_audit,
    read_units,
    record_decision,
)
from tmem_core.schema import DataError
from tmem_core.viewer._page import asset

DECISIONS = ("accept", "reject")


def audit_routes(folder: Path) -> list[Route]:
    """`/audit` (the page), `/api/audit` (the units and decisions) and
    `POST /api/audit/decision` ({"key", "decision"}) on the annotation folder `folder`."""
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
    decisions = read_audit(folder)
    return {"folder": str(folder), "audit_file": AUDIT_FILE,
            "units": [{**u.to_json(), "decision": decisions.get(u.key, {}).get("decision")}
                      for u in read_units(folder, LOW_CONFIDENCE_FILE)]}
