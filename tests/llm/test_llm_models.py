"""Model files: the bundled GGUF re-encoded for serving, once, with the same weights."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import gguf
import numpy as np
import pytest

from tmem_core import ConfigError
from tmem_core.llm import load_backbones
from tmem_core.llm._config import BUNDLED_SMOLLM2
from tmem_core.llm._gguf import requantize
from tmem_core.llm._models import bundled_gguf, serving_gguf


@pytest.fixture(scope="module")
def q8_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("gguf") / "smol.Q8_0.gguf"
    requantize(bundled_gguf(), target, "Q8_0")
    return target


def test_requantize_reencodes_every_quantized_matrix_and_keeps_metadata(q8_file: Path) -> None:
    source, out = gguf.GGUFReader(str(bundled_gguf())), gguf.GGUFReader(str(q8_file))
    kinds = Counter(t.tensor_type.name for t in out.tensors)
    assert set(kinds) == {"Q8_0", "F32"}
    assert kinds["F32"] == sum(t.tensor_type.name == "F32" for t in source.tensors)
    assert [t.name for t in out.tensors] == [t.name for t in source.tensors]
    for key in ("tokenizer.ggml.tokens", "tokenizer.chat_template", "llama.block_count"):
        assert out.fields[key].contents() == source.fields[key].contents()
    assert out.fields["general.file_type"].contents() == 7  # mostly Q8_0


def test_requantized_weights_match_the_shipped_ones(q8_file: Path) -> None:
    source = {t.name: t for t in gguf.GGUFReader(str(bundled_gguf())).tensors}
    for tensor in gguf.GGUFReader(str(q8_file)).tensors[:12]:
        before = gguf.quants.dequantize(source[tensor.name].data, source[tensor.name].tensor_type)
        after = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        blocks = before.reshape(-1, 32)
        # half a Q8_0 step (1/254 of the block's largest magnitude), plus the fp16 scale's
        # own rounding (relative 2**-11, times up to 127 steps): at most ~1.13 half-steps
        bound = np.abs(blocks).max(axis=1, keepdims=True) / 254 * 1.13 + 1e-6
        assert np.all(np.abs(after.reshape(-1, 32) - blocks) <= bound)


def test_requantize_rejects_an_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Q8_0"):
        requantize(bundled_gguf(), tmp_path / "x.gguf", "Q3_X")


def test_serving_gguf_converts_once_into_the_cache(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMEM_CACHE_DIR", str(tmp_path))
    assert serving_gguf(BUNDLED_SMOLLM2, "keep") == bundled_gguf()
    first = serving_gguf(BUNDLED_SMOLLM2, "Q8_0")
    assert first.is_relative_to(tmp_path) and first.name.endswith(".Q8_0.gguf")
    stamp = first.stat().st_mtime_ns
    assert serving_gguf(BUNDLED_SMOLLM2, "Q8_0") == first
    assert first.stat().st_mtime_ns == stamp  # reused, not rewritten
    assert not list(first.parent.parent.glob(".*"))  # no temporary folder left behind


def test_a_weights_typo_names_the_key_and_the_choices(tmp_path: Path) -> None:
    config = tmp_path / "b.toml"
    config.write_text('[backbones.smollm2.engine]\nweights = "q8"\n')
    with pytest.raises(ConfigError, match=r"engine': weights: unknown value 'q8'; allowed: .*Q8_0"):
        load_backbones(config)
