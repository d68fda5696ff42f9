"""A scripted OpenAI-compatible server that tells the pipeline's requests apart by their
system prompt and answers each kind in its own shape (subclasses say how)."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import ScriptedServer, Step

ENTRIES = {"entries": [{"kind": "fact", "text": "The review cadence changed.", "entities": [],
                        "time": ""}]}
KINDS = (("You write light metadata", "extract"),
         ("You answer a question about a long conversation by building", "step"),
         ("You grade the memory", "quality"), ("You grade answers", "judge"))


def request_kind(body: dict[str, Any]) -> str:
    """extract (T2Mem's memory), step (its loop), quality, judge, or other (answers)."""
    system = body["messages"][0]["content"]
    return next((kind for start, kind in KINDS if system.startswith(start)), "other")


class ShapedServer(ScriptedServer):
    """Extraction gets one fact, a judge WRONG; `reply` answers the other kinds."""

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        super()._next(body, authorization)
        kind = request_kind(body)
        if kind == "extract":
            return Step(content=json.dumps(ENTRIES))
        if kind == "judge":
            return Step(content='{"verdict": "WRONG"}')
        return Step(content=self.reply(kind, body))

    def reply(self, kind: str, body: dict[str, Any]) -> str:
        raise NotImplementedError
