"""What can go wrong with an artifact, as exceptions that carry the facts.

Each error's message says what happened and what to do next, written for the model: the agents
are the only writers, and the tool wrappers pass the message on unchanged as a failed
`ToolResult`, with `details` as its metadata. The classes slot into the library's tree, so the
HTTP layer maps a missing artifact to 404 (`NotFoundError`) and a lost race stays an
`ArtifactConflictError`.
"""

from __future__ import annotations

from typing import Any

from ..errors import ArtifactConflictError, ArtifactFlowError, NotFoundError, UserError


class ArtifactError(ArtifactFlowError):
    """Base of the artifact errors; `details` are the facts behind the message."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details  # open: artifact_id, current_version, …


class InvalidArtifactError(ArtifactError, UserError):
    """An argument breaks a rule: the id, title or content type, or an empty or no-op edit."""


class ArtifactNotFoundError(ArtifactError, NotFoundError):
    """No artifact with that id in the conversation, or no such version of it."""


class ArtifactExistsError(ArtifactError, ArtifactConflictError):
    """`create` with an id the conversation already uses."""


class StaleArtifactError(ArtifactError, ArtifactConflictError):
    """Another writer changed the artifact between this change's read and its write."""


class EditMatchError(ArtifactError):
    """The text to replace matches no place, or several places, closely enough."""


__all__ = [
    "ArtifactError",
    "ArtifactExistsError",
    "ArtifactNotFoundError",
    "EditMatchError",
    "InvalidArtifactError",
    "StaleArtifactError",
]
