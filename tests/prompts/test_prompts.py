from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tmem_core import ConfigError
from tmem_core.evaluation._verdict import READERS
from tmem_core.prompts import load_prompt, prompt_names


def test_every_bundled_prompt_parses_with_a_stable_hash() -> None:
    names = prompt_names()
    assert "judge/locomo@v1" in names and "answer/forest@v2" in names
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
    with pytest.raises(ConfigError, match="missing"):
        prompt.render(question="q", answer="a")
    with pytest.raises(ConfigError, match="unexpected"):
        prompt.render(question="q", answer="a", response="r", extra="x")


def test_unknown_prompt_and_version() -> None:
    with pytest.raises(ConfigError, match="unknown prompt"):
        load_prompt("judge/nope")
    with pytest.raises(ConfigError, match="no version 9"):
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


def test_flat_and_forest_answer_prompts_differ_only_in_the_forests_own_part() -> None:
    """One instruction block shared by both (paper §I): the forest adds its reading
    instructions after it, and the user turn differs only in the context's heading."""
    flat, forest = load_prompt("answer/flat"), load_prompt("answer/forest")
    shared, _, reading = forest.system.partition("\n")
    assert flat.system == shared
    assert reading.startswith("The evidence is a forest") and "UPDATE" in reading
    assert "UPDATE" not in flat.system and "later" not in flat.system
    values = {"context": "CTX", "question_block": "Q", "format_instruction": "F"}
    flat_user = flat.render(**values)[-1]["content"]
    forest_user = forest.render(**values)[-1]["content"]
    assert flat_user.replace("Evidence messages, most relevant first:", "H") == \
        forest_user.replace("Evidence forest:", "H")
