"""What `ArtifactService` hands its readers (the tools, the facade, the HTTP API, the CLI).

TypedDicts: at run time they are the plain dicts that are serialised to JSON as they are.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class ArtifactSummary(TypedDict):
    """An artifact without its content (`ArtifactService.list`)."""

    artifact_id: str
    title: str
    content_type: str
    version: int
    size: int  # characters of content
    created_at: float
    updated_at: float


class ArtifactView(TypedDict):
    """One artifact at one version, with content (`ArtifactService.get`)."""

    artifact_id: str
    conversation_id: str
    title: str
    content_type: str
    content: str
    version: int
    current_version: int
    size: int
    created_at: float
    updated_at: float  # of that version
    change: NotRequired[str]  # a stored version asked for by number: how it was written
    agent: NotRequired[str | None]
    message_id: NotRequired[str | None]


class VersionSummary(TypedDict):
    """One version without its content (`ArtifactService.versions`)."""

    version: int
    title: str
    change: str
    agent: str | None
    message_id: str | None
    size: int
    created_at: float
