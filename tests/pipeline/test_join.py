"""Joining an existing cluster asks a busy head again before the driver gives up."""

from __future__ import annotations

import pytest

from tmem_core.pipeline import _runner


class FlakyInit:
    """`ray.init` that cannot reach the control store `failures` times, then joins."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.addresses: list[str] = []

    def __call__(self, address: str, **_: object) -> None:
        self.addresses.append(address)
        if len(self.addresses) <= self.failures:
            raise ConnectionError(f"Failed to connect to Ray cluster at {address}")


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runner.ray, "shutdown", lambda: None)
    monkeypatch.setattr(_runner.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(_runner.time, "sleep", lambda _: None)
    monkeypatch.setattr(_runner, "_quiet_data", lambda: None)


def test_a_head_that_answers_late_is_joined(no_ray: None, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    init = FlakyInit(failures=_runner.JOIN_ATTEMPTS - 1)
    monkeypatch.setattr(_runner.ray, "init", init)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    _runner.init_ray()
    assert init.addresses == ["127.0.0.1:6379"] * _runner.JOIN_ATTEMPTS
    warnings = [line for line in capsys.readouterr().err.splitlines() if "trying again" in line]
    assert len(warnings) == _runner.JOIN_ATTEMPTS - 1


def test_a_head_that_never_answers_ends_in_its_error(no_ray: None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    init = FlakyInit(failures=_runner.JOIN_ATTEMPTS)
    monkeypatch.setattr(_runner.ray, "init", init)
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    with pytest.raises(ConnectionError, match="auto"):
        _runner.init_ray()
    assert init.addresses == ["auto"] * _runner.JOIN_ATTEMPTS
