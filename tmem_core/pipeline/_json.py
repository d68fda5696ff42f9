"""Method traces (dataclasses, tuples, dicts) as JSON for Parquet records."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any


def to_json(value: object) -> str:
    """Method traces (dataclasses, tuples, dicts) as JSON for Parquet records."""
    return json.dumps(_plain(value), sort_keys=True, default=str)


def _plain(value: object) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value
