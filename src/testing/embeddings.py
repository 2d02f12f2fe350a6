"""`/v1/embeddings` of the scripted server: deterministic vectors without a model.

Each word of a text (lower-cased, its first five letters, so "deploys" and "deployed" agree)
is hashed to a signed position of a `dims`-long vector, and the sum is normalised: texts that
share words point the same way, others are nearly orthogonal. Enough for tests and
benchmarks of code that calls an OpenAI-compatible embeddings endpoint (request and response
shapes, batching, errors); it does not understand paraphrases.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

DEFAULT_DIMS = 384
_WORD = re.compile(r"\w+")


def fake_embedding(text: str, dims: int = DEFAULT_DIMS) -> list[float]:
    vector = [0.0] * dims
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word[:5].encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dims
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def embeddings_body(request: dict[str, Any], dims: int = DEFAULT_DIMS) -> dict[str, Any]:
    """The OpenAI `/v1/embeddings` response to `request` (`input`: a string or a list)."""
    inputs = request.get("input")
    texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
    if not all(isinstance(t, str) for t in texts):
        raise ValueError("input must be a string or a list of strings")
    data = [
        {"object": "embedding", "index": i, "embedding": fake_embedding(t, dims)} for i, t in enumerate(texts)
    ]
    tokens = sum(len(_WORD.findall(t)) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": request.get("model") or "scripted-embedding",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
