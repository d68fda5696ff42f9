"""Reading native benchmark files with errors that name the file, record and field."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tmem_core import DataError


def read_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                        file=str(path)) from None


def json_list(source: Path | None, what: str) -> tuple[Path, list[Any]]:
    """A source file that holds a JSON list of `what` (samples, instances), and the list."""
    if source is None:
        raise DataError("needs --source PATH")
    items = read_json(source)
    if not isinstance(items, list):
        raise DataError(f"expected a JSON list of {what}", file=str(source))
    return source, items


def read_jsonl(path: Path) -> list[Any]:
    return _json_lines(_read_text(path), path)


def read_json_or_lines(path: Path) -> Any:
    """A JSON document, or a JSON Lines file (one value per line) as a list of its values."""
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        first = next((line for line in text.splitlines() if line.strip()), "")
        if exc.lineno == 1 or not _is_json(first):
            raise DataError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                            file=str(path)) from None
    return _json_lines(text, path)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror}", file=str(path)) from None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _json_lines(text: str, path: Path) -> list[Any]:
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed JSON: {exc.msg}", file=str(path),
                            record=f"line {lineno}") from None
    return rows


def require(obj: Any, key: str, *, file: Path, record: str, kind: type | tuple[type, ...] = object
            ) -> Any:
    """obj[key], or a DataError naming the file, the record and the missing/mistyped field."""
    if not isinstance(obj, Mapping):
        raise DataError(f"expected an object, got {type(obj).__name__}", file=str(file),
                        record=record)
    if key not in obj or obj[key] is None:
        raise DataError("missing field", file=str(file), record=record, field=key)
    value = obj[key]
    if not isinstance(value, kind):
        raise DataError(f"unexpected type {type(value).__name__}", file=str(file), record=record,
                        field=key)
    return value


def sha256_of(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


_FORMATS = (
    "%I:%M %p on %d %B, %Y",  # LoCoMo: "1:56 pm on 8 May, 2023"
    "%I:%M %p on %d %b, %Y",
    "%I:%M %p on %B %d, %Y",
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: "2023/05/20 (Sat) 02:21"
    "%Y/%m/%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
)


def parse_time(value: Any, *, file: Path, record: str, field: str) -> datetime:
    """Parse the date formats the benchmarks use; naive times are taken as UTC."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=UTC)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"unparseable date {value!r}", file=str(file), record=record, field=field)
    text = re.sub(r"\s+", " ", value.strip())
    parsed = _parse_iso(text) or _parse_formats(text)
    if parsed is None:
        raise DataError(f"unparseable date {value!r}", file=str(file), record=record, field=field)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _parse_iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _parse_formats(text: str) -> datetime | None:
    for fmt in _FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None
