"""`GET /api/v1/assistants`: the assistants a message can be sent to (`assistant` in
`POST /chat`), for the page's picker. Created and changed through the Agent Protocol
(`POST /assistants`); workflows have their own routes and are not listed here."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..protocol.assistants_store import all_views
from ..protocol.service import Protocol
from .auth import Caller, caller
from .deps import error_docs

router = APIRouter(tags=["assistants"])


class AssistantSummary(BaseModel):
    assistant_id: str
    name: str
    graph_id: str
    description: str | None
    version: int
    built_in: bool


class AssistantList(BaseModel):
    assistants: list[AssistantSummary]


@router.get(
    "/assistants", response_model=AssistantList, responses=error_docs(), summary="Assistants to chat with"
)
async def list_assistants(caller: Caller = Depends(caller)) -> AssistantList:
    views = await all_views(Protocol(caller.client), caller.user)
    return AssistantList(
        assistants=[
            AssistantSummary(
                assistant_id=v["assistant_id"],
                name=v["name"],
                graph_id=v["graph_id"],
                description=v["description"],
                version=v["version"],
                built_in=bool(v["metadata"].get("built_in")),
            )
            for v in views
            if not v["graph_id"].startswith("workflow:")
        ]
    )
