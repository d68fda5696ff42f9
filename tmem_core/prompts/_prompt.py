from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from tmem_core import ConfigError
from tmem_core.llm._types import ChatMessage, object_schema

PROMPT_DIR = Path(__file__).resolve().parent
_VERSIONED = re.compile(r"^(?P<name>.+)\.v(?P<version>\d+)\.txt$")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
Syntax = Literal["bundled", "format"]
HEADERS = ("labels", "syntax", "variant", "source", "reply", "max_tokens", "response_format",
           "harness")
"""The `# key: value` lines a prompt file may open with (others are comments): a judge's
`labels`; `syntax: format` for a template kept verbatim in upstream's `str.format` syntax;
and what a judge prompt says of itself (`tmem_core.evaluation.JudgeCall`): its `variant`
(official or the project's), its `source`, how its `reply` is read, its `max_tokens`, its
`response_format` and each way the harness sends it otherwise than its source (`harness`)."""
_HEADER = re.compile(rf"^# ({'|'.join(HEADERS)}): (.+)$")

JUDGE_VALUES = ("question", "answer", "response")
"""What every judge prompt is filled with, in this order for positional `{}` fields."""
UPSTREAM_NAMES = {
    "question": "question", "answer": "answer", "response": "response",
    "gold_answer": "answer",  # the LoCoMo judge of mem0's evaluation (metrics/llm_judge.py)
    "golden_answer": "answer", "generated_answer": "response",  # EverMemBench prompts.yaml
}
"""Placeholder names of upstream judge prompts (Python `str.format` syntax) -> the value."""


@dataclass(frozen=True)
class Prompt:
    name: str  # e.g. "judge/locomo@v1", or the file path of a user-supplied prompt
    system: str
    user: str
    sha256: str  # of the file's bytes: recorded with every call that used it
    labels: tuple[str, ...] = ()  # a judge prompt's verdict labels ("# labels: A, B")
    syntax: Syntax = "bundled"  # "format": str.format syntax, see `_syntax` and `HEADERS`
    headers: tuple[tuple[str, str], ...] = ()  # the file's `HEADERS` lines, in order

    def header(self, key: str) -> str | None:
        """The value of the file's `# key: value` line (the first, if several)."""
        return next((value for name, value in self.headers if name == key), None)

    def verdict_schema(self) -> dict[str, object] | None:
        """JSON schema constraining a judge's reply to one of its labels (None: no labels)."""
        if not self.labels:
            return None
        return object_schema({"verdict": {"enum": list(self.labels)}})

    @property
    def placeholders(self) -> frozenset[str]:
        """The values the prompt needs (for a `format` file: under their own names)."""
        texts = (self.system, self.user)
        if self.syntax == "bundled":
            return frozenset(name for text in texts for name in _PLACEHOLDER.findall(text))
        return frozenset(_upstream_value(field, self.name) for text in texts
                         for field in _format_fields(text))

    def render(self, **values: str) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; extra or missing values are errors."""
        missing = self.placeholders - values.keys()
        extra = values.keys() - self.placeholders
        if missing or extra:
            raise ConfigError("", f"{self.name}: missing {sorted(missing)}, unexpected "
                              f"{sorted(extra)}")

        def fill(text: str) -> str:
            if self.syntax == "format":
                named = {f: values[_upstream_value(f, self.name)] for f in _format_fields(text)
                         if not f.isdigit() and f}
                return text.format(*(values.get(v, "") for v in JUDGE_VALUES), **named)
            return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)

        messages = [{"role": "user", "content": fill(self.user)}]
        if self.system:
            messages.insert(0, {"role": "system", "content": fill(self.system)})
        return messages

    def chat(self, **values: str) -> tuple[ChatMessage, ...]:
        """`render` as the LLM layer's chat messages, ready for a `ChatRequest`."""
        return as_chat(self.render(**values))


def as_chat(messages: list[dict[str, str]]) -> tuple[ChatMessage, ...]:
    """Rendered role/content dicts as the LLM layer's chat messages."""
    return tuple(ChatMessage(m["role"], m["content"])  # type: ignore[arg-type]
                 for m in messages)


def prompt_names() -> list[str]:
    """Every bundled prompt as `kind/name@vN`."""
    out = []
    for path in sorted(PROMPT_DIR.rglob("*.txt")):
        match = _VERSIONED.match(path.name)
        if match:
            kind = path.parent.relative_to(PROMPT_DIR).as_posix()
            out.append(f"{kind}/{match['name']}@v{match['version']}")
    return out


