"""Any memory system that is an MCP server with an ingest tool and a query tool, configured
by endpoint, not Python: the method `mcp` (MCP Python SDK `mcp` as the client).

    [methods.mcp]
    command = ["my-memory-server", "--stdio"]   # or: url = "http://host:8000/mcp"
    ingest_tool = "ingest"                      # called with {messages: [...]}, `batch` at a time
    query_tool = "query"                        # called with {query: "...", k: 8}
    [methods.mcp.reply]                         # where the items are in the query's result
    items = "results"

A `command` server is started per conversation's memory (and stopped with it), with the
accounting endpoint in its environment (`OPENAI_BASE_URL`, `OPENAI_API_KEY`,
`TMEM_EMBEDDER`) and its memory's directory (`TMEM_MEMORY_DIR`, where it keeps what it must
find again when a later run opens the memory without ingesting): every LLM call it makes
there is counted as this method's memory or construct cost. A `url` server is one service
for every conversation: each tool call names the memory (`memory_id`, the memory directory's
key), and its LLM calls are its own (not counted) unless it is pointed at the endpoint.
A tool's result is read from its structured content, or else from its first text block as
JSON; a result flagged as an error raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmem_core import ConfigError, DataError, EngineError, check_range
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


@dataclass(frozen=True)
class McpParams:
    """The server (`command` to start it over stdio, or `url` of a streamable-HTTP one), its
    tools and their argument names, the messages per ingest call and the reply's shape."""

    command: tuple[str, ...] = ()
    url: str = ""
    env: dict[str, str] = field(default_factory=dict)  # more environment for `command`
    ingest_tool: str = "ingest"
    query_tool: str = "query"
    messages_argument: str = "messages"
    query_argument: str = "query"
    k_argument: str = "k"
    memory_argument: str = "memory_id"  # sent to a `url` server only
    batch: int = 50
    timeout_s: float = 300.0
    reply: ReplyShape = field(default_factory=ReplyShape)

    def __post_init__(self) -> None:
        if self.command and self.url:
            raise ConfigError("url", "give the server's command or its url, not both")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ConfigError("url", f"not an http(s) URL: {self.url!r}")
        for key in ("ingest_tool", "query_tool", "messages_argument", "query_argument"):
            if not getattr(self, key):
                raise ConfigError(key, "cannot be empty")
        check_range("batch", self.batch, key="batch")
        check_range("timeout_s", self.timeout_s, 0, above=True, key="timeout_s")

    def __hash__(self) -> int:
        return hash((self.command, self.url, tuple(sorted(self.env.items()))))


def _configured(params: McpParams) -> None:
    if not (params.command or params.url):
        raise ConfigError("command", "name the server: its command (stdio) or its url")


class _Session:
    """One MCP client session, held open by a thread of its own (for the life of the process:
    a stdio server ends when its stdin closes); `call` from any thread."""

    def __init__(self, server: Any, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[str, dict[str, Any],
                                         concurrent.futures.Future[Any]]] | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(server),),
                                        name="mcp-session", daemon=True)
        self._thread.start()
        self._ready.result(timeout=timeout_s)

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The tool's result as JSON."""
        if self._loop is None or self._queue is None or not self._thread.is_alive():
            raise EngineError("the MCP session is closed")
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (tool, arguments, done))
        return done.result(timeout=self.timeout_s)

    async def _serve(self, server: Any) -> None:
        from mcp import Client

        try:
            async with Client(server, read_timeout_seconds=self.timeout_s) as client:
                self._loop, self._queue = asyncio.get_running_loop(), asyncio.Queue()
                self._ready.set_result(None)
                while True:
                    tool, arguments, done = await self._queue.get()
                    try:
                        done.set_result(_result(tool, await client.call_tool(tool, arguments)))
                    except Exception as exc:  # the caller's error, not the session's
                        done.set_exception(exc)
        except BaseException as exc:  # the server did not start, or the session broke
            if not self._ready.done():
                self._ready.set_exception(EngineError(f"cannot open the MCP session: {exc!r}"))


class McpSystem:
    """One conversation's memory in an MCP memory server."""

    def __init__(self, endpoint: AccountingEndpoint, directory: Path, params: McpParams
                 ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.params, self.memory_id = params, directory.parent.name
        self.session = _Session(_server(endpoint, directory, params), params.timeout_s)

    def add(self, messages: Sequence[Message]) -> None:
        for batch in batches(messages, self.params.batch):
            self.session.call(self.params.ingest_tool,
                              self._scoped({self.params.messages_argument: batch}))

    def search(self, query: str, k: int) -> list[Recalled]:
        arguments: dict[str, Any] = {self.params.query_argument: query}
        if self.params.k_argument:
            arguments[self.params.k_argument] = k
        reply = self.session.call(self.params.query_tool, self._scoped(arguments))
        return self.params.reply.recalled(reply)[:k]

    def _scoped(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.params.url and self.params.memory_argument:
            return {self.params.memory_argument: self.memory_id, **arguments}
        return arguments


@memory_system("mcp", config=McpParams, extra="mcp", imports=("mcp",), check=_configured,
               description="any memory system served over MCP (ingest and query tools), "
                           "configured by endpoint")
def open_mcp(endpoint: AccountingEndpoint, directory: Path, params: McpParams
             ) -> MemorySystem:
    return McpSystem(endpoint, directory, params)


def _server(endpoint: AccountingEndpoint, directory: Path, params: McpParams) -> Any:
    """What `mcp.Client` connects to: the url, or the command started with the endpoint and
    the memory directory in its environment."""
    if params.url:
        return params.url
    from mcp import StdioServerParameters

    told = endpoint_values(endpoint)
    env = {"OPENAI_BASE_URL": told["llm_base_url"], "OPENAI_API_KEY": told["llm_api_key"],
           "TMEM_EMBEDDER": told["embedder"], "TMEM_MEMORY_DIR": str(directory),
           **params.env}
    return StdioServerParameters(command=params.command[0], args=list(params.command[1:]),
                                 env=env, cwd=str(directory))


def _result(tool: str, result: Any) -> Any:
    """A tool result as JSON: its structured content, else its first text block parsed."""
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    if result.is_error:
        raise EngineError(f"tool {tool!r} answered an error: {' '.join(texts)[:500]}")
    if result.structured_content is not None:
        return result.structured_content
    if not texts:
        raise DataError(f"tool {tool!r} returned neither structured content nor text")
    return parse_json(texts[0], f"tool {tool!r}'s text")
