"""Conversations (list, tree, delete) and their artifacts (read-only)."""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Query, Response
from fastapi.exceptions import RequestValidationError

from ..settings.projects import PROJECT_NAME_PATTERN
from .auth import Caller, caller
from .deps import MAX_INT, error_docs
from .models import (
    ArtifactDetail,
    ArtifactDiff,
    ArtifactList,
    ArtifactSummary,
    ArtifactVersion,
    ArtifactVersions,
    BranchPage,
    ConversationInfo,
    ConversationPage,
    ConversationTree,
    MessageInfo,
)

ARTIFACTS = "/conversations/{conversation_id}/artifacts"

router = APIRouter()
conversations = APIRouter(prefix="/conversations", tags=["conversations"])
artifacts = APIRouter(prefix=ARTIFACTS, tags=["artifacts"])

CallerDep = Depends(caller)


# --- conversations -----------------------------------------------------------------------------


@conversations.get("", response_model=ConversationPage, responses=error_docs())
async def list_conversations(
    limit: int = Query(20, ge=1, le=100),
    offset: int = Query(0, ge=0, le=MAX_INT),
    project: str = Query(  # type: ignore[assignment]  # `str = None`: the schema says string
        None, pattern=PROJECT_NAME_PATTERN, description="Only this project's conversations"
    ),
    caller: Caller = CallerDep,
) -> ConversationPage:
    """Your conversations, most recently active first."""
    rows = await caller.client.conversations.list(
        user_id=caller.user, limit=limit, offset=offset, project=project
    )
    total = await caller.client.conversations.count(user_id=caller.user, project=project)
    items = [ConversationInfo(**{k: r[k] for k in ConversationInfo.model_fields}) for r in rows]
    return ConversationPage(items=items, total=total, limit=limit, offset=offset)


@conversations.get("/{conversation_id}", response_model=ConversationTree, responses=error_docs(404))
async def get_conversation(conversation_id: str, caller: Caller = CallerDep) -> ConversationTree:
    """The conversation as a message tree; `active` marks the current branch."""
    tree = await caller.client.conversations.tree(conversation_id, user_id=caller.user)
    tree.pop("user_id", None)
    return ConversationTree.model_validate(tree)


@conversations.get(
    "/{conversation_id}/branch", response_model=BranchPage, responses=error_docs(404)
)
async def get_branch(
    conversation_id: str,
    limit: int = Query(20, ge=1, le=100),
    before: str | None = Query(None, max_length=64, description="`before` of the previous page"),
    caller: Caller = CallerDep,
) -> BranchPage:
    """A page of the active branch, newest first: its cost does not grow with the
    conversation (the whole tree is `GET /conversations/{id}`)."""
    try:
        page = await caller.client.conversations.branch(
            conversation_id, limit=limit, before=before, user_id=caller.user
        )
    except ValueError as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("query", "before"), "msg": str(exc), "input": before}]
        ) from None
    return BranchPage(
        messages=[MessageInfo.model_validate(m) for m in page.messages], before=page.before
    )


@conversations.delete("/{conversation_id}", status_code=204, responses=error_docs(404))
async def delete_conversation(conversation_id: str, caller: Caller = CallerDep) -> Response:
    """Delete a conversation, its messages, events, artifacts and checkpoints. Runs still in
    progress in it are cancelled first."""
    await caller.client.conversations.delete(conversation_id, user_id=caller.user)
    return Response(status_code=204)


# --- artifacts ---------------------------------------------------------------------------------


@artifacts.get("", response_model=ArtifactList, responses=error_docs(404))
async def list_artifacts(conversation_id: str, caller: Caller = CallerDep) -> ArtifactList:
    await caller.conversation(conversation_id)
    rows = await caller.client.artifacts.list(conversation_id)
    return ArtifactList(
        conversation_id=conversation_id, artifacts=[ArtifactSummary(**r) for r in rows]
    )


@artifacts.get("/{artifact_id}", response_model=ArtifactDetail, responses=error_docs(404))
async def get_artifact(
    conversation_id: str,
    artifact_id: str,
    version: int | None = Query(None, ge=1, le=MAX_INT, description="Default: the current version"),
    caller: Caller = CallerDep,
) -> ArtifactDetail:
    await caller.conversation(conversation_id)
    return ArtifactDetail(**await caller.client.artifacts.get(conversation_id, artifact_id, version))


@artifacts.get("/{artifact_id}/versions", response_model=ArtifactVersions, responses=error_docs(404))
async def artifact_versions(
    conversation_id: str, artifact_id: str, caller: Caller = CallerDep
) -> ArtifactVersions:
    await caller.conversation(conversation_id)
    rows = await caller.client.artifacts.versions(conversation_id, artifact_id)
    return ArtifactVersions(artifact_id=artifact_id, versions=[ArtifactVersion(**r) for r in rows])


@artifacts.get("/{artifact_id}/diff", response_model=ArtifactDiff, responses=error_docs(404))
async def artifact_diff(
    conversation_id: str,
    artifact_id: str,
    from_version: int = Query(..., alias="from", ge=1, le=MAX_INT),
    to_version: int | None = Query(
        None, alias="to", ge=1, le=MAX_INT, description="Default: the current version"
    ),
    caller: Caller = CallerDep,
) -> ArtifactDiff:
    """Unified diff between two versions."""
    await caller.conversation(conversation_id)
    client = caller.client
    if to_version is None:
        current: int = (await client.artifacts.get(conversation_id, artifact_id))["version"]
        to_version = current
    diff = await client.artifacts.diff(conversation_id, artifact_id, from_version, to_version)
    return ArtifactDiff(
        artifact_id=artifact_id, from_version=from_version, to_version=to_version, diff=diff
    )


@artifacts.get(
    "/{artifact_id}/export",
    response_class=Response,
    responses={
        200: {"content": {"text/markdown": {}}, "description": "A Markdown file"},
        **error_docs(404, streaming=True),
    },
)
async def export_artifact(
    conversation_id: str,
    artifact_id: str,
    version: int | None = Query(None, ge=1, le=MAX_INT),
    caller: Caller = CallerDep,
) -> Response:
    """The artifact as a standalone Markdown download."""
    await caller.conversation(conversation_id)
    text = await caller.client.artifacts.export(conversation_id, artifact_id, version)
    filename = re.sub(r"[^A-Za-z0-9_.-]", "_", artifact_id) or "artifact"
    return Response(
        text,
        media_type="text/markdown; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}.md"'},
    )


router.include_router(conversations)
router.include_router(artifacts)
