"""Typed configuration: a dataclass built from a TOML/YAML mapping, every problem located.

`build_config(cls, raw, where)` checks keys (unknown ones listed with the allowed keys),
scalar types, `Literal` choices and nested dataclasses (given as sub-tables), then calls the
constructor; a `ValueError` from `__post_init__` becomes a `ConfigError` at `where`.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

_T = TypeVar("_T")
_SCALARS: dict[object, type] = {float: float, int: int, str: str, bool: bool, dict: Mapping,
                                tuple: list}


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key."""


def build_config(cls: type[_T], raw: object, where: str) -> _T:
    """Instantiate the config dataclass `cls` from a mapping, checking keys and types."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a table, got {type(raw).__name__}")
    hints = get_type_hints(cls)
    specs = [f for f in fields(cast(Any, cls)) if f.init]
    check_keys(raw, {f.name for f in specs}, where)
    required = [f.name for f in specs if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in raw]
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r}")
    kwargs = {key: _value(hints[key], value, f"{where}.{key}") for key, value in raw.items()}
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def check_keys(raw: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: "
                          f"{', '.join(sorted(allowed)) or '(none)'}")


def _value(hint: Any, value: Any, where: str) -> Any:
    if is_dataclass(hint) and isinstance(hint, type) and not isinstance(value, hint):
        return build_config(hint, value, where)
    origin = get_origin(hint)
    if origin is Literal:
        if value not in get_args(hint):
            raise ConfigError(f"{where}: unknown value {value!r}; allowed: "
                              f"{', '.join(repr(v) for v in get_args(hint))}")
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in get_args(hint):
            return None
        arms = [arm for arm in get_args(hint) if arm is not type(None)]
        return _value(arms[0], value, where) if len(arms) == 1 else value
    if hint is float and type(value) is int:
        value = float(value)  # TOML and YAML write 1 for 1.0
    expected = _SCALARS.get(origin or hint, object)
    if not isinstance(value, expected) or (expected in (int, float) and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {_kind(expected)}, got "
                          f"{type(value).__name__} {value!r}")
    if isinstance(value, Mapping):
        return dict(value)
    return tuple(value) if isinstance(value, list) else value


def _kind(expected: type) -> str:
    names: dict[type, str] = {Mapping: "a table", list: "a list"}
    return names.get(expected, expected.__name__)
