"""The Agent Protocol's endpoints, as `langgraph_sdk` calls them (`protocol_router()`)."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import anyio
from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.responses import StreamingResponse

from ..client import Client
from ..client.faults import store_fault
from ..errors import (
    ArtifactFlowError,
    InvalidResumeError,
    NotFoundError,
    ResumeConflictError,
    UserError,
)
from ..version import __version__
from .convert import LEAD, message_messages
from .records import FINAL
from .service import Protocol
from .store import assume_json
from .stream import Frames, ResumeAt, frames_of, modes_of, sse, with_heartbeat
from .views import (
    NODE,
    ROOT,
    iso,
    path_messages,
    path_to,
    run_view,
    state_at,
    thread_status,
    thread_view,
)

JSON = dict[str, Any]


def _plain(rows: Any) -> list[JSON]:
    """Store rows (TypedDicts) as plain dicts."""
    return [dict(row) for row in rows]


class ProtocolError(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers


_STATUS: list[tuple[type[Exception], int]] = [
    (NotFoundError, 404),
    (ResumeConflictError, 409),
    (InvalidResumeError, 422),
    (UserError, 422),
]


class ProtocolRoute(APIRoute):
    """Errors as the protocol answers them: `{"detail": ...}` with 404/409/422."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            assume_json(request)  # agent-chat-ui's passthrough forwards JSON as text/plain
            try:
                return await handler(request)
            except ProtocolError as exc:
                return JSONResponse({"detail": exc.detail}, exc.status, headers=exc.headers)
            except RequestValidationError as exc:  # errors may hold the raw body (bytes)
                return JSONResponse({"detail": jsonable_encoder(exc.errors())}, 422)
            except ArtifactFlowError as exc:
                if store_fault(exc) is not None:
                    raise
                for cls, status in _STATUS:
                    if isinstance(exc, cls):
                        return JSONResponse({"detail": str(exc)}, status)
                raise

        return guarded


def _protocol(request: Request) -> Protocol:
    state = request.app.state
    client: Client | None = state.client
    if client is None:
        raise ProtocolError(503, "the server is starting or shutting down; retry shortly")
    protocol = getattr(state, "protocol", None)
    if protocol is None or protocol.client is not client:
        protocol = state.protocol = Protocol(client)
    return protocol


async def _user(request: Request) -> str | None:
    """The caller: `X-Api-Key: <token>` or `Authorization: Bearer <token>` (None with auth off)."""
    protocol = _protocol(request)
    if not getattr(request.app.state, "auth_enabled", False):
        return None
    token = request.headers.get("x-api-key")
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if not token and scheme.lower() == "bearer":
        token = credentials.strip()
    if not token:
        raise ProtocolError(
            401,
            "missing API key: send 'X-Api-Key: <token>' or 'Authorization: Bearer <token>'",
            {"WWW-Authenticate": "Bearer"},
        )
    user = await protocol.client.admin.user_for_token(token)
    if user is None:
        raise ProtocolError(401, "invalid or revoked token", {"WWW-Authenticate": "Bearer"})
    return user


class Ctx:
    """A request's protocol, caller (None with auth off) and SSE heartbeat interval."""

    def __init__(self, protocol: Protocol, user: str | None, heartbeat: float = 0.0) -> None:
        self.p, self.user, self.heartbeat = protocol, user, heartbeat


async def _ctx(request: Request, user: str | None = Depends(_user)) -> Ctx:
    protocol = _protocol(request)
    await protocol.records.ready()
    return Ctx(protocol, user, float(getattr(request.app.state, "heartbeat_seconds", 0) or 0))


CtxDep = Depends(_ctx)


def protocol_router() -> APIRouter:
    """The LangGraph Agent Server API at the server root. Reads `app.state.client` and
    `app.state.auth_enabled` (set by the HTTP app); includes `store.py`'s `store_router()`
    when that module is present."""
    # Not in our OpenAPI document: LangGraph's clients are the protocol's spec, and its paths
    # overlap by design (`GET /threads/search` is thread "search", not a 405).
    router = APIRouter(route_class=ProtocolRoute, tags=["agent protocol"], include_in_schema=False)
    _meta(router)
    _assistants(router)
    _threads(router)
    _runs(router)
    if importlib.util.find_spec(f"{__package__}.store") is not None:  # apextra's store endpoints
        store = importlib.import_module(f"{__package__}.store")
        router.include_router(store.store_router())
    return router


