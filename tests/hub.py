"""A Hugging Face cache laid out as `hf download` leaves it, with a small tokenizer of our own
staged under a model's hub id (no model is downloaded in tests)."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

REVISION = "0" * 40


def stage_tokenizer(hf_home: Path, repo_id: str, words: list[str]) -> Path:
    """`HF_HOME/hub/models--<org>--<name>/snapshots/<rev>/tokenizer.json`, one token per
    word of `words` (others unknown), with `refs/main` naming the snapshot."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    tokenizer = Tokenizer(models.WordLevel(
        {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}, "[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(snapshot / "tokenizer.json"))
    return snapshot / "tokenizer.json"
