"""The one registry behind @method, @benchmark and @backend."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from tmem_core import ConfigError
from tmem_core._registry import Registry

THREADS = 8


def _bundled_module(tmp_path: Path, name: str, registry: str) -> None:
    """A bundled module whose import takes a while before it registers its spec."""
    (tmp_path / f"{name}.py").write_text(
        "import sys, time\n"
        "time.sleep(0.3)\n"
        f"sys.modules[{__name__!r}].REGISTRIES[{registry!r}].add('bundled', 'spec')\n")


REGISTRIES: dict[str, Registry[str]] = {}


def test_lookups_from_many_threads_wait_for_the_bundled_modules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage actor's threads all look a name up at once on a fresh worker."""
    monkeypatch.syspath_prepend(str(tmp_path))
    _bundled_module(tmp_path, "slow_bundled_registrant", "concurrent")
    REGISTRIES["concurrent"] = Registry("widget", ("slow_bundled_registrant",))
    found: list[str] = []
    failed: list[Exception] = []

    def look_up() -> None:
        try:
            found.append(REGISTRIES["concurrent"].get("bundled"))
        except Exception as error:
            failed.append(error)

    threads = [threading.Thread(target=look_up) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sys.modules.pop("slow_bundled_registrant", None)
    assert failed == [] and found == ["spec"] * THREADS


def test_an_unknown_name_lists_the_allowed_ones() -> None:
    registry: Registry[str] = Registry("widget")
    registry.add("b", "spec-b")
    registry.add("a", "spec-a")
    with pytest.raises(ConfigError, match="unknown widget 'c'; allowed: a, b"):
        registry.get("c", "sweep.widget")
    with pytest.raises(ValueError, match="already registered"):
        registry.add("a", "again")
