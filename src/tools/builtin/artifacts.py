"""Artifact tools: the model's handle on versioned documents.

Thin wrappers over `ArtifactService` (`artifactflow.artifacts`), which holds every rule:
ids and titles, versions, the optimistic lock, exact and approximate edits. A tool declares its
arguments for the model, calls the service, turns an `ArtifactError` into a failed `ToolResult`
(the error's message, its details as metadata), and reports each written change as an
`artifact_created` / `artifact_updated` event.

Calls of one response on the same artifact id run one after another in call order
(`serial_key`), so a create followed by an update of that artifact in one response works.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, TypedDict

from ...artifacts import (
    DEFAULT_CONTENT_TYPE,
    FUZZY_THRESHOLD,
    ArtifactChange,
    ArtifactError,
    ArtifactService,
    FuzzyMatch,
    find_closest,
    similarity,
)
from ...events.payloads import ArtifactCreatedData, ArtifactUpdatedData
from ..base import ToolResult
from ..context import ToolContext
from ..decorator import tool

logger = logging.getLogger(__name__)

READ_MAX_RESULT_CHARS = 100_000
ARTIFACT_KEY = "artifact:{id}"  # calls on one artifact id run in call order (create, then update)
_FUZZY_NOTE = (
    "old_str was not found exactly; the most similar text (shown in 'replaced') was replaced. "
    "Check that this was the intended text."
)
# What a write's result reports (data and metadata), in this order.
_CREATED = ("artifact_id", "title", "version", "content_type", "size")
_UPDATED = ("artifact_id", "version", "previous_version", "change", "title", "size")


def _service(ctx: ToolContext) -> ArtifactService:
    return ArtifactService(ctx.service("store"))


def _failure(error: ArtifactError) -> ToolResult:
    return ToolResult.fail(str(error), **error.details)


class _Identity(TypedDict):
    artifact_id: str
    title: str
    version: int
    content_type: str


def _identity(change: ArtifactChange) -> _Identity:
    """The fields every artifact event carries: which artifact, which version, what it is."""
    return _Identity(
        artifact_id=change.artifact_id, title=change.title, version=change.version,
        content_type=change.content_type,
    )


async def _emit(ctx: ToolContext, data: ArtifactCreatedData | ArtifactUpdatedData) -> None:
    """Report an artifact change; a failing listener must not turn a done write into an error."""
    if ctx.emit is None:
        return
    try:
        outcome = ctx.emit(data)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:  # pragma: no cover - defensive
        logger.exception("emitting %s for artifact %s failed", data.type, data.artifact_id)


async def _updated(ctx: ToolContext, change: ArtifactChange, **extra: Any) -> ToolResult:
    """The result (and event) of a write that made a new version."""
    await _emit(ctx, ArtifactUpdatedData(
        **_identity(change),
        previous_version=change.previous_version or 0,  # always set after an update
        change=change.change,
    ))
    return _written(change, _UPDATED, **extra)


def _written(change: ArtifactChange, fields: tuple[str, ...], **extra: Any) -> ToolResult:
    """A write's result: these fields of the change (then `extra`), as data and metadata."""
    data = {name: getattr(change, name) for name in fields} | extra
    return ToolResult(success=True, data=data, metadata=dict(data))


@tool(permission="auto", serial_key=ARTIFACT_KEY)
async def create_artifact(
    id: str,
    title: str,
    content: str,
    ctx: ToolContext,
    content_type: str = DEFAULT_CONTENT_TYPE,
) -> ToolResult:
    """Create a new artifact: a versioned document (report, plan, draft, data) in this
    conversation that you and the user can read and that later calls can edit. Fails if the id
    is already taken; then change the existing artifact with update_artifact or rewrite_artifact.

    Args:
        id: Short stable identifier: letters, digits, '_', '-' and '.', at most 128 characters (e.g. 'report', 'task_plan').
        title: Human-readable title shown to the user.
        content: The full initial content.
        content_type: MIME type of the content, 'text/markdown' unless it is something else (e.g. 'text/plain', 'application/json', 'text/csv').
    """
    try:
        change = await _service(ctx).create(
            ctx.conversation_id,
            id,
            title=title,
            content=content,
            content_type=content_type,
            agent=ctx.agent,
            message_id=ctx.message_id,
        )
    except ArtifactError as error:
        return _failure(error)
    await _emit(ctx, ArtifactCreatedData(**_identity(change)))
    return _written(change, _CREATED)


