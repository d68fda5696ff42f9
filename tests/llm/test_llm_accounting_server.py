"""The accounting endpoint, through the real OpenAI client: chat bodies become ChatRequests
for the bound LLM (schema, sampling), answers carry its usage, embeddings come from MiniLM,
failures of the bound LLM are 5xx errors, and every call is counted."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openai
import pytest

from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.llm._types import error_response
from tmem_core.retrieval import MiniLMEmbedder


class Recorder:
    """An LLM that answers from a list and keeps the requests it got."""

    def __init__(self, *responses: ChatResponse) -> None:
        self.responses = list(responses)
        self.requests: list[ChatRequest] = []

    @property
    def backbone(self) -> BackboneConfig:
        return get_backbone("smollm2")

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.requests.extend(requests)
        return [self.responses.pop(0) for _ in requests]


def _client(endpoint: AccountingEndpoint, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=endpoint.base_url, api_key=key or endpoint.api_key,
                         max_retries=0)


def test_a_chat_completion_reaches_the_bound_llm_and_reports_its_usage(
        endpoint: AccountingEndpoint) -> None:
    llm = Recorder(ChatResponse(text='{"facts": ["a"]}', usage=Usage(40, 9)))
    schema = {"type": "object", "properties": {"facts": {"type": "array"}}}
    with endpoint.bind(llm) as binding:
        reply = _client(endpoint).chat.completions.create(
            model="whatever", temperature=0.3, max_tokens=77,
            messages=[{"role": "system", "content": "Extract."},
                      {"role": "user", "content": [{"type": "text", "text": "I moved."}]}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "facts", "schema": schema}})
    [request] = llm.requests
    assert [(m.role, m.content) for m in request.messages] == [("system", "Extract."),
                                                              ("user", "I moved.")]
    assert request.schema == schema and request.sampling is not None
    assert (request.sampling.temperature, request.sampling.max_tokens) == (0.3, 77)
    assert reply.choices[0].message.content == '{"facts": ["a"]}'
    assert reply.usage is not None and (reply.usage.prompt_tokens,
                                        reply.usage.completion_tokens) == (40, 9)
    assert (binding.stats.chat_calls, binding.stats.prompt_tokens,
            binding.stats.completion_tokens) == (1, 40, 9)
    assert [(r.prompt_tokens, r.completion_tokens) for r in binding.records] == [(40, 9)]


def test_json_object_asks_for_any_object(endpoint: AccountingEndpoint) -> None:
    llm = Recorder(ChatResponse(text="{}", usage=Usage(5, 1)))
    with endpoint.bind(llm):
        _client(endpoint).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}],
            response_format={"type": "json_object"})
    assert llm.requests[0].schema == {"type": "object"}


def test_a_failed_call_is_a_server_error_and_stays_on_record(endpoint: AccountingEndpoint
                                                             ) -> None:
    failed = error_response("invalid_output", "not JSON")
    with endpoint.bind(Recorder(failed)) as binding, pytest.raises(openai.APIStatusError) as err:
        _client(endpoint).chat.completions.create(model="m",
                                                  messages=[{"role": "user", "content": "x"}])
    assert err.value.status_code >= 500 and "not JSON" in str(err.value)
    assert binding.errors == [failed.error] and binding.stats.chat_errors == 1


def test_without_a_bound_llm_or_the_key_nothing_is_answered(endpoint: AccountingEndpoint
                                                            ) -> None:
    with pytest.raises(openai.APIStatusError) as unbound:
        _client(endpoint).chat.completions.create(model="m",
                                                  messages=[{"role": "user", "content": "x"}])
    assert unbound.value.status_code == 503
    with pytest.raises(openai.AuthenticationError):
        _client(endpoint, key="wrong").models.list()


def test_embeddings_are_minilm_vectors_and_counted(endpoint: AccountingEndpoint) -> None:
    before = endpoint.stats.embedding_tokens
    texts = ["We moved to Lisbon in May.", "The cat is called Miso."]
    data = _client(endpoint).embeddings.create(model="any", input=texts).data
    vectors = np.array([d.embedding for d in data])
    assert vectors.shape == (2, 384) and endpoint.dims == 384  # what Mem0 and Graphiti are told
    assert np.allclose(vectors, MiniLMEmbedder().encode(texts), atol=1e-5)
    assert endpoint.stats.embedding_tokens > before
    models = [m.id for m in _client(endpoint).models.list().data]
    assert endpoint.embedder_id in models