# --- meta and assistants -----------------------------------------------------------------------


def _meta(router: APIRouter) -> None:
    @router.get("/ok")
    async def ok() -> JSON:
        return {"ok": True}

    @router.get("/info")
    async def info() -> JSON:
        return {
            "version": __version__,
            "langgraph_py_version": None,
            "flags": {"assistants": True, "crons": False, "langsmith": False},
            "host": {"kind": "artifactflow"},
        }


def _assistant_view(a: Any, created: float | None = None) -> JSON:
    return {
        "assistant_id": a.assistant_id,
        "graph_id": a.graph_id,
        "name": a.name,
        "description": a.description,
        "config": {},
        "context": {},
        "metadata": {"kind": a.kind},
        "version": 1,
        "created_at": iso(created or 0),
        "updated_at": iso(created or 0),
    }


def _assistants(router: APIRouter) -> None:
    @router.post("/assistants/search")
    async def search(body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep) -> list[JSON]:
        out = [_assistant_view(a) for a in ctx.p.assistants()]
        if body.get("graph_id"):
            out = [a for a in out if a["graph_id"] == body["graph_id"]]
        if body.get("name"):
            out = [a for a in out if body["name"] in a["name"]]
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        return out[offset : offset + limit]

    @router.post("/assistants/count")
    async def count(body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep) -> int:
        return len(await search(body | {"limit": 10_000}, ctx))

    @router.get("/assistants/{assistant_id}")
    async def get(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        return _assistant_view(ctx.p.assistant(assistant_id))

    @router.get("/assistants/{assistant_id}/graph")
    async def graph(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        ctx.p.assistant(assistant_id)
        nodes = ["__start__", "lead_agent", NODE, "subagent", "__end__"]
        edges = [
            ("__start__", "lead_agent", False),
            ("lead_agent", NODE, True),
            ("lead_agent", "subagent", True),
            ("lead_agent", "__end__", True),
            (NODE, "lead_agent", False),
            ("subagent", "lead_agent", False),
        ]
        return {
            "nodes": [{"id": n, "type": "runnable", "data": n} for n in nodes],
            "edges": [{"source": s, "target": t, "conditional": c} for s, t, c in edges],
        }

    @router.get("/assistants/{assistant_id}/schemas")
    async def schemas(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        a = ctx.p.assistant(assistant_id)
        messages = {
            "type": "object",
            "properties": {"messages": {"type": "array", "items": {"type": "object"}}},
        }
        return {
            "graph_id": a.graph_id,
            "input_schema": messages,
            "output_schema": messages,
            "state_schema": messages,
            "config_schema": {"type": "object", "properties": {}},
            "context_schema": {"type": "object", "properties": {}},
        }

    @router.get("/assistants/{assistant_id}/subgraphs")
    async def subgraphs(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        ctx.p.assistant(assistant_id)
        return {}


# --- threads -----------------------------------------------------------------------------------


async def _thread(ctx: Ctx, thread_id: str, *, with_values: bool = True) -> JSON:
    conversation = await ctx.p.conversation(thread_id, ctx.user)
    row = await ctx.p.records.thread_row(thread_id)
    tip = await ctx.p.tip(conversation)
    state = await _state(ctx, conversation) if with_values else None
    return thread_view(
        conversation, row, status=thread_status(tip, await ctx.p.busy(thread_id)), state=state
    )


async def _state(ctx: Ctx, conversation: JSON, checkpoint_id: str | None = None) -> JSON:
    messages = _plain(await ctx.p.client.conversations.messages(conversation["id"]))
    by_id = {m["id"]: m for m in messages}
    tip = conversation.get("active_message_id") if checkpoint_id is None else checkpoint_id
    if tip == ROOT:
        tip = None
    elif tip is not None and tip not in by_id:
        raise NotFoundError(f"checkpoint {checkpoint_id} not found in thread {conversation['id']}")
    return await state_at(ctx.p.client, conversation["id"], path_to(by_id, tip))


def _threads(router: APIRouter) -> None:
    @router.post("/threads")
    async def create(body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep) -> JSON:
        store = ctx.p.client.admin.store
        thread_id = body.get("thread_id")
        if thread_id:
            existing = await store.get_conversation(thread_id)
            if existing is not None:
                if body.get("if_exists") == "do_nothing" and (
                    ctx.user is None or existing["user_id"] == ctx.user
                ):
                    return await _thread(ctx, thread_id)
                raise ProtocolError(409, f"thread {thread_id} already exists")
        conversation = await store.create_conversation(thread_id, user_id=ctx.user)
        await ctx.p.records.put_thread(
            conversation["id"], ctx.user, dict(body.get("metadata") or {})
        )
        return await _thread(ctx, conversation["id"])

    @router.get("/threads/{thread_id}")
    async def get(thread_id: str, ctx: Ctx = CtxDep) -> JSON:
        return await _thread(ctx, thread_id)

    @router.patch("/threads/{thread_id}")
    async def patch(
        thread_id: str, body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep
    ) -> JSON:
        await ctx.p.conversation(thread_id, ctx.user)
        await ctx.p.records.merge_thread_metadata(
            thread_id, ctx.user, dict(body.get("metadata") or {})
        )
        return await _thread(ctx, thread_id)

    @router.delete("/threads/{thread_id}", status_code=204)
    async def delete(thread_id: str, ctx: Ctx = CtxDep) -> Response:
        await ctx.p.conversation(thread_id, ctx.user)
        await ctx.p.client.conversations.delete(thread_id, user_id=ctx.user)
        await ctx.p.records.delete_thread(thread_id)
        return Response(status_code=204)

    @router.post("/threads/search")
    async def search(body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep) -> list[JSON]:
        return (await _search(ctx, body))[0]

    @router.post("/threads/count")
    async def count(body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep) -> int:
        return (await _search(ctx, body | {"limit": 0}))[1]

    @router.get("/threads/{thread_id}/state")
    async def state(thread_id: str, ctx: Ctx = CtxDep) -> JSON:
        return await _state(ctx, await ctx.p.conversation(thread_id, ctx.user))

    @router.get("/threads/{thread_id}/state/{checkpoint_id}")
    async def state_at_checkpoint(thread_id: str, checkpoint_id: str, ctx: Ctx = CtxDep) -> JSON:
        return await _state(ctx, await ctx.p.conversation(thread_id, ctx.user), checkpoint_id)

    @router.post("/threads/{thread_id}/state/checkpoint")
    async def state_by_body(
        thread_id: str, body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep
    ) -> JSON:
        checkpoint_id = (body.get("checkpoint") or {}).get("checkpoint_id")
        return await _state(ctx, await ctx.p.conversation(thread_id, ctx.user), checkpoint_id)

    @router.post("/threads/{thread_id}/state")
    async def update_state(
        thread_id: str, body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep
    ) -> JSON:
        """Time travel only: `checkpoint_id` (and no `values`) moves the thread's head there,
        so the next run answers after it. Writing values is not supported (422)."""
        conversation = await ctx.p.conversation(thread_id, ctx.user)
        if body.get("values") not in (None, {}, []):
            raise ProtocolError(
                422,
                "updating a thread's values is not supported: its messages are its "
                "conversation's; fork with a run's checkpoint_id instead",
            )
        checkpoint_id = body.get("checkpoint_id") or (body.get("checkpoint") or {}).get(
            "checkpoint_id"
        )
        if not checkpoint_id:
            raise ProtocolError(
                422, "give checkpoint_id: the checkpoint to move the thread's head to"
            )
        if await ctx.p.busy(thread_id):
            raise ProtocolError(409, f"thread {thread_id} is busy")
        state = await _state(ctx, conversation, checkpoint_id)
        if checkpoint_id != ROOT:
            await ctx.p.client.admin.store.touch_conversation(
                thread_id, active_message_id=checkpoint_id
            )
        return {"checkpoint": state["checkpoint"]}

    @router.post("/threads/{thread_id}/history")
    async def history(
        thread_id: str, body: JSON = Body(default_factory=dict), ctx: Ctx = CtxDep
    ) -> list[JSON]:
        return await _history(ctx, thread_id, body)

    @router.get("/threads/{thread_id}/history")
    async def history_by_query(
        thread_id: str, limit: int = Query(10, ge=1), before: str | None = None, ctx: Ctx = CtxDep
    ) -> list[JSON]:
        return await _history(ctx, thread_id, {"limit": limit, "before": before})


async def _history(ctx: Ctx, thread_id: str, body: JSON) -> list[JSON]:
    """The states of the thread's head path, newest first: one per message, then the empty
    state before the first (`root`), each with its complete values."""
    conversation = await ctx.p.conversation(thread_id, ctx.user)
    messages = _plain(await ctx.p.client.conversations.messages(thread_id))
    by_id = {m["id"]: m for m in messages}
    before = body.get("before")
    if isinstance(before, dict):
        before = before.get("checkpoint_id") or (before.get("configurable") or {}).get(
            "checkpoint_id"
        )
    checkpoint = body.get("checkpoint") or {}
    start = checkpoint.get("checkpoint_id") or conversation.get("active_message_id")
    path = path_to(by_id, start)
    if not path:
        return []
    per_message = [message_messages(m, await ctx.p.client.runs.events(m["id"])) for m in path]
    states: list[JSON] = []
    flat: list[JSON] = [m for messages_of in per_message for m in messages_of]
    counts = [len(messages_of) for messages_of in per_message]
    for i in range(len(path), -1, -1):
        shown = flat[: sum(counts[:i])]
        states.append(await state_at(ctx.p.client, thread_id, path[:i], messages=shown))
    if before:
        ids = [s["checkpoint"]["checkpoint_id"] for s in states]
        states = states[ids.index(before) + 1 :] if before in ids else states
    return states[: int(body.get("limit") or 10)]


async def _search(ctx: Ctx, body: JSON) -> tuple[list[JSON], int]:
    p = ctx.p
    conversations = _plain(await p.client.conversations.list(user_id=ctx.user, limit=10_000))
    rows = await p.records.thread_rows([c["id"] for c in conversations])
    if body.get("ids"):
        conversations = [c for c in conversations if c["id"] in set(body["ids"])]
    wanted = body.get("metadata") or {}
    conversations = [
        c
        for c in conversations
        if all((rows.get(c["id"]) or {}).get("metadata", {}).get(k) == v for k, v in wanted.items())
    ]
    out = []
    for c in conversations:
        tip = await p.tip(c)
        out.append(
            thread_view(c, rows.get(c["id"]), status=thread_status(tip, await p.busy(c["id"])))
        )
    if body.get("status"):
        out = [t for t in out if t["status"] == body["status"]]
    key = body.get("sort_by") or "updated_at"
    if key in ("thread_id", "status", "created_at", "updated_at"):
        out.sort(key=lambda t: t[key] or "", reverse=(body.get("sort_order") or "desc") == "desc")
    total = len(out)
    offset, limit = (
        int(body.get("offset") or 0),
        int(body["limit"] if body.get("limit") is not None else 10),
    )
    page = out[offset : offset + limit]
    for t in page:  # values only for the page
        t["values"] = (await _state(ctx, await p.conversation(t["thread_id"], ctx.user)))["values"]
    return page, total


# --- runs --------------------------------------------------------------------------------------


def _run_location(run: JSON, *, stream: bool) -> dict[str, str]:
    base = f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return {"Location": base + ("/stream" if stream else ""), "Content-Location": base}


async def _output(ctx: Ctx, thread_id: str, run: JSON) -> JSON:
    conversation = await ctx.p.conversation(thread_id, ctx.user)
    state = await _state(ctx, conversation)
    values = dict(state["values"])
    if state["interrupts"]:
        values["__interrupt__"] = state["interrupts"]
    if run["status"] == "error":
        tip = await ctx.p.tip(conversation)
        values["__error__"] = {
            "error": "RunError",
            "message": (tip or {}).get("error") or "the run failed",
        }
    return values


async def _frames(
    ctx: Ctx,
    run: JSON,
    modes: list[str] | None,
    after: ResumeAt | None,
    *,
    fresh_handle: Any = None,
) -> AsyncIterator[bytes]:
    """The run's frames from its start (`after` None) or after frame `after` (see
    `stream.frames_of`); `modes` None: those the run was started with."""
    p = ctx.p
    while run["status"] in ("pending", "starting") or run["message_id"] is None:
        if run["status"] in FINAL:
            yield sse("metadata", {"run_id": run["run_id"], "attempt": 1}, None)
            return  # cancelled before it started
        await p.dispatch(run["thread_id"])
        await asyncio.sleep(0.05)
        run = await p.records.run(run["run_id"]) or run
    request = run.get("request") or {}
    if modes is None:
        modes = modes_of(request.get("stream_mode"))
    message: JSON = dict(await p.client.conversations.message(run["message_id"]))
    start = run["cursor"]
    if after is not None and after[0] <= start:
        after = (start, after[1])  # within the frames before the run's first event
    # Re-read from the event whose group the client is inside (its frames are made again and
    # the ones it saw skipped).
    read_after = start if after is None or after[0] == start else after[0] - 1
    prior = [e for e in await p.client.runs.events(run["message_id"]) if e.event_id <= read_after]
    messages = _plain(await p.client.conversations.messages(run["thread_id"]))
    base_path = path_to({m["id"]: m for m in messages}, message["parent_id"])
    frames = Frames(
        modes,
        run_id=run["run_id"],
        thread_id=run["thread_id"],
        message=message,
        base=await path_messages(p.client, base_path),
        prior=prior,
        graph_id=run["assistant_id"] or LEAD,
        subgraphs=bool(request.get("stream_subgraphs")),
    )
    handle = (
        fresh_handle
        if fresh_handle is not None and after is None
        else await p.client.runs.get(run["message_id"], after_event_id=read_after)
    )
    try:
        async for chunk in frames_of(frames, aiter(handle), start=start, resume=after):
            yield chunk
    finally:
        await p.settle(await p.records.run(run["run_id"]) or run)


class _SSE(StreamingResponse):
    media_type = "text/event-stream"


def _stream_response(
    ctx: Ctx,
    body: AsyncIterator[bytes],
    headers: dict[str, str],
    *,
    on_disconnect: Callable[[], Any] | None = None,
) -> Response:
    """The SSE response; `on_disconnect` runs (shielded) when the client leaves before the end."""

    async def guarded() -> AsyncIterator[bytes]:
        finished = False
        try:
            async for chunk in with_heartbeat(body, ctx.heartbeat):
                yield chunk
            finished = True
        finally:
            if not finished and on_disconnect is not None:
                with anyio.CancelScope(shield=True):
                    await on_disconnect()

    return _SSE(
        guarded(), headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **headers}
    )


def _last_event_id(request: Request) -> ResumeAt | None:
    """`Last-Event-ID`: `E-k` (a frame), `E` (after our event E), `-1` or none (the start)."""
    raw = (request.headers.get("last-event-id") or "").strip()
    if raw in ("", "-1"):
        return None
    event, _, index = raw.partition("-")
    try:
        return int(event), int(index) if index else 2**31
    except ValueError:
        raise ProtocolError(
            422,
            f"Last-Event-ID must be an id this stream sent (E-k), an event id or -1, not {raw!r}",
        ) from None


def _runs(router: APIRouter) -> None:
    async def create(ctx: Ctx, thread_id: str | None, body: JSON) -> tuple[JSON, Any]:
        run, handle = await ctx.p.create(thread_id, body, ctx.user)
        return run, handle

    async def stream(ctx: Ctx, thread_id: str | None, body: JSON) -> Response:
        run, handle = await create(ctx, thread_id, body)
        modes = modes_of(body.get("stream_mode"))

        async def cancel() -> None:
            if body.get("on_disconnect") == "cancel":
                current = await ctx.p.records.run(run["run_id"])
                if current is not None and current["status"] not in FINAL:
                    await ctx.p.cancel(current, action="interrupt", wait=False)

        return _stream_response(
            ctx,
            _frames(ctx, run, modes, None, fresh_handle=handle),
            _run_location(run, stream=True),
            on_disconnect=cancel,
        )

    async def wait(ctx: Ctx, thread_id: str | None, body: JSON) -> Response:
        run, _ = await create(ctx, thread_id, body)
        run = await ctx.p.join(run)
        return JSONResponse(
            await _output(ctx, run["thread_id"], run), headers=_run_location(run, stream=False)
        )

    @router.post("/threads/{thread_id}/runs/stream")
    async def thread_stream(thread_id: str, body: JSON = Body(...), ctx: Ctx = CtxDep) -> Response:
        return await stream(ctx, thread_id, body)

    @router.post("/runs/stream")
    async def threadless_stream(body: JSON = Body(...), ctx: Ctx = CtxDep) -> Response:
        return await stream(ctx, None, body)

    @router.post("/threads/{thread_id}/runs/wait")
    async def thread_wait(thread_id: str, body: JSON = Body(...), ctx: Ctx = CtxDep) -> Response:
        return await wait(ctx, thread_id, body)

    @router.post("/runs/wait")
    async def threadless_wait(body: JSON = Body(...), ctx: Ctx = CtxDep) -> Response:
        return await wait(ctx, None, body)

    @router.post("/threads/{thread_id}/runs")
    async def background(thread_id: str, body: JSON = Body(...), ctx: Ctx = CtxDep) -> Response:
        run, _ = await create(ctx, thread_id, body)
        return JSONResponse(run_view(run), headers=_run_location(run, stream=False))

    @router.post("/runs")
    async def threadless_background(body: JSON = Body(...), ctx: Ctx = CtxDep) -> Response:
        run, _ = await create(ctx, None, body)
        return JSONResponse(run_view(run), headers=_run_location(run, stream=False))

    @router.get("/threads/{thread_id}/runs")
    async def list_runs(
        thread_id: str,
        limit: int = Query(10, ge=0),
        offset: int = Query(0, ge=0),
        status: str | None = None,
        ctx: Ctx = CtxDep,
    ) -> list[JSON]:
        await ctx.p.conversation(thread_id, ctx.user)
        rows = await ctx.p.records.thread_runs(thread_id, limit=10_000)
        rows = [await ctx.p.settle(r) for r in rows]
        if status:
            rows = [r for r in rows if r["status"] == status]
        return [run_view(r) for r in rows[offset : offset + limit]]

    @router.get("/threads/{thread_id}/runs/{run_id}")
    async def get_run(thread_id: str, run_id: str, ctx: Ctx = CtxDep) -> JSON:
        return run_view(await ctx.p.run_row(thread_id, run_id, ctx.user))

    @router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
    async def delete_run(thread_id: str, run_id: str, ctx: Ctx = CtxDep) -> Response:
        run = await ctx.p.run_row(thread_id, run_id, ctx.user)
        if run["status"] not in FINAL:
            raise ProtocolError(409, f"run {run_id} is {run['status']}: cancel it first")
        await ctx.p.records.delete_run(run_id)
        return Response(status_code=204)

    @router.get("/threads/{thread_id}/runs/{run_id}/join")
    async def join(thread_id: str, run_id: str, ctx: Ctx = CtxDep) -> JSON:
        run = await ctx.p.join(await ctx.p.run_row(thread_id, run_id, ctx.user))
        return await _output(ctx, thread_id, run)

    @router.get("/threads/{thread_id}/runs/{run_id}/stream")
    async def join_stream(
        thread_id: str,
        run_id: str,
        request: Request,
        stream_mode: list[str] | None = Query(None),
        ctx: Ctx = CtxDep,
    ) -> Response:
        run = await ctx.p.run_row(thread_id, run_id, ctx.user)
        after = _last_event_id(request)
        return _stream_response(
            ctx,
            _frames(ctx, run, (modes_of(stream_mode) if stream_mode else None), after),
            _run_location(run, stream=True),
        )

    @router.get("/threads/{thread_id}/stream")
    async def thread_stream_join(
        thread_id: str,
        request: Request,
        stream_mode: list[str] | None = Query(None),
        ctx: Ctx = CtxDep,
    ) -> Response:
        """The thread's current run (else its latest), as `join_stream` gives it."""
        await ctx.p.conversation(thread_id, ctx.user)
        active = await ctx.p.active_runs(thread_id)
        runs = active or await ctx.p.records.thread_runs(thread_id, limit=1)
        if not runs:
            raise ProtocolError(404, f"thread {thread_id} has no runs")
        run = runs[0]
        after = _last_event_id(request)
        return _stream_response(
            ctx,
            _frames(ctx, run, (modes_of(stream_mode) if stream_mode else None), after),
            _run_location(run, stream=True),
        )

    @router.post("/threads/{thread_id}/runs/{run_id}/cancel")
    async def cancel(
        thread_id: str,
        run_id: str,
        wait: int = Query(0),
        action: str = Query("interrupt"),
        ctx: Ctx = CtxDep,
    ) -> Response:
        if action not in ("interrupt", "rollback"):
            raise ProtocolError(422, "action must be interrupt or rollback")
        run = await ctx.p.run_row(thread_id, run_id, ctx.user)
        if run["status"] in FINAL:
            raise ProtocolError(409, f"run {run_id} has already ended ({run['status']})")
        run = await ctx.p.cancel(run, action=action, wait=bool(wait))
        if wait:
            return JSONResponse(run_view(run))
        return Response(status_code=202)
