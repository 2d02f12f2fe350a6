"""The rules an artifact's id, title and content type follow, checked before anything is written.

Ids are short and URL- and file-name-safe because the API and the CLI put them in paths.
Content types are MIME types; a few plain words the models like to use ('markdown', 'json')
are accepted as aliases.
"""

from __future__ import annotations

import re

from .errors import InvalidArtifactError

MAX_ID_LENGTH = 128
MAX_TITLE_LENGTH = 500
MAX_CONTENT_TYPE_LENGTH = 100
DEFAULT_CONTENT_TYPE = "text/markdown"

_ID_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_TOKEN = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+\-]*"
_CONTENT_TYPE_RE = re.compile(rf"^{_TOKEN}/{_TOKEN}$")
_CONTENT_TYPE_ALIASES = {
    "markdown": "text/markdown",
    "md": "text/markdown",
    "text": "text/plain",
    "txt": "text/plain",
    "plain": "text/plain",
    "json": "application/json",
    "html": "text/html",
    "csv": "text/csv",
    "yaml": "application/yaml",
    "python": "text/x-python",
}


def check_id(artifact_id: str) -> str:
    """The id unchanged, or `InvalidArtifactError` saying what is wrong with it."""
    if not artifact_id:
        raise InvalidArtifactError("id must not be empty")
    if len(artifact_id) > MAX_ID_LENGTH:
        raise InvalidArtifactError(
            f"id is {len(artifact_id)} characters long; the limit is {MAX_ID_LENGTH}"
        )
    if not _ID_RE.match(artifact_id):
        raise InvalidArtifactError(
            f"invalid id {artifact_id!r}: use only letters, digits, '_', '-' and '.' "
            "(for example 'report', 'task_plan' or 'notes-v2.md')"
        )
    return artifact_id


def check_title(title: str) -> str:
    """The title without surrounding whitespace, or `InvalidArtifactError`."""
    if not title.strip():
        raise InvalidArtifactError("title must not be empty")
    if len(title) > MAX_TITLE_LENGTH:
        raise InvalidArtifactError(
            f"title is {len(title)} characters long; the limit is {MAX_TITLE_LENGTH}"
        )
    return title.strip()


def normalize_content_type(value: str) -> str:
    """The lower-case MIME type (aliases resolved), or `InvalidArtifactError`."""
    cleaned = value.strip().lower()
    cleaned = _CONTENT_TYPE_ALIASES.get(cleaned, cleaned)
    if not cleaned:
        raise InvalidArtifactError("content_type must not be empty (for example 'text/markdown')")
    if len(cleaned) > MAX_CONTENT_TYPE_LENGTH or not _CONTENT_TYPE_RE.match(cleaned):
        raise InvalidArtifactError(
            f"invalid content_type {value!r}: give a MIME type such as 'text/markdown', "
            "'text/plain' or 'application/json'"
        )
    return cleaned
