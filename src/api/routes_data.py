"""Conversations (list, tree, delete) and their artifacts (read-only)."""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Query, Response

from ..client import Client
from .auth import current_user, owned_conversation
from .deps import MAX_INT, error_docs, get_client
from .models import (
    ArtifactDetail,
    ArtifactDiff,
    ArtifactList,
    ArtifactSummary,
    ArtifactVersion,
    ArtifactVersions,
    ConversationInfo,
    ConversationPage,
    ConversationTree,
)

router = APIRouter()

User = Depends(current_user)
ClientDep = Depends(get_client)


# --- conversations -----------------------------------------------------------------------------


@router.get(
    "/conversations",
    response_model=ConversationPage,
    responses=error_docs(),
    tags=["conversations"],
)
async def list_conversations(
    limit: int = Query(20, ge=1, le=100),
    offset: int = Query(0, ge=0, le=MAX_INT),
    user: str | None = User,
    client: Client = ClientDep,
) -> ConversationPage:
    """Your conversations, most recently active first."""
    rows = await client.conversations.list(user_id=user, limit=limit, offset=offset)
    total = await client.conversations.count(user_id=user)
    items = [ConversationInfo(**{k: r[k] for k in ConversationInfo.model_fields}) for r in rows]
    return ConversationPage(items=items, total=total, limit=limit, offset=offset)


@router.get(
    "/conversations/{conversation_id}",
    response_model=ConversationTree,
    responses=error_docs(404),
    tags=["conversations"],
)
async def get_conversation(
    conversation_id: str, user: str | None = User, client: Client = ClientDep
) -> ConversationTree:
    """The conversation as a message tree; `active` marks the current branch."""
    tree = await client.conversations.tree(conversation_id, user_id=user)
    tree.pop("user_id", None)
    return ConversationTree.model_validate(tree)


@router.delete(
    "/conversations/{conversation_id}",
    status_code=204,
    responses=error_docs(404),
    tags=["conversations"],
)
async def delete_conversation(
    conversation_id: str, user: str | None = User, client: Client = ClientDep
) -> Response:
    """Delete a conversation, its messages, events, artifacts and checkpoints. Runs still in
    progress in it are cancelled first."""
    await client.conversations.delete(conversation_id, user_id=user)
    return Response(status_code=204)


# --- artifacts ---------------------------------------------------------------------------------

ARTIFACTS = "/conversations/{conversation_id}/artifacts"


@router.get(ARTIFACTS, response_model=ArtifactList, responses=error_docs(404), tags=["artifacts"])
async def list_artifacts(
    conversation_id: str, user: str | None = User, client: Client = ClientDep
) -> ArtifactList:
    await owned_conversation(client, conversation_id, user)
    rows = await client.artifacts.list(conversation_id)
    return ArtifactList(
        conversation_id=conversation_id, artifacts=[ArtifactSummary(**r) for r in rows]
    )


@router.get(
    ARTIFACTS + "/{artifact_id}",
    response_model=ArtifactDetail,
    responses=error_docs(404),
    tags=["artifacts"],
)
async def get_artifact(
    conversation_id: str,
    artifact_id: str,
    version: int | None = Query(None, ge=1, le=MAX_INT, description="Default: the current version"),
    user: str | None = User,
    client: Client = ClientDep,
) -> ArtifactDetail:
    await owned_conversation(client, conversation_id, user)
    return ArtifactDetail(**await client.artifacts.get(conversation_id, artifact_id, version))


@router.get(
    ARTIFACTS + "/{artifact_id}/versions",
    response_model=ArtifactVersions,
    responses=error_docs(404),
    tags=["artifacts"],
)
async def artifact_versions(
    conversation_id: str,
    artifact_id: str,
    user: str | None = User,
    client: Client = ClientDep,
) -> ArtifactVersions:
    await owned_conversation(client, conversation_id, user)
    rows = await client.artifacts.versions(conversation_id, artifact_id)
    return ArtifactVersions(artifact_id=artifact_id, versions=[ArtifactVersion(**r) for r in rows])


@router.get(
    ARTIFACTS + "/{artifact_id}/diff",
    response_model=ArtifactDiff,
    responses=error_docs(404),
    tags=["artifacts"],
)
async def artifact_diff(
    conversation_id: str,
    artifact_id: str,
    from_version: int = Query(..., alias="from", ge=1, le=MAX_INT),
    to_version: int | None = Query(
        None, alias="to", ge=1, le=MAX_INT, description="Default: the current version"
    ),
    user: str | None = User,
    client: Client = ClientDep,
) -> ArtifactDiff:
    """Unified diff between two versions."""
    await owned_conversation(client, conversation_id, user)
    if to_version is None:
        current: int = (await client.artifacts.get(conversation_id, artifact_id))["version"]
        to_version = current
    diff = await client.artifacts.diff(conversation_id, artifact_id, from_version, to_version)
    return ArtifactDiff(
        artifact_id=artifact_id, from_version=from_version, to_version=to_version, diff=diff
    )


@router.get(
    ARTIFACTS + "/{artifact_id}/export",
    response_class=Response,
    responses={
        200: {"content": {"text/markdown": {}}, "description": "A Markdown file"},
        **error_docs(404, streaming=True),
    },
    tags=["artifacts"],
)
async def export_artifact(
    conversation_id: str,
    artifact_id: str,
    version: int | None = Query(None, ge=1, le=MAX_INT),
    user: str | None = User,
    client: Client = ClientDep,
) -> Response:
    """The artifact as a standalone Markdown download."""
    await owned_conversation(client, conversation_id, user)
    text = await client.artifacts.export(conversation_id, artifact_id, version)
    filename = re.sub(r"[^A-Za-z0-9_.-]", "_", artifact_id) or "artifact"
    return Response(
        text,
        media_type="text/markdown; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}.md"'},
    )
