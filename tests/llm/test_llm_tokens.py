"""Offline token counting with each backbone's tokenizer."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tests.hub import stage_tokenizer
from tmem_core import ConfigError, EngineError
from tmem_core.llm import check_tokenizers, count_tokens, get_backbone
from tmem_core.llm._tokens import (
    FALLBACK,
    REMEMBERED_CHARS,
    TOKENIZERS_ENV,
    count_chat_tokens,
    expected_tokenizers,
    remembered,
    tokenizer_counter,
    tokenizer_identity,
)
from tmem_core.llm._types import ChatMessage

TEXT = "Alice moved the launch to Friday, then rolled it back on 2024-03-02."


def test_cl100k_offline_counts_exactly() -> None:
    assert count_tokens("smollm2", "hello world") == 2
    assert count_tokens("gpt-5.5", TEXT) == count_tokens("smollm2", TEXT) > 10


def test_qwen_tokenizer_differs_from_cl100k() -> None:
    qwen = count_tokens("qwen3.5-27b", TEXT * 20)
    assert qwen > 0
    assert qwen != count_tokens("smollm2", TEXT * 20)


def test_hf_tokenizer_json_on_disk_is_used(tmp_path: Path) -> None:
    vocab = {"[UNK]": 0, "alice": 1, "bob": 2}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    backbone = dataclasses.replace(get_backbone("gemma4-31b"), tokenizer=f"hf:{tmp_path}")
    assert count_tokens(backbone, "alice bob alice bob carol") == 5  # one per word


def test_a_named_tokenizer_that_is_not_on_disk_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for spec in ("hf:/no/such/dir", "hf:google/gemma-4-31B-it"):
        backbone = dataclasses.replace(get_backbone("smollm2"), tokenizer=spec)
        with pytest.raises(ConfigError, match=r"not on disk .*HF_HOME: .*hf download"):
            count_tokens(backbone, TEXT)
        with pytest.raises(ConfigError, match=r"backbones\.smollm2\.tokenizer"):
            check_tokenizers([backbone])


def test_gemma_is_found_by_its_published_name_and_only_by_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hub ids are case-sensitive folder names in the cache: the built-in names the publisher's
    repo, google/gemma-4-31B-it."""
    gemma = get_backbone("gemma4-31b")
    assert gemma.model == "google/gemma-4-31B-it" == gemma.tokenizer.removeprefix("hf:")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "lower"))
    stage_tokenizer(tmp_path / "lower", "google/gemma-4-31b-it", ["alice"])
    with pytest.raises(ConfigError):
        check_tokenizers([gemma])
    monkeypatch.setenv("HF_HOME", str(tmp_path / "published"))
    stage_tokenizer(tmp_path / "published", "google/gemma-4-31B-it", ["alice", "bob"])
    check_tokenizers([gemma])
    assert count_tokens(gemma, "alice bob carol") == 3


def test_a_backbone_that_declares_no_tokenizer_counts_with_cl100k_named_as_the_fallback(
) -> None:
    undeclared = dataclasses.replace(get_backbone("smollm2"), tokenizer="")
    assert count_tokens(undeclared, TEXT) == count_tokens(
        dataclasses.replace(undeclared, tokenizer="cl100k"), TEXT)
    assert tokenizer_identity("") == FALLBACK and "no tokenizer declared" in FALLBACK
    assert tokenizer_identity("cl100k") == "cl100k"


def test_chat_count_adds_template_overhead() -> None:
    messages = [ChatMessage("system", "be brief"), ChatMessage("user", TEXT)]
    plain = count_tokens("smollm2", "be brief") + count_tokens("smollm2", TEXT)
    assert count_chat_tokens("smollm2", messages) == plain + 2 * 4 + 3


def _tokenizer_file(path: Path, words: list[str]) -> Path:
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, **{w: i + 1 for i, w in
                                                           enumerate(words)}}, "[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def test_a_node_whose_tokenizer_differs_from_the_drivers_refuses_to_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = _tokenizer_file(tmp_path / "tokenizer.json", ["alice", "bob"])
    backbone = dataclasses.replace(get_backbone("smollm2"), tokenizer=f"hf:{here}")
    env = expected_tokenizers([backbone])  # as the driver's node resolves them
    monkeypatch.setenv(TOKENIZERS_ENV, env[TOKENIZERS_ENV])  # a worker's environment
    expected = json.loads(env[TOKENIZERS_ENV])
    assert expected[backbone.tokenizer].startswith("tokenizer.json sha256:")
    assert count_tokens(backbone, "alice bob") == 2  # the same here: counts
    # another node, another file under the same name (another HF_HOME, another release)
    other = _tokenizer_file(tmp_path / "other.json", ["carol"])
    monkeypatch.setenv(TOKENIZERS_ENV, json.dumps({backbone.tokenizer: tokenizer_identity(
        f"hf:{other}")}))
    tokenizer_counter.cache_clear()
    with pytest.raises(EngineError, match="HF_HOME"):
        count_tokens(backbone, "alice bob")


@pytest.fixture(autouse=True)
def _no_expectations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test names its own expected tokenizers (none by default), restored after it."""
    monkeypatch.setenv(TOKENIZERS_ENV, "{}")
    tokenizer_counter.cache_clear()


def test_remembered_counts_are_the_counter_s_own_and_long_texts_are_counted_each_time(
) -> None:
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return len(text.split())

    counter = remembered(count)
    short, long = "a short line of text", "word " * (REMEMBERED_CHARS // 5 + 1)
    assert [counter(short) for _ in range(3)] == [5, 5, 5]
    assert [counter(long) for _ in range(2)] == [len(long.split())] * 2
    assert seen == [short, long, long]  # the short text counted once, the long one each time
    cl100k = tokenizer_counter("cl100k")
    texts = [f"message {i}: the team moved the launch to Friday" for i in range(50)]
    assert [cl100k(t) for t in texts * 2] == [count_tokens("smollm2", t) for t in texts * 2]
