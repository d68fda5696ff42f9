"""all-MiniLM-L6-v2's forward pass in plain torch, on the packaged weights and tokenizer.

What sentence-transformers computes for this model (six BERT layers, mean pooling over the
attention mask, L2 normalisation), without importing it: with transformers, scikit-learn and
scipy behind it, that import alone costs about 5 s of CPU in every process that embeds (each
stage actor), where this module needs only torch, safetensors and tokenizers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer


class MiniLM:
    """A BERT sentence encoder loaded from a sentence-transformers model folder."""

    def __init__(self, folder: Path, device: str = "cpu") -> None:
        config = json.loads((folder / "config.json").read_text())
        self.dim: int = config["hidden_size"]
        self.layers: int = config["num_hidden_layers"]
        self.heads: int = config["num_attention_heads"]
        self.eps: float = config["layer_norm_eps"]
        self.weights = load_file(str(folder / "model.safetensors"), device=device)
        self.device = device
        sentence_config = json.loads((folder / "sentence_bert_config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(sentence_config["max_seq_length"])
        self.tokenizer.enable_padding(pad_id=config["pad_token_id"])  # to the batch's longest

    def encode(self, texts: Sequence[str], batch_size: int = 64,
               progress: bool = False) -> np.ndarray:
        """L2-normalised float32 vectors of `texts`, in order (batched by length)."""
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dim), np.float32)
        with torch.inference_mode():
            for batch in _batches(order, batch_size, progress):
                ids, mask = self._tokens([texts[i] for i in batch])
                out[batch] = self._forward(ids, mask).cpu().numpy()
        return out

    def _tokens(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        encodings = self.tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encodings], device=self.device)
        mask = torch.tensor([e.attention_mask for e in encodings], device=self.device)
        return ids, mask

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        w = self.weights
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][: ids.shape[1]]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        # padding gets the lowest score, so softmax gives it no weight
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for i in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{i}.")
        weights = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, dim=-1)

    def _layer(self, x: torch.Tensor, bias: torch.Tensor, prefix: str) -> torch.Tensor:
        q, k, v = (self._split(self._linear(x, f"{prefix}attention.self.{name}"))
                   for name in ("query", "key", "value"))
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        context = context.transpose(1, 2).reshape(x.shape)
        x = self._norm(x + self._linear(context, f"{prefix}attention.output.dense"),
                       f"{prefix}attention.output.LayerNorm")
        hidden = F.gelu(self._linear(x, f"{prefix}intermediate.dense"))
        return self._norm(x + self._linear(hidden, f"{prefix}output.dense"),
                          f"{prefix}output.LayerNorm")

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, tokens, hidden) -> (batch, heads, tokens, hidden / heads)."""
        batch, tokens, hidden = x.shape
        return x.view(batch, tokens, self.heads, hidden // self.heads).transpose(1, 2)

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.weights[f"{name}.weight"], self.weights[f"{name}.bias"])

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.weights[f"{name}.weight"],
                            self.weights[f"{name}.bias"], self.eps)


def _batches(order: list[int], size: int, progress: bool) -> Iterator[list[int]]:
    total = math.ceil(len(order) / size)
    for n, start in enumerate(range(0, len(order), size), 1):
        if progress and (n == total or n % max(1, total // 10) == 0):
            print(f"embedding batch {n}/{total}", flush=True)
        yield order[start:start + size]
