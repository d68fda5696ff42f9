"""Memory systems configured by endpoint, not Python: the project's BM25 served as a real MCP
server (stdio, started by the method per conversation) and as a real HTTP service. Through
the pipeline each recalls exactly the messages the `bm25` method retrieves for the same
questions, its build calls (one note per ingest batch) are on record as memory cost with the
endpoint's counts, and a bad configuration is refused naming its key."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from tests.conftest import scripted_backbones
from tests.methods.external.bm25_service import NOTE_PROMPT, HttpService
from tests.methods.external.conftest import SystemServer
from tmem_core import ConfigError
from tmem_core.methods.external._method import DONE
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.pipeline._summary import RunSummary
from tmem_core.results import MEMORY_STAGE, calls_store, stage_store

ROOT = Path(__file__).resolve().parents[3]
QUESTIONS = 3


def mcp_params() -> dict[str, Any]:
    return {"command": [sys.executable, "-m", "tests.methods.external.bm25_service"],
            "env": {"PYTHONPATH": str(ROOT)}, "batch": 80}


def http_params(url: str) -> dict[str, Any]:
    return {"ingest_url": f"{url}/ingest", "query_url": f"{url}/query", "batch": 80,
            "ingest_body": '{"memory_id": {{memory_id}}, "messages": {{messages}}, '
                           '"llm_base_url": {{llm_base_url}}, "llm_api_key": {{llm_api_key}}}',
            "reply": {"items": "data.results"}}


def context_ids(summary: RunSummary) -> dict[str, list[str]]:
    rows = stage_store(summary.run_dir, "construct").latest().to_pylist()
    return {r["qid"]: list(r["context_ids"]) for r in rows}


def memory_calls(summary: RunSummary) -> list[dict[str, Any]]:
    calls = calls_store(summary.run_dir).latest()
    return calls.filter(pc.equal(calls.column("stage"), MEMORY_STAGE)).to_pylist()


def note_server() -> SystemServer:
    return SystemServer(lambda system, _: "They met." if system == NOTE_PROMPT else None)


def check_against_bm25(summaries: list[RunSummary], method: str) -> None:
    [bm25] = [s for s in summaries if "bm25" in s.run_id]
    [system] = [s for s in summaries if method in s.run_id]
    assert not any(system.stage_errors.values()), system.stage_errors
    recalled = context_ids(system)
    assert len(recalled) == QUESTIONS and any(recalled.values())
    assert recalled == context_ids(bm25)
    memory = memory_calls(system)
    directories = {json.loads(r["payload"])["directory"]
                   for r in stage_store(system.run_dir, "construct").latest().to_pylist()}
    built = [json.loads((Path(d) / DONE).read_text())["endpoint"] for d in directories]
    # 200 messages in batches of 80: three notes per conversation, each a counted call
    assert len(memory) == 3 * len(directories) == sum(b["chat_calls"] for b in built)
    assert sum(c["prompt_tokens"] for c in memory) == sum(b["prompt_tokens"] for b in built) > 0
    assert system.tokens > bm25.tokens


def run(tmp: Path, name: str, method: str, params: dict[str, Any]) -> list[RunSummary]:
    server = note_server()
    try:
        config = parse_sweep({
            "name": name, "results_dir": str(tmp / name),
            "backbones_file": str(scripted_backbones(tmp, server, "scripted")),
            "benchmarks": [{"name": "synthetic", "size": 200, "limit": QUESTIONS}],
            "grid": {"methods": ["bm25", method], "backbones": ["scripted"], "top_k": [6],
                     "budget": [512]},
            "methods": {method: params}})
        return run_sweep(config, log=lambda _: None, local=True)
    finally:
        server.close()


def test_an_mcp_server_recalls_what_bm25_retrieves_and_its_build_is_memory_cost(
        tmp_path: Path) -> None:
    check_against_bm25(run(tmp_path, "mcp", "mcp", mcp_params()), "mcp")


def test_an_http_service_recalls_what_bm25_retrieves_and_its_build_is_memory_cost(
        tmp_path: Path) -> None:
    service = HttpService(tmp_path / "service")
    try:
        summaries = run(tmp_path, "http", "http", http_params(service.url))
    finally:
        service.close()
    check_against_bm25(summaries, "http")
    ingests = [body for path, body in service.requests if path == "/ingest"]
    assert ingests and all(len(b["messages"]) <= 80 and b["messages"][0]["id"]
                           for b in ingests)


@pytest.mark.parametrize(("method", "table", "key"), [
    ("mcp", {"command": ["x"], "url": "http://h/mcp"}, "methods.mcp.url"),
    ("mcp", {"url": "ftp://h"}, "methods.mcp.url"),
    ("mcp", {"command": ["x"], "batch": 0}, "methods.mcp.batch"),
    ("mcp", {"command": ["x"], "reply": {"text": ""}}, "methods.mcp.reply.text"),
    ("http", {"ingest_url": "h/ingest", "query_url": "http://h/q"}, "methods.http.ingest_url"),
    ("http", {"ingest_url": "http://h/{{k}}", "query_url": "http://h/q"},
     "methods.http.ingest_url"),
    ("http", {"ingest_url": "http://h/i", "query_url": "http://h/q",
              "query_body": '{"q": {{k}}}'}, "methods.http.query_body"),
    ("http", {"ingest_url": "http://h/i", "query_url": "http://h/q",
              "ingest_body": '{"m": {{messages}}'}, "methods.http.ingest_body"),
])
def test_a_bad_configuration_is_refused_naming_its_key(tmp_path: Path, method: str,
                                                        table: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_sweep({"name": "bad", "results_dir": str(tmp_path),
                     "benchmarks": [{"name": "synthetic", "size": 200, "limit": 1}],
                     "grid": {"methods": [method], "backbones": ["sim"]},
                     "methods": {method: table}})
    assert error.value.key == key


@pytest.mark.parametrize("method", ["mcp", "http"])
def test_a_system_without_its_server_is_refused_when_built(method: str) -> None:
    from tmem_core.methods import MethodEnv, get_method

    with pytest.raises(ConfigError) as error:
        get_method(method).create(MethodEnv({}, 4, 512))
    assert error.value.key in ("methods.mcp.command", "methods.http.ingest_url")