@tool(permission="auto", serial_key=ARTIFACT_KEY)
async def update_artifact(id: str, old_str: str, new_str: str, ctx: ToolContext) -> ToolResult:
    """Edit part of an artifact: replace the text old_str with new_str, creating a new version.
    old_str should be copied exactly from the current content (read_artifact shows it) and must
    occur exactly once: include enough surrounding lines to make it unique. If it is not found
    exactly, a near match (similarity >= 0.85, e.g. a typo or different whitespace) is replaced
    instead and the result says what was replaced; otherwise the error shows the closest text.
    To delete text, pass an empty new_str. To replace everything, use rewrite_artifact.

    Args:
        id: Id of the artifact to edit.
        old_str: The exact text to replace (must be non-empty and occur once in the current version).
        new_str: The replacement text (may be empty to delete old_str).
    """
    try:
        change = await _service(ctx).replace(
            ctx.conversation_id, id, old_str, new_str, agent=ctx.agent, message_id=ctx.message_id
        )
    except ArtifactError as error:
        return _failure(error)
    edit = change.edit
    assert edit is not None  # replace always reports where it edited
    if edit.match == "exact":
        return await _updated(ctx, change, match="exact", line=edit.line)
    return await _updated(
        ctx,
        change,
        match="fuzzy",
        similarity=round(edit.similarity, 3),
        replaced=edit.replaced,
        line=edit.line,
        note=_FUZZY_NOTE,
    )


@tool(permission="auto", serial_key=ARTIFACT_KEY)
async def rewrite_artifact(
    id: str, content: str, ctx: ToolContext, title: str | None = None
) -> ToolResult:
    """Replace the whole content of an existing artifact (and optionally its title), creating a
    new version; earlier versions stay readable. Prefer update_artifact for small edits.

    Args:
        id: Id of the artifact to replace.
        content: The complete new content.
        title: New title; omit to keep the current one.
    """
    try:
        change = await _service(ctx).rewrite(
            ctx.conversation_id,
            id,
            content,
            title=title,
            agent=ctx.agent,
            message_id=ctx.message_id,
        )
    except ArtifactError as error:
        return _failure(error)
    if change.change == "none":
        data = {
            "artifact_id": change.artifact_id,
            "version": change.version,
            "change": "none",
            "title": change.title,
            "note": "the content and title are already exactly this; no new version was written",
        }
        return ToolResult(success=True, data=data, metadata=dict(data))
    return await _updated(ctx, change)


@tool(permission="auto", max_result_chars=READ_MAX_RESULT_CHARS, serial_key=ARTIFACT_KEY)
async def read_artifact(id: str, ctx: ToolContext, version: int | None = None) -> ToolResult:
    """Read an artifact's content: the current version, or an earlier one. The answer starts
    with one header line (id, version, title, content type) followed by the exact content.

    Args:
        id: Id of the artifact to read.
        version: Version number to read (1 is the first); omit for the current version.
    """
    try:
        art = await _service(ctx).get(ctx.conversation_id, id, version)
    except ArtifactError as error:
        return _failure(error)
    shown, current, content = art["version"], art["current_version"], art["content"]
    metadata = {
        "artifact_id": id,
        "version": shown,
        "current_version": current,
        "title": art["title"],
        "content_type": art["content_type"],
        "size": len(content),
    }
    if shown != current:
        metadata["change"] = art.get("change")
    state = "current" if shown == current else f"current is v{current}"
    header = (
        f"[artifact '{id}' v{shown} ({state}) · {art['content_type']} · "
        f"{len(content)} chars · title: {art['title']}]"
    )
    return ToolResult(success=True, data=f"{header}\n{content}", metadata=metadata)


@tool(permission="auto")
async def list_artifacts(ctx: ToolContext) -> ToolResult:
    """List the artifacts of this conversation: id, title, current version, content type and
    size in characters. Use read_artifact to see one's content.
    """
    summaries = await _service(ctx).list(ctx.conversation_id)
    items = [
        {
            "id": s["artifact_id"],
            "title": s["title"],
            "version": s["version"],
            "content_type": s["content_type"],
            "size": s["size"],
        }
        for s in summaries
    ]
    return ToolResult(success=True, data=items, metadata={"count": len(items)})


ARTIFACT_TOOLS = [create_artifact, update_artifact, rewrite_artifact, read_artifact, list_artifacts]

__all__ = [
    "ARTIFACT_TOOLS",
    "FUZZY_THRESHOLD",
    "FuzzyMatch",
    "create_artifact",
    "find_closest",
    "list_artifacts",
    "read_artifact",
    "rewrite_artifact",
    "similarity",
    "update_artifact",
]
