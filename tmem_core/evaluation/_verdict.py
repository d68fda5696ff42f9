"""A judge's verdict: the project's parsing out of whatever text surrounds it
(`parse_verdict`), each official judge's own reading of its reply (`READERS`), and how a
judge prompt is sent and read (`JudgeCall`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tmem_core.llm._types import object_schema
from tmem_core.prompts import Prompt

POSITIVE = ("correct", "yes", "true")
NEGATIVE = ("wrong", "incorrect", "no", "false")
_WORD = re.compile(r"[a-z]+")
_STATED = re.compile(r"(?:verdict|label|grade|judgement|judgment)\"?\s*(?:is|:|=)\s*[\"*]*\s*"
                     r"([a-z]+)")  # also a JSON key: {"label": "CORRECT"}


def parse_verdict(text: str) -> bool | None:
    """True / False for a clear verdict, None when the text commits to none.

    In order: the first word when it is a label ("CORRECT. The response..."), a stated
    verdict ("Verdict: WRONG", or `{"label": "WRONG"}` after a reason), else the labels
    present when they all agree; in that last case "yes" and "no" do not count ("no
    information" is not a verdict).
    """
    lowered = text.lower()
    words = _WORD.findall(lowered)
    if not words:
        return None
    first = _label(words[0])
    if first is not None:
        return first
    stated = [_label(m.group(1)) for m in _STATED.finditer(lowered)]
    stated_labels = {s for s in stated if s is not None}
    if len(stated_labels) == 1:
        return stated_labels.pop()
    present = set()
    for before, word in zip(["", *words], words, strict=False):
        label = _label(word) if word not in ("yes", "no") else None
        if label is not None:
            present.add(label != (before == "not"))  # "not correct" counts as negative
    return present.pop() if len(present) == 1 else None


def _label(word: str) -> bool | None:
    if word in POSITIVE:
        return True
    if word in NEGATIVE:
        return False
    return None


# -- how a judge prompt is sent and its reply read ------------------------------------------

LABELS_MAX_TOKENS = 32  # a project prompt with labels: one constrained word
FREE_VERDICT_TOKENS = 256  # a prompt that asks for a reason before its verdict
JSON_LABEL_SCHEMA = object_schema({"reason": {"type": "string", "maxLength": 400},
                                   "label": {"enum": ["CORRECT", "WRONG"]}})
"""A JSON object asked of the judge (`response_format: json_object`), as this harness's
engines decode JSON: by a schema, a reason before the label (the prompt's one sentence,
bounded so that the object ends within the call's `max_tokens`)."""
_FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


def yes_in_reply(text: str) -> bool:
    """LongMemEval's reading (evaluate_qa.py): `'yes' in reply.lower()`."""
    return "yes" in text.strip().lower()


def json_label(text: str) -> bool | None:
    """mem0's reading (metrics/llm_judge.py): the reply's JSON object (`extract_json`: a
    fenced block, else from the first `{` to the last `}`), correct when its "label" is
    exactly CORRECT; None where upstream fails (no JSON object, no label)."""
    found = _json_object(text)
    if not isinstance(found, dict) or "label" not in found:
        return None
    return bool(found["label"] == "CORRECT")


def json_label_or_words(text: str) -> bool | None:
    """EverMemBench's reading (evaluator.py `_parse_judge_response`): the JSON "label"
    (WRONG when absent; a nested {"label": ...} read through), upper-cased, is CORRECT; a
    reply without readable JSON is correct when CORRECT is in it and WRONG is not. None for
    JSON that is no object (upstream retries the call)."""
    found = _json_object(text)
    if found is _UNREADABLE:
        upper = text.upper()
        return "CORRECT" in upper and "WRONG" not in upper
    if not isinstance(found, dict):
        return None
    label = found.get("label", "WRONG")
    if isinstance(label, dict):
        label = label.get("label", "WRONG")
    return isinstance(label, str) and label.strip().upper() == "CORRECT"


_UNREADABLE = object()


def _json_object(text: str) -> object:
    """The JSON value of a reply as mem0's `extract_json` finds it, `_UNREADABLE` if none."""
    text = text.strip()
    fenced = _FENCED.search(text)
    start, end = text.find("{"), text.rfind("}")
    candidate = (fenced.group(1) if fenced else
                 text[start:end + 1] if -1 < start < end else text)
    try:
        return json.loads(candidate)
    except ValueError:
        return _UNREADABLE


READERS: dict[str, Callable[[str], bool | None]] = {
    "yes_in_reply": yes_in_reply, "json_label": json_label,
    "json_label_or_words": json_label_or_words}
"""How an official judge's reply is read, by its prompt's `# reply:` header."""
HARNESS = ("an unreadable reply is asked once more, sampled at temperature 0.7, then recorded "
           "as an error", "repeats after the first (grid.judge_repeats) are sampled at "
           "temperature 0.7")
"""Where every judge call differs from its source, beside its prompt's `# harness:` lines."""


@dataclass(frozen=True)
class JudgeCall:
    """How a judge prompt is sent and its reply read, from the prompt file's headers: an
    official prompt names its `reply` reader (`READERS`), its `max_tokens` and whether it
    asks for a JSON object; a project prompt's labels constrain its reply to one of them
    (`Prompt.verdict_schema`), read by `parse_verdict`, as is a user's file without labels
    (which gets room for a reason first)."""

    prompt: Prompt

    @property
    def reader(self) -> str | None:
        return self.prompt.header("reply")

    @property
    def max_tokens(self) -> int:
        stated = self.prompt.header("max_tokens")
        if stated is not None:
            return int(stated)
        return LABELS_MAX_TOKENS if self.prompt.labels and not self.reader \
            else FREE_VERDICT_TOKENS

    @property
    def schema(self) -> dict[str, Any] | None:
        if self.prompt.header("response_format") == "json_object":
            return JSON_LABEL_SCHEMA
        return None if self.reader else self.prompt.verdict_schema()

    def read(self, text: str, parsed: Any) -> bool | None:
        """The verdict of a reply (its text, and its JSON value when a schema was sent)."""
        if self.reader is not None:
            return READERS[self.reader](text)
        return parse_verdict(str(parsed["verdict"] if isinstance(parsed, dict) else text))

    def describe(self) -> dict[str, Any]:
        """What a run's contract says of the call: the prompt, how it is sent and read, and
        where the harness differs from its source."""
        official = self.prompt.header("variant") == "official"
        return {"prompt": self.prompt.name, "sha256": self.prompt.sha256,
                "variant": self.prompt.header("variant") or "project",
                "source": self.prompt.header("source"),
                "roles": ["system", "user"] if self.prompt.system else ["user"],
                "temperature": 0.0, "max_tokens": self.max_tokens,
                "response_format": "json_schema" if self.schema else "text",
                "reply": self.reader or "labels",
                "harness": [value for key, value in self.prompt.headers if key == "harness"]
                + (list(HARNESS) if official else [])}
