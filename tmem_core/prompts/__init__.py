"""Prompts as versioned data: `<kind>/<name>.v<N>.txt` files, each identified by its hash.

A prompt file has optional `#` comment lines, then a `[system]` and a `[user]` section.
Placeholders are `{{name}}`; rendering fails on a missing or unknown placeholder. A user's
prompt file (a judge prompt copied from upstream evaluation code) may instead use Python's
`str.format` fields, `{question}` or positional `{}`, under the names in `UPSTREAM_NAMES`.
"""

from tmem_core.prompts._prompt import (
    Prompt,
    as_chat,
    judge_prompt,
    load_prompt,
    prompt_names,
)

__all__ = [
    "Prompt",
    "as_chat",
    "judge_prompt",
    "load_prompt",
    "prompt_names",
]
