"""What a memory system configured by endpoint (`mcp`, `http`) is sent and how its reply is
read: the messages as JSON objects, and `ReplyShape`, the paths in a query's reply to the
recalled items and, in each item, to its text, source message ids, score, time and kind.

A path is dotted keys and list indices (`data.hits`, `results.0.ids`); empty means the
value itself (a reply that is the list of items) or, for an item field, absent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tmem_core import ConfigError, DataError
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods.external._system import Recalled
from tmem_core.schema import Message


@dataclass(frozen=True)
class ReplyShape:
    """Where the recalled items are in a query's reply (`items`), and in each item its text,
    its source message ids (a list or one id), its score, its conversation time (ISO) and
    whether it is a raw message (a JSON boolean; `raw_items` when the item has none)."""

    items: str = "results"
    text: str = "text"
    source_ids: str = "source_ids"
    score: str = "score"
    timestamp: str = "timestamp"
    raw: str = "raw"
    raw_items: bool = False

    def __post_init__(self) -> None:
        if not self.text:
            raise ConfigError("text", "the path to an item's text cannot be empty")

    def recalled(self, reply: Any) -> list[Recalled]:
        """The items of `reply`, in its order."""
        items = _at(reply, self.items)
        if not isinstance(items, list):
            raise DataError(f"{self.items or 'the reply'} is {type(items).__name__}, "
                             f"not a list of items")
        return [self._item(item, i) for i, item in enumerate(items)]

    def _item(self, item: Any, position: int) -> Recalled:
        text = _at(item, self.text)
        if not isinstance(text, str):
            raise DataError(f"item {position}: {self.text} is not a string")
        ids = _optional(item, self.source_ids) or ()
        ids = (ids,) if isinstance(ids, str | int) else ids
        when = _optional(item, self.timestamp)
        raw = _optional(item, self.raw)
        return Recalled(text, datetime.fromisoformat(when) if isinstance(when, str) else None,
                        tuple(str(i) for i in ids), float(_optional(item, self.score) or 0.0),
                        raw=self.raw_items if raw is None else bool(raw))


def message_json(message: Message) -> dict[str, Any]:
    """One message as a system configured by endpoint receives it."""
    return {"id": message.msg_id, "timestamp": message.timestamp.isoformat(),
            "author": message.author, "role": message.role, "channel": message.channel,
            "topic": message.topic, "session_id": message.session_id, "text": message.text}


def batches(messages: Sequence[Message], size: int) -> list[list[dict[str, Any]]]:
    """The messages as JSON objects, `size` at a time, in conversation order."""
    payload = [message_json(m) for m in messages]
    return [payload[i:i + size] for i in range(0, len(payload), size)]


def endpoint_values(endpoint: AccountingEndpoint) -> dict[str, str]:
    """What a system is told of the accounting endpoint (its LLM and embedder)."""
    return {"llm_base_url": endpoint.base_url, "llm_api_key": endpoint.api_key,
            "embedder": endpoint.embedder_id}


def parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{what} is not JSON ({exc}): {text[:200]!r}") from None


def _optional(value: Any, path: str) -> Any:
    return _at(value, path, missing=True) if path else None


def _at(value: Any, path: str, missing: bool = False) -> Any:
    for key in path.split(".") if path else ():
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif missing:
            return None
        else:
            raise DataError(f"the reply has no {path!r} (no {key!r} in "
                             f"{json.dumps(value)[:200]})")
    return value
