"""Agent2Agent (A2A, JSON-RPC binding of protocol 0.3): each assistant is an A2A agent.

`GET /.well-known/agent-card.json?assistant_id=…` is its card; `POST /a2a/{assistant_id}` takes
JSON-RPC 2.0 `message/send`, `message/stream` (SSE of JSON-RPC responses), `tasks/get` and
`tasks/cancel`.

- A task is one of our messages (its id is the message id; a pause and its resume stay one
  task), its context is our thread (conversation). A message without `contextId` starts a new
  thread; with one, it continues that thread.
- States: running → `working`, paused for approval → `input-required` (the status message
  names the tool calls and says to answer "approve" or "deny"), completed → `completed`,
  failed → `failed`, cancelled → `canceled`.
- A follow-up message with the task's `taskId` answers the pause: its text "approve"/"yes"
  or "deny"/"no" (or a data part `{"decisions": ...}` in our resume shape). The resume is the
  engine's compare-and-set: a second answer to the same pause is refused (JSON-RPC error
  -32002, task not in a state to take input), so the tool runs once.
- The answer is the task's artifact `answer` (a text part); our artifacts follow as artifacts
  with a text part each.
- Auth as the rest of the Agent Protocol (`X-Api-Key` / `Authorization: Bearer`).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..client import Run
from ..errors import ArtifactFlowError, NotFoundError, ResumeConflictError, UserError
from ..protocol.assistants_store import find
from ..protocol.deps import caller, protocol_of
from ..protocol.service import Protocol
from ..protocol.wire import RunCreate
from ..version import __version__

router = APIRouter(tags=["a2a"], include_in_schema=False)

STATES = {
    "running": "working",
    "waiting": "input-required",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "canceled",
}
APPROVE = {"approve", "approved", "yes", "y", "ok", "allow", "accept"}
DENY = {"deny", "denied", "no", "n", "reject", "refuse"}


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Part(BaseModel):
    model_config = ConfigDict(extra="allow")

    kind: Literal["text", "data", "file"] = "text"
    text: str | None = None
    data: dict[str, Any] | None = None


class A2AMessage(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    role: Literal["user", "agent"] = "user"
    parts: list[Part] = Field(min_length=1)
    message_id: str | None = Field(default=None, alias="messageId")
    context_id: str | None = Field(default=None, alias="contextId")
    task_id: str | None = Field(default=None, alias="taskId")


class SendConfiguration(BaseModel):
    model_config = ConfigDict(extra="allow")

    blocking: bool | None = None


class SendParams(BaseModel):
    model_config = ConfigDict(extra="allow")

    message: A2AMessage
    configuration: SendConfiguration = Field(default_factory=SendConfiguration)


class TaskParams(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str = Field(min_length=1)
    history_length: int | None = Field(default=None, alias="historyLength", ge=0)


class RpcRequest(BaseModel):
    jsonrpc: Literal["2.0"]
    id: str | int | None = None
    method: str
    params: dict[str, Any] = Field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _text_of(message: A2AMessage) -> str:
    return "\n".join(p.text for p in message.parts if p.kind == "text" and p.text).strip()


def _agent_message(text: str, task_id: str, context_id: str) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": "agent",
        "messageId": f"{task_id}-status-{int(time.time() * 1000)}",
        "parts": [{"kind": "text", "text": text}],
        "taskId": task_id,
        "contextId": context_id,
    }


async def task_view(p: Protocol, message_id: str) -> dict[str, Any]:
    """Our message `message_id` as an A2A Task."""
    message: dict[str, Any] = dict(await p.client.conversations.message(message_id))
    context_id = message["conversation_id"]
    state = STATES.get(message["status"], "unknown")
    status: dict[str, Any] = {"state": state, "timestamp": _now()}
    if state == "input-required":
        calls = (message.get("waiting_for") or {}).get("calls") or []
        asked = "; ".join(f"{c.get('tool')}({json.dumps(c.get('arguments'))})" for c in calls)
        status["message"] = _agent_message(
            f"Approval needed before running: {asked}. Reply with this taskId: 'approve' or 'deny'.",
            message_id,
            context_id,
        )
    elif state == "failed":
        status["message"] = _agent_message(message.get("error") or "the run failed", message_id, context_id)
    artifacts: list[dict[str, Any]] = []
    if state == "completed":
        artifacts.append(
            {"artifactId": "answer", "name": "answer", "parts": [{"kind": "text", "text": message.get("response") or ""}]}
        )
        for a in await p.client.artifacts.list(context_id):
            full = await p.client.artifacts.get(context_id, a["artifact_id"])
            artifacts.append(
                {
                    "artifactId": a["artifact_id"],
                    "name": a.get("title") or a["artifact_id"],
                    "parts": [{"kind": "text", "text": dict(full).get("content") or ""}],
                }
            )
    history = [
        {
            "kind": "message",
            "role": "user",
            "messageId": f"{message_id}-user",
            "parts": [{"kind": "text", "text": message["content"]}],
            "taskId": message_id,
            "contextId": context_id,
        }
    ]
    return {
        "kind": "task",
        "id": message_id,
        "contextId": context_id,
        "status": status,
        "artifacts": artifacts,
        "history": history,
        "metadata": {"thread_id": context_id},
    }


async def _task_message(p: Protocol, task_id: str, user: str | None) -> dict[str, Any]:
    try:
        message: dict[str, Any] = dict(await p.client.conversations.message(task_id))
        await p.conversation(message["conversation_id"], user)  # the caller's own
    except NotFoundError:
        raise RpcError(-32001, f"task {task_id} not found") from None
    return message


def _decisions(message: A2AMessage, calls: int) -> Any:
    """The follow-up's decisions: a data part's own (one per call), or a person's "approve" /
    "deny" in words, which answers every call of the pause (the protocol asks one per call)."""
    for part in message.parts:
        if part.kind == "data" and part.data and "decisions" in part.data:
            return part.data
    text = _text_of(message).lower().strip(" .!")
    if text in APPROVE:
        return {"decisions": [{"type": "approve"}] * max(calls, 1)}
    if text in DENY:
        return {"decisions": [{"type": "reject"}] * max(calls, 1)}
    raise RpcError(-32602, "the task waits for approval: answer 'approve' or 'deny' (or a data part with decisions)")


async def send(
    p: Protocol, assistant_id: str, params: SendParams, user: str | None
) -> tuple[str, int, Run | None]:
    """Start (or resume) the run the message asks for; the task (message) id, the event id
    its segment starts after, and the handle of the segment this process started (None when
    it was queued): only that handle still has the answer's chunks if the run ends before
    the stream reads it."""
    message = params.message
    if message.task_id:
        paused = await _task_message(p, message.task_id, user)
        if paused["status"] != "waiting":
            raise RpcError(-32002, f"task {message.task_id} is {STATES.get(paused['status'], 'unknown')}, not input-required")
        calls = len((paused.get("waiting_for") or {}).get("calls") or [])
        body = {"assistant_id": assistant_id, "command": {"resume": _decisions(message, calls)}}
        run, handle = await p.create(paused["conversation_id"], RunCreate.model_validate(body), user)
        return str(run["message_id"]), int(run["cursor"]), handle
    text = _text_of(message)
    if not text:
        raise RpcError(-32602, "the message has no text part")
    body = {"assistant_id": assistant_id, "input": {"messages": [{"role": "user", "content": text}]}}
    thread_id = message.context_id
    if thread_id is not None:
        body["if_not_exists"] = "create"
    run, handle = await p.create(thread_id, RunCreate.model_validate(body), user)
    return str(run["message_id"]), int(run["cursor"]), handle


async def _until_settled(p: Protocol, message_id: str, cursor: int) -> None:
    handle = await p.client.runs.get(message_id, after_event_id=cursor)
    await handle.result()


async def dispatch(p: Protocol, assistant_id: str, rpc: RpcRequest, user: str | None) -> Any:
    try:
        if rpc.method == "message/send":
            params = SendParams.model_validate(rpc.params)
            task_id, cursor, _ = await send(p, assistant_id, params, user)
            if params.configuration.blocking is not False:  # else: answer at once, poll tasks/get
                await _until_settled(p, task_id, cursor)
            return await task_view(p, task_id)
        if rpc.method == "tasks/get":
            params = TaskParams.model_validate(rpc.params)
            await _task_message(p, params.id, user)
            return await task_view(p, params.id)
        if rpc.method == "tasks/cancel":
            params = TaskParams.model_validate(rpc.params)
            message = await _task_message(p, params.id, user)
            if message["status"] not in ("running", "waiting") or not await p.client.runs.cancel(params.id):
                raise RpcError(-32002, f"task {params.id} is not cancelable (it has ended)")
            return await task_view(p, params.id)
    except ValidationError as exc:
        raise RpcError(-32602, f"invalid params: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}") from None
    except ResumeConflictError as exc:
        raise RpcError(-32002, str(exc)) from None
    except (UserError, NotFoundError) as exc:
        raise RpcError(-32602, str(exc)) from None
    raise RpcError(-32601, f"method {rpc.method!r} not found; this agent serves message/send, message/stream, tasks/get, tasks/cancel")


def _response(rpc_id: Any, result: Any = None, error: RpcError | None = None) -> dict[str, Any]:
    if error is not None:
        return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": error.code, "message": error.message}}
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def stream(p: Protocol, assistant_id: str, rpc: RpcRequest, user: str | None) -> AsyncIterator[bytes]:
    """`message/stream`: the task, the answer's text as it is written (artifact updates), then
    the final status (`final: true`)."""
    try:
        task_id, cursor, started = await send(p, assistant_id, SendParams.model_validate(rpc.params), user)
    except ValidationError as exc:
        yield _sse(_response(rpc.id, error=RpcError(-32602, f"invalid params: {exc.errors()[0]['msg']}")))
        return
    except RpcError as exc:
        yield _sse(_response(rpc.id, error=exc))
        return
    except (ArtifactFlowError, ResumeConflictError) as exc:
        yield _sse(_response(rpc.id, error=RpcError(-32602, str(exc))))
        return
    task = await task_view(p, task_id)
    context_id = task["contextId"]
    yield _sse(_response(rpc.id, {**task, "status": {"state": "working", "timestamp": _now()}}))
    lead = p.client.admin.services.lead.name
    handle = started if started is not None else await p.client.runs.get(task_id, after_event_id=cursor)
    async for event in handle:
        if event.type == "llm_chunk" and event.agent == lead:
            delta = getattr(event.data, "delta", "")
            update = {
                "kind": "artifact-update",
                "taskId": task_id,
                "contextId": context_id,
                "artifact": {"artifactId": "answer-stream", "parts": [{"kind": "text", "text": delta}]},
                "append": True,
                "lastChunk": False,
            }
            yield _sse(_response(rpc.id, update))
    final = await task_view(p, task_id)
    for artifact in final["artifacts"]:
        yield _sse(
            _response(
                rpc.id,
                {"kind": "artifact-update", "taskId": task_id, "contextId": context_id, "artifact": artifact, "lastChunk": True},
            )
        )
    yield _sse(
        _response(
            rpc.id,
            {"kind": "status-update", "taskId": task_id, "contextId": context_id, "status": final["status"], "final": True},
        )
    )


def agent_card(request: Request, view: dict[str, Any]) -> dict[str, Any]:
    base = str(request.base_url).rstrip("/")
    return {
        "protocolVersion": "0.3.0",
        "name": view["name"],
        "description": view["description"] or f"artifactflow assistant {view['name']}",
        "url": f"{base}/a2a/{view['assistant_id']}",
        "preferredTransport": "JSONRPC",
        "version": __version__,
        "capabilities": {"streaming": True, "pushNotifications": False, "stateTransitionHistory": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": view["assistant_id"],
                "name": view["name"],
                "description": view["description"] or "Plans, delegates and writes artifacts.",
                "tags": ["artifactflow", view["graph_id"]],
            }
        ],
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    }


async def _assistant(p: Protocol, assistant_id: str, user: str | None) -> dict[str, Any]:
    from ..protocol.assistants_store import builtin_view, saved_view

    found: Any = await find(p, assistant_id, user=user)
    row = getattr(found, "row", None)
    return saved_view(row) if row is not None else builtin_view(found)


@router.get("/.well-known/agent-card.json")
async def card(
    request: Request, assistant_id: str | None = Query(None), user: str | None = Depends(caller)
) -> JSONResponse:
    p = protocol_of(request)
    await p.records.ready()
    try:
        view = await _assistant(p, assistant_id or p.client.admin.services.lead.name, user)
    except NotFoundError as exc:
        return JSONResponse({"detail": str(exc)}, 404)
    return JSONResponse(agent_card(request, view))


@router.post("/a2a/{assistant_id}", response_model=None)
async def a2a(
    assistant_id: str, request: Request, user: str | None = Depends(caller)
) -> JSONResponse | StreamingResponse:
    p = protocol_of(request)
    await p.records.ready()
    try:
        raw = json.loads(await request.body())
    except ValueError:
        return JSONResponse(_response(None, error=RpcError(-32700, "parse error: the body is not JSON")))
    try:
        rpc = RpcRequest.model_validate(raw)
    except ValidationError as exc:
        rpc_id = raw.get("id") if isinstance(raw, dict) else None
        return JSONResponse(_response(rpc_id, error=RpcError(-32600, f"invalid request: {exc.errors()[0]['msg']}")))
    try:
        view = await _assistant(p, assistant_id, user)
    except NotFoundError as exc:
        return JSONResponse(_response(rpc.id, error=RpcError(-32001, str(exc))))
    if rpc.method == "message/stream":
        return StreamingResponse(
            stream(p, view["assistant_id"], rpc, user),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
    try:
        return JSONResponse(_response(rpc.id, await dispatch(p, view["assistant_id"], rpc, user)))
    except RpcError as exc:
        return JSONResponse(_response(rpc.id, error=exc))
