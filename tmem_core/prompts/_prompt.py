from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tmem_core.llm import ChatMessage, object_schema

PROMPT_DIR = Path(__file__).resolve().parent
_VERSIONED = re.compile(r"^(?P<name>.+)\.v(?P<version>\d+)\.txt$")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class PromptError(ValueError):
    """A prompt that cannot be found, parsed or rendered."""


@dataclass(frozen=True)
class Prompt:
    name: str  # e.g. "judge/locomo@v1", or the file path of a user-supplied prompt
    system: str
    user: str
    sha256: str  # of the file's bytes: recorded with every call that used it
    labels: tuple[str, ...] = ()  # a judge prompt's verdict labels ("# labels: A, B")

    def verdict_schema(self) -> dict[str, object] | None:
        """JSON schema constraining a judge's reply to one of its labels (None: no labels)."""
        if not self.labels:
            return None
        return object_schema({"verdict": {"enum": list(self.labels)}})

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(_PLACEHOLDER.findall(self.system + self.user))

    def render(self, **values: str) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; extra or missing values are errors."""
        missing = self.placeholders - values.keys()
        extra = values.keys() - self.placeholders
        if missing or extra:
            raise PromptError(f"{self.name}: missing {sorted(missing)}, unexpected "
                              f"{sorted(extra)}")

        def fill(text: str) -> str:
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
        return _parse(str(path), path.read_bytes())
    base, _, version = ref.partition("@v")
    folder, _, stem = base.rpartition("/")
    candidates = {
        int(m["version"]): p
        for p in (PROMPT_DIR / folder).glob(f"{stem}.v*.txt")
        if (m := _VERSIONED.match(p.name)) and m["name"] == stem
    }
    if not candidates:
        raise PromptError(f"unknown prompt {ref!r}; bundled: {', '.join(prompt_names())}")
    chosen = int(version) if version else max(candidates)
    if chosen not in candidates:
        raise PromptError(f"prompt {base!r} has no version {chosen}; has {sorted(candidates)}")
    return _parse(f"{base}@v{chosen}", candidates[chosen].read_bytes())


def _parse(name: str, raw: bytes) -> Prompt:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    labels: tuple[str, ...] = ()
    for line in raw.decode("utf-8").splitlines():
        header = line.strip().lower()
        if current is None and line.startswith("# labels:"):
            labels = tuple(x.strip() for x in line.split(":", 1)[1].split(",") if x.strip())
        elif header in ("[system]", "[user]"):
            current = sections.setdefault(header[1:-1], [])
        elif current is not None:
            current.append(line)
        elif line.strip() and not line.startswith("#"):
            raise PromptError(f"{name}: text before the first [system]/[user] section")
    if "user" not in sections:
        raise PromptError(f"{name}: no [user] section")
    return Prompt(
        name=name,
        system="\n".join(sections.get("system", [])).strip(),
        user="\n".join(sections["user"]).strip(),
        sha256=hashlib.sha256(raw).hexdigest(),
        labels=labels,
    )
