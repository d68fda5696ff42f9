"""Re-encode a GGUF's weights for serving (e.g. the bundled Q4_1 SmolLM2 as Q8_0).

llama.cpp's CPU kernels batch Q8_0 and F16 matrices through its tiled GEMM path, while Q4_1
falls back to one dot product per row and sequence; so several parallel slots decode
together far faster with Q8_0 weights. Re-encoding an already-quantized file loses almost
nothing: each weight moves by at most half a Q8_0 step (1/254 of its block's largest
magnitude, a little more with the rounding of the block's fp16 scale).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tmem_core import ConfigError, allowed

if TYPE_CHECKING:  # imported where used: it is slow to import and needed once per model
    import gguf

WEIGHT_FORMATS = ("keep", "Q8_0", "F16")
"""`keep` serves the file as it is; the others re-encode every quantized matrix once."""

_FILE_TYPES = {"Q8_0": 7, "F16": 1}  # llama.cpp's LlamaFileType of a "mostly <format>" file
_Q8_BLOCK = 32


def requantize(source: Path, target: Path, weights: str) -> None:
    """Write `source` to `target` with its quantized matrices re-encoded as `weights`.

    Metadata and F32/F16 tensors (norms, biases) are copied unchanged.
    """
    if weights not in _FILE_TYPES:
        raise ConfigError("weights", f"unknown value {weights!r}; {allowed(sorted(_FILE_TYPES))}")
    import gguf

    reader = gguf.GGUFReader(str(source))
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(target), arch)
    for name, value in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            writer.add_file_type(_FILE_TYPES[weights])
            continue
        sub_type = value.types[-1] if len(value.types) > 1 else None
        writer.add_key_value(name, value.contents(), value.types[0], sub_type=sub_type)
    kept = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
    for tensor in reader.tensors:
        if tensor.tensor_type in kept:
            writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
            continue
        shape = tuple(int(n) for n in reversed(tensor.shape))  # numpy order, rows last
        matrix = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(shape)
        _add_encoded(writer, tensor.name, matrix, weights)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _add_encoded(writer: gguf.GGUFWriter, name: str, matrix: np.ndarray, weights: str
                 ) -> None:
    import gguf

    if weights == "F16":
        writer.add_tensor(name, matrix.astype(np.float16))
    elif matrix.shape[-1] % _Q8_BLOCK == 0:
        q8 = gguf.GGMLQuantizationType.Q8_0
        encoded = gguf.quants.quantize(matrix.astype(np.float32), q8)
        writer.add_tensor(name, encoded, raw_shape=encoded.shape, raw_dtype=q8)
    else:  # rows that do not split into Q8_0 blocks stay exact
        writer.add_tensor(name, matrix.astype(np.float32))