@cache
def load_prompt(ref: str) -> Prompt:
    """`kind/name` (latest version), `kind/name@vN`, or a path to a user prompt file."""
    path = Path(ref)
    if path.suffix == ".txt" and path.exists():
        return _parse(str(path), path.read_bytes(), user_file=True)
    base, _, version = ref.partition("@v")
    folder, _, stem = base.rpartition("/")
    candidates = {
        int(m["version"]): p
        for p in (PROMPT_DIR / folder).glob(f"{stem}.v*.txt")
        if (m := _VERSIONED.match(p.name)) and m["name"] == stem
    }
    if not candidates:
        raise ConfigError("", f"unknown prompt {ref!r}; bundled: {', '.join(prompt_names())}")
    chosen = int(version) if version else max(candidates)
    if chosen not in candidates:
        raise ConfigError("", f"prompt {base!r} has no version {chosen}; has {sorted(candidates)}")
    return _parse(f"{base}@v{chosen}", candidates[chosen].read_bytes())


def _parse(name: str, raw: bytes, user_file: bool = False) -> Prompt:
    """A prompt file: its `HEADERS` lines, then its sections. A file declaring `# syntax:
    format` is an upstream template kept byte for byte: each section is its text up to the
    next section header or the file's end, less the one newline before it."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    headers: list[tuple[str, str]] = []
    for line in raw.decode("utf-8").splitlines(keepends=True):
        header = line.strip().lower()
        if current is None and (m := _HEADER.match(line.rstrip("\r\n"))):
            headers.append((m[1], m[2].strip()))
        elif header in ("[system]", "[user]"):
            current = sections.setdefault(header[1:-1], [])
        elif current is not None:
            current.append(line)
        elif line.strip() and not line.startswith("#"):
            raise ConfigError("", f"{name}: text before the first [system]/[user] section")
    if "user" not in sections:
        raise ConfigError("", f"{name}: no [user] section")
    declared = dict(headers).get("syntax")
    if declared not in (None, "format"):
        raise ConfigError("", f"{name}: unknown syntax {declared!r}; known: format")
    system, user = (_text(sections.get(key, []), verbatim=declared == "format")
                    for key in ("system", "user"))
    syntax = "format" if declared else _syntax(system, user) if user_file else "bundled"
    labels = tuple(x.strip() for x in (dict(headers).get("labels") or "").split(",")
                   if x.strip())
    prompt = Prompt(name=name, system=system, user=user, sha256=hashlib.sha256(raw).hexdigest(),
                    labels=labels, syntax=syntax, headers=tuple(headers))
    prompt.placeholders  # noqa: B018 (an unknown upstream name fails here, when loaded)
    return prompt


def _text(lines: list[str], verbatim: bool) -> str:
    """A section's text: verbatim, less the newline that ends its last line; else stripped."""
    if verbatim:
        text = "".join(lines)
        return text[:-1] if text.endswith("\n") else text
    return "\n".join(line.rstrip("\r\n") for line in lines).strip()


def _syntax(*texts: str) -> Syntax:
    """A user file's placeholder syntax: the bundled `{{name}}` wherever it appears, else
    upstream's `str.format` fields (`{question}`, positional `{}`, `{{` for a brace)."""
    if any(_PLACEHOLDER.search(t) for t in texts):
        return "bundled"
    return "format" if any("{" in t for t in texts) else "bundled"


def _format_fields(text: str) -> list[str]:
    """The `str.format` field names of `text` (positional ones as "0", "1", ...)."""
    try:
        parsed = [field for _, field, _, _ in string.Formatter().parse(text) if field is not None]
    except ValueError as exc:
        raise ConfigError("", f"not a str.format template: {exc}") from None
    auto = iter(range(len(parsed)))
    return [field or str(next(auto)) for field in parsed]


def _upstream_value(field: str, prompt: str) -> str:
    """The value a `format` field names: its upstream name, or its position."""
    if field.isdigit() and int(field) < len(JUDGE_VALUES):
        return JUDGE_VALUES[int(field)]
    if field in UPSTREAM_NAMES:
        return UPSTREAM_NAMES[field]
    raise ConfigError("", f"{prompt}: placeholder {{{field}}} names none of the values a judge "
                      f"is given; use {', '.join('{' + n + '}' for n in UPSTREAM_NAMES)} or "
                      f"up to {len(JUDGE_VALUES)} positional {{}} ({', '.join(JUDGE_VALUES)})")


def judge_prompt(ref: str) -> Prompt:
    """A judge prompt (bundled, or a user file in either syntax) that fills exactly the
    judge's values: the question, the gold answer and the response to grade."""
    prompt = load_prompt(ref)
    if prompt.placeholders != set(JUDGE_VALUES):
        raise ConfigError("", f"{prompt.name}: a judge prompt fills {', '.join(JUDGE_VALUES)}; "
                          f"this one fills {', '.join(sorted(prompt.placeholders)) or 'nothing'}")
    return prompt
