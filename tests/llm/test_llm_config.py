"""Backbone registry: built-ins, user files (TOML/YAML), and errors that name the bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tmem_core import ConfigError
from tmem_core.llm import Sampling, VLLMEngineConfig, get_backbone, load_backbones, make_backend
from tmem_core.llm._config import BUILTIN_BACKBONES, parse_backbones
from tmem_core.llm._embedded import EmbeddedEngineConfig
from tmem_core.llm._http import OpenAIEngineConfig


def test_builtins_parse_into_typed_engine_configs() -> None:
    backbones = load_backbones()
    assert set(backbones) == set(BUILTIN_BACKBONES)
    assert {"smollm2", "smollm2-vllm-cpu", "qwen3.5-27b", "gemma4-31b", "gpt-5.5"} <= set(backbones)
    assert isinstance(backbones["smollm2"].engine, EmbeddedEngineConfig)
    assert isinstance(backbones["smollm2-vllm-cpu"].engine, VLLMEngineConfig)
    hosted = backbones["gpt-5.5"]
    assert isinstance(hosted.engine, OpenAIEngineConfig)
    assert hosted.engine.api_key_env == "OPENAI_API_KEY"
    assert hosted.prices.input_per_mtok > 0
    assert backbones["qwen3.5-27b"].tokenizer == "qwen:qwen3.5-27b"


def test_user_toml_overrides_one_key_and_adds_a_backbone(tmp_path: Path) -> None:
    path = tmp_path / "backbones.toml"
    path.write_text(
        """
[backbones.smollm2.engine]
n_parallel = 2

[backbones.smollm2.sampling]
temperature = 1

[backbones.local-qwen]
backend = "openai"
model = "Qwen/Qwen3.5-27B"
tokenizer = "qwen:qwen3.5-27b"
prices = { input_per_mtok = 0.1, output_per_mtok = 0.4 }
engine = { base_url = "http://127.0.0.1:8000/v1", timeout_s = 30 }
"""
    )
    backbones = load_backbones(path)
    smol = backbones["smollm2"]
    assert isinstance(smol.engine, EmbeddedEngineConfig)
    assert smol.engine.n_parallel == 2
    assert smol.engine.n_ctx == BUILTIN_BACKBONES["smollm2"]["engine"]["n_ctx"]  # kept
    assert smol.sampling == Sampling(temperature=1.0, max_tokens=256)
    qwen = backbones["local-qwen"]
    assert isinstance(qwen.engine, OpenAIEngineConfig)
    assert qwen.engine.timeout_s == 30.0
    assert qwen.prices.output_per_mtok == 0.4


def test_yaml_file_and_backend_change_replaces_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "backbones.yaml"
    path.write_text(
        "backbones:\n"
        "  smollm2:\n"
        "    backend: openai\n"
        "    model: SmolLM2-135M-Instruct\n"
        "    engine: {base_url: 'http://127.0.0.1:9/v1'}\n"
    )
    smol = get_backbone("smollm2", path)
    assert isinstance(smol.engine, OpenAIEngineConfig)
    assert smol.context_length == 8192  # the built-in entry was replaced, not merged


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"backend": "vlm", "model": "m"},
            "config key 'backbones.x.backend': unknown backend 'vlm'; "
            "allowed: embedded, openai, serve, sim",
        ),
        (
            {"backend": "vllm", "model": "m", "engine": {"n_parallel": 4}},
            "config key 'backbones.x.engine': unknown key 'n_parallel'; allowed: dtype, "
            "enforce_eager,",
        ),
        ({"backend": "openai", "model": "m", "temprature": 0}, "unknown key 'temprature'"),
        (
            {"backend": "openai", "model": "m", "sampling": {"max_tokens": "many"}},
            "config key 'backbones.x.sampling.max_tokens': expected int, got str 'many'",
        ),
        (
            {"backend": "embedded", "model": "m", "engine": {"n_parallel": True}},
            "config key 'backbones.x.engine.n_parallel': expected int, got bool",
        ),
        (
            {"backend": "embedded", "model": "m", "engine": {"n_parallel": 0}},
            "config key 'backbones.x.engine': n_parallel must be positive, got 0",
        ),
        (
            {"backend": "embedded", "model": "m", "engine": {"n_threads_batch": -1}},
            "config key 'backbones.x.engine': n_threads_batch must be 0 or more, got -1",
        ),
        ({"backend": "openai"}, "config key 'backbones.x': missing key 'model'"),
        (
            {"backend": "openai", "model": "m", "replicas": 3,
             "engine": {"base_urls": ["http://a:8000/v1", "http://b:8000/v1"]}},
            "config key 'backbones.x.replicas': 3, but its engine names 2 endpoint(s), one "
            "replica each",
        ),
        ({"backend": "openai", "model": "m", "tokenizer": "bpe"}, "unknown tokenizer 'bpe'"),
    ],
)
def test_bad_entries_fail_with_the_key_named(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_backbones({"x": entry})
    assert message in str(caught.value)


def test_unknown_top_level_key_and_unknown_backbone(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("[backbone.x]\nbackend = 'openai'\n")
    with pytest.raises(ConfigError, match="unknown key 'backbone'; allowed: backbones"):
        load_backbones(path)
    with pytest.raises(ConfigError, match="unknown backbone 'nope'; allowed: gemma4-31b"):
        get_backbone("nope")


def test_missing_api_key_env_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="environment variable OPENAI_API_KEY is not set"):
        make_backend(get_backbone("gpt-5.5"))


def test_a_fleet_gives_each_replica_its_own_server() -> None:
    urls = ["http://gpu-0:8000/v1", "http://gpu-1:8000/v1", "http://gpu-2:8000/v1"]
    fleet = parse_backbones({"f": {"backend": "openai", "model": "m",
                                   "engine": {"base_urls": urls}}})["f"]
    assert fleet.fleet == 3
    servers = [fleet.for_replica(i).engine for i in range(3)]
    assert [s.base_url for s in servers] == urls and all(s.fleet == 0 for s in servers)
    single = get_backbone("smollm2")
    assert single.fleet == 0 and single.for_replica(1) == single
