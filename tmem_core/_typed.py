"""Typed configuration: a dataclass built from a TOML/YAML mapping, every problem located.

`build_config(cls, raw, where)` checks keys (unknown ones listed with the allowed keys),
scalar types, `Literal` choices, lists (as tuples) and tables item by item, and nested
dataclasses (given as sub-tables), then calls the constructor; a `ValueError` from
`__post_init__` becomes a `ConfigError` at `where` (a `ConfigError` naming one of the
dataclass's own keys, at `<where>.<key>`). `read_config` reads the file;
`to_json` and `from_json` carry typed records (a method's evidence payload) through JSON.
"""

from __future__ import annotations

import functools
import json
import tomllib
import types
from collections.abc import Hashable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

import yaml

from tmem_core._errors import ConfigError, allowed

_T = TypeVar("_T")
_SCALARS: dict[object, type] = {float: float, int: int, str: str, bool: bool}


def build_config(cls: type[_T], raw: object, where: str) -> _T:
    """Instantiate the config dataclass `cls` from a mapping, checking keys and types."""
    if not isinstance(raw, Mapping):
        raise ConfigError(where, f"expected a table, got {type(raw).__name__}")
    hints, names, required = _shape(cast(Hashable, cls))
    check_keys(raw, names, where)
    missing = [name for name in required if name not in raw]
    if missing:
        raise ConfigError(where, f"missing key {missing[0]!r}")
    kwargs = {key: _value(hints[key], value, _join(where, key)) for key, value in raw.items()}
    try:
        return cls(**kwargs)
    except ConfigError as exc:  # about one of its own keys (relative), or located already
        key = _join(where, exc.key) if exc.key in names else exc.key or where
        raise ConfigError(key, exc.reason) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(where, str(exc)) from None


@functools.cache
def _shape(cls: Hashable) -> tuple[dict[str, Any], set[str], tuple[str, ...]]:
    """A dataclass's field types, its keys and its required keys, resolved once (a typed
    record of a thousand candidates is thousands of dataclasses)."""
    specs = [f for f in fields(cast(Any, cls)) if f.init]
    required = tuple(f.name for f in specs
                     if f.default is MISSING and f.default_factory is MISSING)
    return get_type_hints(cls), {f.name for f in specs}, required


def read_config(path: Path) -> Mapping[str, Any]:
    """The top-level table of a TOML (or, for `.yaml`/`.yml`, YAML) file."""
    if not path.is_file():
        raise ConfigError("", f"no such file {path}")
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError("", f"cannot parse {path}: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError("", f"{path}: expected a table at the top level, got "
                              f"{type(data).__name__}")
    return data


def check_keys(raw: Mapping[str, Any], names: set[str], where: str) -> None:
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ConfigError(where, f"unknown key {unknown[0]!r}; {allowed(sorted(names))}")


def _value(hint: Any, value: Any, where: str) -> Any:
    if is_dataclass(hint) and isinstance(hint, type):
        return value if isinstance(value, hint) else build_config(hint, value, where)
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        if value not in args:
            raise ConfigError(where, f"unknown value {value!r}; {allowed(map(repr, args))}")
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        arms = [arm for arm in args if arm is not type(None)]
        return _value(arms[0], value, where) if len(arms) == 1 else value
    if hint is Any:
        return value
    if (origin or hint) in (tuple, list):
        _expect(value, (list, tuple), where)
        item = args[0] if args else Any
        return tuple(_value(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if (origin or hint) in (dict, Mapping):
        _expect(value, Mapping, where)
        item = args[1] if len(args) == 2 else Any
        return {k: _value(item, v, _join(where, str(k))) for k, v in value.items()}
    if hint is datetime and isinstance(value, str):
        return datetime.fromisoformat(value)
    if hint is float and type(value) is int:
        value = float(value)  # TOML and YAML write 1 for 1.0
    _expect(value, _SCALARS.get(hint, object), where)
    return value


def _expect(value: Any, expected: type | tuple[type, ...], where: str) -> None:
    numeric = expected in (int, float) and isinstance(value, bool)
    if not isinstance(value, expected) or numeric:
        raise ConfigError(where, f"expected {_kind(expected)}, got {type(value).__name__} "
                                 f"{value!r}")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(expected: type | tuple[type, ...]) -> str:
    if isinstance(expected, tuple):
        return "a list"
    names: dict[type, str] = {Mapping: "a table"}
    return names.get(expected, expected.__name__)


def to_json(value: object) -> str:
    """Dataclasses, tuples, mappings and datetimes as JSON (for Parquet records)."""
    return json.dumps(_plain(value), sort_keys=True, default=str)


def from_json(cls: type[_T], text: str) -> _T:
    """The dataclass `cls` of a record's JSON (`to_json`), typed as a config is."""
    return build_config(cls, json.loads(text), cls.__name__)


def _plain(value: object) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value
