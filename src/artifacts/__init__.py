"""Artifacts: versioned documents of a conversation, in one place.

- `service`: `ArtifactService`, the write path (create, replace, rewrite under an optimistic
  lock), the version rules and the read path (list, get, versions, diff, Markdown export);
- `edit`: replacing one quoted passage, exactly or approximately, and when that is refused;
- `fuzzy`: finding a nearly-right quotation in a document (rapidfuzz);
- `rules`: what ids, titles and content types may be;
- `errors`: what can go wrong, with messages written for the model;
- `render`: diffs and Markdown export formatting.

The agents' tools (`artifactflow.tools.builtin.artifacts`) and the CLI and HTTP layers all go
through `ArtifactService`; the store (`AppStore`) only persists rows. A leaf of the package:
it imports only `errors` (the store comes in as a parameter), so the tools can use it without
reaching into the run engine.
"""

from __future__ import annotations

from .edit import AMBIGUITY_MARGIN, FUZZY_THRESHOLD, MIN_FUZZY_CHARS, Replacement, replace_once
from .errors import (
    ArtifactError,
    ArtifactExistsError,
    ArtifactNotFoundError,
    EditMatchError,
    InvalidArtifactError,
    StaleArtifactError,
)
from .fuzzy import FuzzyMatch, find_closest, similarity
from .render import MARKDOWN_TYPES, fence_language, fenced
from .rules import DEFAULT_CONTENT_TYPE
from .service import ArtifactChange, ArtifactService

__all__ = [
    "AMBIGUITY_MARGIN",
    "DEFAULT_CONTENT_TYPE",
    "FUZZY_THRESHOLD",
    "MARKDOWN_TYPES",
    "MIN_FUZZY_CHARS",
    "ArtifactChange",
    "ArtifactError",
    "ArtifactExistsError",
    "ArtifactNotFoundError",
    "ArtifactService",
    "EditMatchError",
    "FuzzyMatch",
    "InvalidArtifactError",
    "Replacement",
    "StaleArtifactError",
    "fence_language",
    "fenced",
    "find_closest",
    "replace_once",
    "similarity",
]
