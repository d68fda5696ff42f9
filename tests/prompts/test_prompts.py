from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tmem_core.evaluation import READERS
from tmem_core.prompts import load_prompt, prompt_names
from tmem_core.prompts._prompt import PromptError


def test_every_bundled_prompt_parses_with_a_stable_hash() -> None:
    names = prompt_names()
    assert "judge/locomo@v1" in names and "answer/forest@v1" in names
    for name in names:
        prompt = load_prompt(name)
        assert prompt.user and len(prompt.sha256) == 64


def test_latest_version_by_default_and_hash_of_the_file(tmp_path: Path) -> None:
    assert load_prompt("judge/locomo").name == "judge/locomo@v2"  # the official one
    custom = tmp_path / "official.txt"
    custom.write_text("# mine\n[user]\nQ={{question}} A={{answer}} R={{response}}\n")
    prompt = load_prompt(str(custom))
    assert prompt.sha256 == hashlib.sha256(custom.read_bytes()).hexdigest()
    assert prompt.render(question="q", answer="a", response="r") == [
        {"role": "user", "content": "Q=q A=a R=r"}]


def test_render_rejects_missing_and_unknown_values() -> None:
    prompt = load_prompt("judge/locomo")
    with pytest.raises(PromptError, match="missing"):
        prompt.render(question="q", answer="a")
    with pytest.raises(PromptError, match="unexpected"):
        prompt.render(question="q", answer="a", response="r", extra="x")


def test_unknown_prompt_and_version() -> None:
    with pytest.raises(PromptError, match="unknown prompt"):
        load_prompt("judge/nope")
    with pytest.raises(PromptError, match="no version 9"):
        load_prompt("judge/locomo@v9")


def test_judge_prompts_declare_their_labels_or_their_reader() -> None:
    """A project judge prompt constrains its reply to its two labels; an official one names
    the reading of its source (`READERS`) instead."""
    for name in prompt_names():
        prompt = load_prompt(name)
        if name.startswith("judge/") and prompt.header("variant") == "official":
            assert prompt.header("reply") in READERS and not prompt.labels
        elif name.startswith("judge/"):
            schema = prompt.verdict_schema()
            assert schema is not None and len(prompt.labels) == 2
        else:
            assert prompt.verdict_schema() is None
    assert load_prompt("judge/groupmembench").labels == ("Correct", "Incorrect")
