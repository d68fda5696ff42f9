"""Any memory system that is an HTTP service, described by a small config, not Python: the
method `http`.

    [methods.http]
    ingest_url = "http://127.0.0.1:8080/memories/{{memory_id}}/messages"
    ingest_body = '{"messages": {{messages}}}'
    query_url = "http://127.0.0.1:8080/memories/{{memory_id}}/search"
    query_body = '{"query": {{query}}, "top_k": {{k}}}'
    [methods.http.reply]            # where the recalled items and their source ids are
    items = "hits"
    source_ids = "message_ids"

Bodies are JSON templates: each `{{name}}` is replaced by the value as JSON (`messages`: a
list of message objects, `batch` at a time; `query`; `k`; `memory_id`: the memory
directory's key, one per conversation, backbone and embedder; `llm_base_url`, `llm_api_key`,
`embedder`: the accounting endpoint, for a service on this machine that should make its LLM
calls there, counted as this method's cost). URLs take the same names, as plain text. Both
requests are POSTs (`headers` added); a reply that is not 2xx JSON raises. A service keeps
its memories itself: a later run opens a memory built earlier (same `memory_id`) without
ingesting again.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmem_core import ConfigError, EngineError, check_range
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods.external._registry import memory_system
from tmem_core.methods.external._system import MemorySystem, Recalled
from tmem_core.methods.external._wire import (
    ReplyShape,
    batches,
    endpoint_values,
    parse_json,
)
from tmem_core.schema import Message

_NAME = re.compile(r"\{\{(\w+)\}\}")
_VALUES = {"messages", "query", "k", "memory_id", "llm_base_url", "llm_api_key", "embedder"}
_INGEST = _VALUES - {"query", "k"}
_QUERY = _VALUES - {"messages"}


def _check_names(key: str, template: str, allowed: set[str]) -> None:
    unknown = sorted(set(_NAME.findall(template)) - allowed)
    if unknown:
        raise ConfigError(key, f"unknown placeholder {{{{{unknown[0]}}}}}; allowed: "
                              f"{', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class HttpParams:
    """The service's two requests (URL and JSON body template each), its headers, messages
    per ingest request, timeout and the reply's shape."""

    ingest_url: str = ""
    ingest_body: str = '{"memory_id": {{memory_id}}, "messages": {{messages}}}'
    query_url: str = ""
    query_body: str = '{"memory_id": {{memory_id}}, "query": {{query}}, "k": {{k}}}'
    headers: dict[str, str] = field(default_factory=dict)
    batch: int = 50
    timeout_s: float = 300.0
    reply: ReplyShape = field(default_factory=ReplyShape)

    def __post_init__(self) -> None:
        for key, allowed in (("ingest_url", _INGEST), ("query_url", _QUERY)):
            url = getattr(self, key)
            if url and not url.startswith(("http://", "https://")):
                raise ConfigError(key, f"an http(s) URL is required, got {url!r}")
            _check_names(key, url, allowed)
        for key, allowed, needed in (("ingest_body", _INGEST, "messages"),
                                     ("query_body", _QUERY, "query")):
            template = getattr(self, key)
            _check_names(key, template, allowed)
            if "{{" + needed + "}}" not in template:
                raise ConfigError(key, f"the template never sends {{{{{needed}}}}}")
            try:
                json.loads(_NAME.sub("0", template))
            except json.JSONDecodeError as exc:
                raise ConfigError(key, f"not a JSON template ({exc})") from None
        check_range("batch", self.batch, key="batch")
        check_range("timeout_s", self.timeout_s, 0, above=True, key="timeout_s")

    def __hash__(self) -> int:
        return hash((self.ingest_url, self.query_url, self.ingest_body, self.query_body))


def _configured(params: HttpParams) -> None:
    for key in ("ingest_url", "query_url"):
        if not getattr(params, key):
            raise ConfigError(key, "the service's URL is required")


class HttpSystem:
    """One conversation's memory in an HTTP memory service."""

    def __init__(self, endpoint: AccountingEndpoint, directory: Path, params: HttpParams
                 ) -> None:
        self.params = params
        self.values: dict[str, Any] = {"memory_id": directory.parent.name,
                                       **endpoint_values(endpoint)}

    def add(self, messages: Sequence[Message]) -> None:
        for batch in batches(messages, self.params.batch):
            self._post(self.params.ingest_url, self.params.ingest_body, {"messages": batch})

    def search(self, query: str, k: int) -> list[Recalled]:
        reply = self._post(self.params.query_url, self.params.query_body,
                           {"query": query, "k": k})
        return self.params.reply.recalled(reply)[:k]

    def _post(self, url: str, template: str, values: dict[str, Any]) -> Any:
        values = {**self.values, **values}
        target = _NAME.sub(lambda m: urllib.parse.quote(str(values[m.group(1)]), safe=""),
                           url)
        body = _NAME.sub(lambda m: json.dumps(values[m.group(1)]), template)
        request = urllib.request.Request(
            target, body.encode(), method="POST",
            headers={"Content-Type": "application/json", **self.params.headers})
        try:
            with urllib.request.urlopen(request, timeout=self.params.timeout_s) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise EngineError(f"POST {target}: {exc.code} {exc.read().decode()[:300]}") from None
        except urllib.error.URLError as exc:
            raise EngineError(f"POST {target}: {exc.reason}") from None
        return parse_json(text, f"the reply of {target}")


@memory_system("http", config=HttpParams, check=_configured,
               description="any memory system served over HTTP (ingest and query requests), "
                           "configured by endpoint")
def open_http(endpoint: AccountingEndpoint, directory: Path, params: HttpParams
              ) -> MemorySystem:
    return HttpSystem(endpoint, directory, params)

