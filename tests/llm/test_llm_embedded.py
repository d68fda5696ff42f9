"""Real generation with the embedded SmolLM2 server, and its faults: kill, timeout, junk."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from jobs.llm import main as llm_cli
from tmem_core.llm import (
    ChatRequest,
    EmbeddedBackend,
    LLMClient,
    OpenAICompatBackend,
    Sampling,
    StaticEndpoint,
    get_backbone,
    make_backend,
    open_client,
)

QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "What is 2 + 2?"]

ROOT = Path(__file__).resolve().parents[2]
_OWNER = """
import time
from tmem_core.llm import get_backbone
from tmem_core.llm._embedded import EmbeddedServer
server = EmbeddedServer(get_backbone("smollm2").engine)
server.start()
print(server.pid, flush=True)
time.sleep(600)
"""


def _asks(schema: dict[str, Any] | None, n: int = 3, max_tokens: int = 64) -> list[ChatRequest]:
    sampling = Sampling(max_tokens=max_tokens)
    return [
        ChatRequest.from_prompt(
            f"{QUESTIONS[i % 3]} Answer in JSON. ({i})", schema=schema, sampling=sampling
        )
        for i in range(n)
    ]


def test_embedded_returns_schema_valid_json(
    embedded: EmbeddedBackend, answer_schema: dict[str, Any]
) -> None:
    client = LLMClient(embedded.backbone, embedded)
    responses = client.generate(_asks(answer_schema))
    for response in responses:
        assert response.ok, response.error
        jsonschema.validate(response.parsed, answer_schema)
        assert response.usage.prompt_tokens > 10 and response.usage.completion_tokens > 3
        assert response.latency_s > 0


def test_server_decodes_on_all_cores_but_one_and_batches_on_all(
    embedded: EmbeddedBackend,
) -> None:
    args = Path(f"/proc/{embedded.server.pid}/cmdline").read_bytes().decode().split("\0")
    cores = len(os.sched_getaffinity(0))
    threads, batch = (args[args.index(flag) + 1] for flag in ("--threads", "--threads-batch"))
    assert (threads, batch) == (str(max(1, cores - 1)), str(cores))


def test_openai_backend_on_the_embedded_server_url(
    embedded: EmbeddedBackend, answer_schema: dict[str, Any]
) -> None:
    backbone = get_backbone("smollm2")
    endpoint = StaticEndpoint(embedded.server.base_url)
    backend = OpenAICompatBackend(backbone, embedded.config, endpoint, "EMPTY")
    for response in backend.generate(_asks(answer_schema, n=2)):
        assert response.ok, response.error
        jsonschema.validate(response.parsed, answer_schema)


def test_truncated_output_is_junk_retried_then_an_error_while_others_succeed(
    embedded: EmbeddedBackend, answer_schema: dict[str, Any]
) -> None:
    client = LLMClient(embedded.backbone, embedded, max_output_attempts=2)
    junk = _asks(answer_schema, n=1, max_tokens=3)[0]  # JSON cut after 3 tokens
    good = _asks(answer_schema, n=1)[0]
    bad, ok = client.generate([junk, good])
    assert ok.ok, ok.error
    assert bad.error_kind == "invalid_output" and "after 2 attempts" in (bad.error or "")
    assert bad.usage.completion_tokens == 2 * 3  # both attempts counted


def test_second_identical_run_never_starts_the_engine(
    embedded_backbone: Any, answer_schema: dict[str, Any], tmp_path: Path
) -> None:
    backbone = embedded_backbone()
    with open_client(backbone, cache_path=tmp_path / "c.sqlite") as client:
        first = client.generate(_asks(answer_schema))
        assert client.backend.started  # type: ignore[attr-defined]
    with open_client(backbone, cache_path=tmp_path / "c.sqlite") as client:
        second = client.generate(_asks(answer_schema))
        assert not client.backend.started  # type: ignore[attr-defined]
    assert all(r.cached for r in second)
    assert [r.parsed for r in second] == [r.parsed for r in first]


def test_killed_server_is_restarted_and_the_batch_succeeds(embedded_backbone: Any) -> None:
    backend = make_backend(embedded_backbone(n_parallel=2, backoff_base_s=0.1))
    assert isinstance(backend, EmbeddedBackend)
    try:
        first_pid = backend.server.pid
        assert first_pid is not None
        responses = asyncio.run(_kill_during(backend, first_pid, _asks(None, n=4, max_tokens=64)))
        assert all(r.ok for r in responses), [r.error for r in responses]
        assert backend.server.restarts == 1
        assert backend.server.pid not in (None, first_pid)
    finally:
        backend.close()


def test_server_down_for_good_gives_error_records(embedded_backbone: Any) -> None:
    backend = make_backend(embedded_backbone(max_restarts=0, backoff_base_s=0.1))
    assert isinstance(backend, EmbeddedBackend)
    try:
        assert backend.server.pid is not None
        os.kill(backend.server.pid, signal.SIGKILL)
        responses = backend.generate(_asks(None, n=2))
        assert [r.error_kind for r in responses] == ["engine", "engine"]
        assert "down after 0 restarts" in (responses[0].error or "")
    finally:
        backend.close()


def test_real_timeout_is_retried_then_an_error_record(embedded_backbone: Any) -> None:
    backend = make_backend(embedded_backbone(timeout_s=0.2, max_attempts=2, backoff_base_s=0.05))
    assert isinstance(backend, EmbeddedBackend)
    try:
        long_answer = ChatRequest.from_prompt(
            "Write a long story.", sampling=Sampling(max_tokens=400)
        )
        (response,) = backend.generate([long_answer])
        assert response.error_kind == "timeout" and "attempt 2 of 2" in (response.error or "")
        assert backend.server.restarts == 0  # a slow server is healthy: not restarted
    finally:
        backend.close()


def test_server_exits_when_its_owner_dies() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert owner.stdout is not None
    server_pid = int(owner.stdout.readline())
    owner.kill()  # SIGKILL: no cleanup code runs in the owner
    owner.wait()
    deadline = time.monotonic() + 30
    while _running(server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(server_pid)


def test_cli_prints_answer_usage_and_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TMEM_CACHE_DIR", str(tmp_path))
    schema = tmp_path / "city.json"
    schema.write_text('{"type": "object", "properties": {"city": {"type": "string"}}, '
                      '"required": ["city"], "additionalProperties": false}')  # fmt: skip
    backbones = tmp_path / "b.toml"
    backbones.write_text("[backbones.smollm2.engine]\nn_parallel = 1\nn_ctx = 4096\n")
    argv = ["--prompt", "Capital of Italy?", "--schema", str(schema)]
    assert llm_cli([*argv, "--backbones-file", str(backbones)]) == 0
    first = capsys.readouterr().out
    assert '"city":' in first and "cached=False" in first and "cost_usd=0.000000" in first
    assert llm_cli([*argv, "--backbones-file", str(backbones)]) == 0
    assert "cached=True" in capsys.readouterr().out


async def _kill_during(
    backend: EmbeddedBackend, pid: int, requests: list[ChatRequest]
) -> list[Any]:
    task = asyncio.create_task(backend.agenerate(requests))
    await asyncio.sleep(0.3)  # requests are in flight
    os.kill(pid, signal.SIGKILL)
    return await task


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited
        return stat.read().split(") ")[1][0] != "Z"
