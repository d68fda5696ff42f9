"""One registry of named specs per kind (methods, benchmarks, backends).

`@method`, `@benchmark` and `@backend` each add a spec to theirs; the bundled modules that
register are imported at the first lookup, and a sweep's plugins when they are imported. A
name that is not registered is a `ConfigError` that lists the allowed ones.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

from tmem_core._errors import ConfigError

S = TypeVar("S")


class Registry(Generic[S]):
    """Name -> spec of one `kind`; `bundled` modules register theirs when first looked up."""

    def __init__(self, kind: str, bundled: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._bundled = bundled
        self._specs: dict[str, S] = {}
        self._loaded = not bundled
        self._loading = threading.RLock()

    def add(self, name: str, spec: S) -> None:
        if name in self._specs:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._specs[name] = spec

    def get(self, name: str, key: str = "") -> S:
        """The spec of `name`; `key` is where in a config the name was given."""
        specs = self._all()
        if name not in specs:
            raise ConfigError(key, f"unknown {self.kind} {name!r}; allowed: "
                                   f"{', '.join(sorted(specs))}")
        return specs[name]

    def names(self) -> list[str]:
        return sorted(self._all())

    def __iter__(self) -> Iterator[tuple[str, S]]:
        return iter(sorted(self._all().items()))

    def _all(self) -> dict[str, S]:
        """Every spec; the first lookup imports the bundled modules, and lookups from other
        threads meanwhile wait for them (a stage actor answers from several threads)."""
        if not self._loaded:
            with self._loading:
                if not self._loaded:
                    for module in self._bundled:
                        importlib.import_module(module)
                    self._loaded = True
        return self._specs
