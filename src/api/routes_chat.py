"""Runs: start, stream, resume, cancel, retry, and the message record with its event log."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response

from ..client import Client, Resume, Retry, Run, Task
from ..core.conversations import ACTIVE_BRANCH
from ..core.permissions import decisions_from_body
from ..core.run.cancel import refusal as cancel_refusal
from ..errors import CancelConflictError, NotFoundError
from .auth import Caller, caller, owned_message, stream_user
from .deps import MAX_INT, api_url, error_docs, get_client
from .models import (
    CancelResult,
    ChatAccepted,
    ChatRequest,
    EventList,
    MessageInfo,
    ResumeAccepted,
    ResumeRequest,
)
from .sse import EventStreamResponse, event_stream

router = APIRouter(tags=["chat"])

CallerDep = Depends(caller)


@router.post("/chat", status_code=202, response_model=ChatAccepted,
             responses=error_docs(400, 404, 413, 429),
             summary="Send a message; the run continues in the background")
async def chat(body: ChatRequest, request: Request, caller: Caller = CallerDep) -> ChatAccepted:
    parent: Any = (
        body.parent_message_id if "parent_message_id" in body.model_fields_set else ACTIVE_BRANCH
    )
    conversation_id = body.conversation_id
    if isinstance(parent, str):
        parent_message = await caller.message(parent)
        if conversation_id is None:
            conversation_id = parent_message["conversation_id"]
        elif parent_message["conversation_id"] != conversation_id:
            raise NotFoundError(f"parent message {parent} is not in conversation {conversation_id}")
    elif conversation_id is not None:
        await caller.conversation(conversation_id)
    async with request.app.state.limiter.slot(caller.client):
        run = await caller.client.runs.start(
            Task(body.content, conversation_id, parent, project=body.project, assistant=body.assistant),
            user_id=caller.user,
        )
    return _accepted(request, run)


@router.get(
    "/stream/{message_id}",
    response_class=EventStreamResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "Server-sent events"},
        204: {"description": "Nothing left to send: the message is finished and fully read"},
        **error_docs(404, streaming=True),
    },
    summary="Follow a message's events (replay, then live)",
)
async def stream(
    message_id: str,
    request: Request,
    # `int = None` (not `int | None`): the schema then says integer, not integer-or-null.
    after: int = Query(  # type: ignore[assignment]
        None, ge=0, le=MAX_INT, description="Replay events after this event_id"
    ),
    last_event_id: int = Header(  # type: ignore[assignment]
        None,
        alias="Last-Event-ID",
        ge=0,
        le=MAX_INT,
        description="Set by EventSource on reconnect; wins over `after`",
    ),
    user: str | None = Depends(stream_user),
    client: Client = Depends(get_client),
) -> Response:
    message = await owned_message(client, message_id, user)
    cursor = last_event_id if last_event_id is not None else (after or 0)
    if (
        message["status"] != "running"
        and await client.runs.last_event_id(message_id) <= cursor
    ):
        return Response(status_code=204)  # tells EventSource to stop reconnecting
    state = request.app.state
    body = event_stream(
        await client.runs.get(message_id, after_event_id=cursor, user_id=user),
        heartbeat=state.heartbeat_seconds,
        streams=state.streams,
    )
    return EventStreamResponse(body)


@router.post("/chat/{message_id}/resume", status_code=202, response_model=ResumeAccepted,
             responses=error_docs(400, 404, 409, 413, 429),
             summary="Answer a paused message's permission request and continue it")
async def resume(
    message_id: str, body: ResumeRequest, request: Request, caller: Caller = CallerDep
) -> ResumeAccepted:
    await caller.message(message_id)
    async with request.app.state.limiter.slot(caller.client):
        decisions = decisions_from_body(body.model_dump())
        run = await caller.client.runs.start(Resume(message_id, decisions), user_id=caller.user)
    return ResumeAccepted(
        message_id=message_id, stream_url=api_url(request, f"/stream/{message_id}?after={run.cursor}")
    )


@router.post("/chat/{message_id}/cancel", response_model=CancelResult, responses=error_docs(404, 409),
             summary="Cancel a running or paused message")
async def cancel(message_id: str, caller: Caller = CallerDep) -> CancelResult:
    """Accepted (`cancelled` true) on whichever worker: the run stops, or has stopped (its
    `status` may still read `running` for a moment). 409 when the run ended otherwise first
    (completed, failed); `cancelled` false for a message cancelled already."""
    await caller.message(message_id)
    cancelled = await caller.client.runs.cancel(message_id)
    message = await caller.message(message_id)
    if not cancelled and (reason := cancel_refusal(message_id, message["status"])):
        raise CancelConflictError(reason, message_id=message_id)
    return CancelResult(message_id=message_id, cancelled=cancelled, status=message["status"])


@router.post("/messages/{message_id}/retry", status_code=202, response_model=ChatAccepted,
             responses=error_docs(404, 409, 429),
             summary="Run a failed or cancelled message again, as a sibling on the same branch")
async def retry(message_id: str, request: Request, caller: Caller = CallerDep) -> ChatAccepted:
    """A new message with the same conversation, parent and content starts in the background
    (as `POST /chat`); a completed, paused or running message is 409."""
    await caller.message(message_id)
    async with request.app.state.limiter.slot(caller.client):
        run = await caller.client.runs.start(Retry(message_id), user_id=caller.user)
    return _accepted(request, run)


@router.get("/messages/{message_id}", response_model=MessageInfo, responses=error_docs(404),
            summary="A message: status, response, pending permission request, metrics")
async def get_message(message_id: str, caller: Caller = CallerDep) -> MessageInfo:
    message = await caller.message(message_id)
    return MessageInfo.model_validate({k: message.get(k) for k in MessageInfo.model_fields})


@router.get("/messages/{message_id}/events", response_model=EventList, responses=error_docs(404),
            summary="A message's stored events after `after`")
async def get_events(
    message_id: str,
    after: int | None = Query(None, ge=0, le=MAX_INT),
    caller: Caller = CallerDep,
) -> EventList:
    await caller.message(message_id)
    return EventList(message_id=message_id, events=await caller.client.runs.events(message_id, after))


def _accepted(request: Request, run: Run) -> ChatAccepted:
    return ChatAccepted(
        conversation_id=run.conversation_id,
        message_id=run.message_id,
        thread_id=run.thread_id,
        stream_url=api_url(request, f"/stream/{run.message_id}"),
    )
