"""Stop strings and continuations of the assistant's message: sent to every backend (the
OpenAI-compatible body, vLLM's sampling and template, the sim, the embedded llama.cpp server),
hashed only when set."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from tmem_core.llm import (
    ChatRequest,
    EmbeddedBackend,
    HttpConfig,
    OpenAICompatBackend,
    Sampling,
    StaticEndpoint,
    get_backbone,
    open_backend,
    request_hash,
)
from tmem_core.llm._accounting_server import chat_request
from tmem_core.llm._config import parse_backbones
from tmem_core.llm._types import ChatMessage
from tmem_core.llm._vllm import chat_prompt, sampling_params

FAST = HttpConfig(timeout_s=5.0, max_attempts=1)
ASK = ChatMessage("user", "Count from 1 to 20, separated by commas.")
KEY_BEFORE_STOP_STRINGS = "224be3da70e44ff66e647cc8aaaa9a0c1756c51782b01f5533b1a7ee976cabdb"
"""The key of `_plain()` as the request cache wrote it before requests had stop strings."""


def _plain() -> ChatRequest:
    return ChatRequest((ChatMessage("user", "Count to five."),), Sampling(max_tokens=32))


def test_a_request_without_stop_strings_keeps_its_cache_key() -> None:
    smol = get_backbone("smollm2")
    assert request_hash(smol, _plain()) == KEY_BEFORE_STOP_STRINGS
    stopped = dataclasses.replace(_plain(), stop=("<|end_search_query|>",))
    assert request_hash(smol, stopped) != KEY_BEFORE_STOP_STRINGS
    assert request_hash(smol, dataclasses.replace(_plain(), stop=("x",))) != \
        request_hash(smol, stopped)


def test_a_continuation_is_free_text_and_stop_strings_are_not_empty() -> None:
    said = (ASK, ChatMessage("assistant", "1, 2,"))
    assert ChatRequest(said).continues and not ChatRequest((ASK,)).continues
    with pytest.raises(ValueError, match="no schema"):
        ChatRequest(said, schema={"type": "object"})
    with pytest.raises(ValueError, match="stop string"):
        ChatRequest((ASK,), stop=("",))


def test_the_http_body_carries_stop_strings_and_continues_the_final_message(
    scripted_server: Any, step: Any
) -> None:
    server = scripted_server([step(content="3, 4")])
    backend = OpenAICompatBackend(get_backbone("smollm2"), FAST,
                                  StaticEndpoint(server.base_url), "EMPTY")
    continued = ChatRequest((ASK, ChatMessage("assistant", "1, 2, ")), stop=("7", "<|end|>"))
    response = backend.generate([continued, _plain()])[0]
    assert response.ok and response.text == "3, 4"
    (body,) = [b for b in server.bodies if len(b["messages"]) == 2]
    (plain,) = [b for b in server.bodies if len(b["messages"]) == 1]
    assert body["stop"] == ["7", "<|end|>"]
    assert body["messages"][-1] == {"role": "assistant", "content": "1, 2, "}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert not {"stop", "continue_final_message", "add_generation_prompt"} & plain.keys()


def test_vllm_gets_stop_strings_and_an_open_final_message() -> None:
    captured: dict[str, Any] = {}

    class Tokenizer:
        def apply_chat_template(self, messages: Any, **kwargs: Any) -> str:
            captured.update(kwargs, messages=messages)
            return "prompt"

    vllm = SimpleNamespace(SamplingParams=lambda **kw: kw)
    smol = get_backbone("smollm2")
    request = ChatRequest((ASK, ChatMessage("assistant", "1, 2,")), stop=("7",))
    assert sampling_params(vllm, smol, request)["stop"] == ["7"]
    assert sampling_params(vllm, smol, _plain())["stop"] is None
    chat_prompt(Tokenizer(), smol, request)
    assert captured["continue_final_message"] and not captured["add_generation_prompt"]
    chat_prompt(Tokenizer(), smol, _plain())
    assert captured["add_generation_prompt"] and not captured["continue_final_message"]


def test_the_sim_ends_its_text_before_a_stop_string() -> None:
    backbones = parse_backbones({"sim": {"backend": "sim", "model": "m",
                                         "engine": {"ttft_s": 0.0, "step_s": 0.0001}}})
    free = ChatRequest((ChatMessage("user", "alpha beta gamma delta " * 10),),
                       Sampling(max_tokens=64))
    with open_backend(backbones["sim"]) as backend:
        (whole,) = backend.generate([free])
        (cut,) = backend.generate([dataclasses.replace(free, stop=(" ",))])
    assert " " in whole.text  # without the stop string: several words
    assert cut.ok and cut.text.lower() in {"alpha", "beta", "gamma", "delta"}


def test_the_embedded_server_stops_at_a_stop_string_and_continues_a_message(
    embedded: EmbeddedBackend,
) -> None:
    sampling = Sampling(max_tokens=48)
    whole, stopped, continued = embedded.generate([
        ChatRequest((ASK,), sampling),
        ChatRequest((ASK,), sampling, stop=("5",)),
        ChatRequest((ASK, ChatMessage("assistant", "1, 2, 3, 4, 5, 6,")), sampling),
    ])
    assert whole.ok and stopped.ok and continued.ok
    assert "5" in whole.text and "6" in whole.text
    assert "5" not in stopped.text and "4" in stopped.text
    assert stopped.usage.completion_tokens < whole.usage.completion_tokens
    assert continued.text.lstrip().startswith("7")  # the same sequence, only what was added
    assert continued.usage.prompt_tokens > whole.usage.prompt_tokens  # the prefix is prompt


def test_the_accounting_server_passes_a_clients_stop_strings_on() -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "Count."}]}
    assert chat_request(body, Sampling()).stop == ()
    assert chat_request({**body, "stop": "7"}, Sampling()).stop == ("7",)
    assert chat_request({**body, "stop": ["7", "8"]}, Sampling()).stop == ("7", "8")
