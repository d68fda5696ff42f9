"""The errors a user of tmem-eval can meet: five types, one wording.

- `ConfigError`: a configuration that cannot be used (a sweep or backbones file, a flag, a
  registry name, a method's parameters, a prompt), located by its key;
- `DataError`: input data that cannot be used (a benchmark file, a request body), located by
  file, record and field;
- `EngineError`: an LLM engine or memory system that cannot answer (not started or placed,
  died, failed, counting tokens otherwise than the driver); `dead` when the engine cannot
  answer again and the process that holds it must start a new one;
- `ResultsError`: a results folder that cannot be written as asked (another driver holds
  it, stored records changed under a sweep told to refuse them);
- `TmemError`: the base of the four, and the rest (a method used out of order).

Every job ends on any of them with one `error: ...` line and exit status 2. Lists of choices
read "allowed: a, b, c" (`allowed`); range checks go through `check_range`.
"""

from __future__ import annotations

from collections.abc import Iterable


class TmemError(Exception):
    """An error of tmem-eval; what is not a config, data, engine or results error."""


class ConfigError(TmemError, ValueError):
    """A configuration that cannot be used, located by its key (e.g. `methods.tmem.select_batch`,
    `grid.methods`; empty when the problem is the whole file)."""

    def __init__(self, key: str, message: str) -> None:
        self.key, self.reason = key, message
        super().__init__(f"config key {key!r}: {message}" if key else message)


class DataError(TmemError, ValueError):
    """Bad input data, located precisely: which file, which record, which field."""

    def __init__(self, message: str, *, file: str = "", record: str = "", field: str = "") -> None:
        self.file, self.record, self.field, self.reason = file, record, field, message
        where = ", ".join(part for part in (f"file {file}" if file else "",
                                            f"record {record}" if record else "",
                                            f"field {field}" if field else "") if part)
        super().__init__(f"{where}: {message}" if where else message)


class EngineError(TmemError, RuntimeError):
    """An engine (or memory system) that cannot answer; `dead`: it died and cannot answer
    again (vLLM's `EngineDeadError`), so its holder must start a new one."""

    def __init__(self, message: str, *, dead: bool = False) -> None:
        self.dead = dead
        super().__init__(message)


class ResultsError(TmemError):
    """A results folder that cannot be written as asked."""


def allowed(values: Iterable[object]) -> str:
    """The one wording of a list of choices: "allowed: a, b, c"."""
    names = [str(value) for value in values]
    return f"allowed: {', '.join(names) or '(none)'}"


def check_range(name: str, value: object, low: float = 1, *, above: bool = False,
                key: str = "") -> None:
    """`value` of `name` (a parameter or flag) is a number `low` or more (more than `low` with
    `above`), else a `ConfigError` at `key` (empty inside a config dataclass's checks: the
    loader locates it)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and (value > low if above else value >= low):  # type: ignore[operator]
        return
    bound = ("positive" if low == 0 else f"more than {low:g}") if above else f"{low:g} or more"
    raise ConfigError(key, f"{name} must be {bound}, got {value!r}")
