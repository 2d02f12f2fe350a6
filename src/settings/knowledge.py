"""`knowledge:` in artifactflow.yaml: knowledge bases (retrieval-augmented generation, docs/memory.md).

```yaml
knowledge:
  base: default            # the base `knowledge add` and `knowledge_search` use by default
  inject: false            # put the best chunks of `inject_bases` in the recalled section
  inject_bases: [default]
  inject_limit: 5          # chunks at most (the profile's token budget still applies)
  index_artifacts: false   # index every saved artifact version in base `artifacts`
  chunk_chars: 1500        # target chunk size (paragraphs are kept whole when they fit)
  chunk_overlap: 200
```
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class KnowledgeSettings(BaseModel):
    base: str = Field(default="default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    inject: bool = False
    inject_bases: list[str] = ["default"]
    inject_limit: int = Field(default=5, ge=1, le=50)
    index_artifacts: bool = False
    chunk_chars: int = Field(default=1500, ge=200, le=4000)
    chunk_overlap: int = Field(default=200, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> KnowledgeSettings:
        if self.chunk_overlap >= self.chunk_chars:
            raise ValueError("chunk_overlap must be smaller than chunk_chars")
        return self
