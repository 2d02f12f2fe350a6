"""Runs: start (background, stream, wait), list, get, join, join_stream, cancel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Body, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.responses import StreamingResponse

from .body import json_response
from .convert import LEAD
from .deps import JSON, Ctx, CtxDep, ProtocolError, plain
from .records import FINAL
from .stream import (
    MODES,
    STATE_MODES,
    Frames,
    ResumeAt,
    frames_of,
    modes_of,
    sse,
    told_of_outage,
    with_heartbeat,
)
from .thread_ids import shown
from .threads import state_of
from .views import path_messages, path_to, run_view
from .wire import MAX_EVENT_ID, MAX_LIMIT, MAX_OFFSET, RunCreate, RunStatus

# --- runs --------------------------------------------------------------------------------------


def _run_location(run: JSON, *, stream: bool) -> dict[str, str]:
    base = f"/threads/{shown(run['thread_id'])}/runs/{run['run_id']}"
    return {"Location": base + ("/stream" if stream else ""), "Content-Location": base}


async def _output(ctx: Ctx, thread_id: str, run: JSON) -> JSON:
    conversation = await ctx.p.conversation(thread_id, ctx.user)
    state = await state_of(ctx, conversation)
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
            yield sse("metadata", {"run_id": run["run_id"], "attempt": 1}, f"{run['cursor']}-0")
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
    prior = (  # a new message's run starts at 0: nothing before it to read
        [e for e in await p.client.runs.events(run["message_id"]) if e.event_id <= read_after]
        if read_after > 0
        else []
    )
    frames = Frames(
        modes,
        run_id=run["run_id"],
        thread_id=shown(run["thread_id"]),
        message=message,
        base=await _base(p, run["thread_id"], message["parent_id"], modes),
        prior=prior,
        graph_id=run["assistant_id"] or LEAD,
        subgraphs=bool(request.get("stream_subgraphs")),
    )
    handle = (
        fresh_handle
        if fresh_handle is not None and after is None
        else await p.client.runs.get(run["message_id"], after_event_id=read_after)
    )
    ended = False
    try:
        async for chunk in frames_of(frames, aiter(handle), start=start, resume=after):
            yield chunk
        ended = True
    finally:
        # settled when the stream ends (a client reads the run next): by its watcher, if it
        # runs here and the run's segment ended (the watcher settles it next); else (another
        # worker's run, a client gone mid-run) by this reader, at once
        if not ended or await p.settled_here(run["run_id"]) is None:
            await p.settle(await p.records.run(run["run_id"]) or run)


async def _base(p: Any, thread_id: str, parent_id: str | None, modes: list[str]) -> list[JSON]:
    """The branch's messages before the run's own (what its states start from): read only
    for the modes that send states, and not at all for a thread's first message."""
    if parent_id is None or not STATE_MODES.intersection(modes):
        return []
    messages = plain(await p.client.conversations.messages(thread_id))
    return await path_messages(p.client, path_to({m["id"]: m for m in messages}, parent_id))


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

    where = headers.get("Location", "a run's stream")

    async def guarded() -> AsyncIterator[bytes]:
        finished = False
        try:
            async for chunk in with_heartbeat(told_of_outage(body, where), ctx.heartbeat):
                yield chunk
            finished = True
        finally:
            if not finished and on_disconnect is not None:
                with anyio.CancelScope(shield=True):
                    await on_disconnect()

    return _SSE(
        guarded(), headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **headers}
    )


def _joined(ctx: Ctx, run: JSON, request: Request, stream_mode: list[str] | None) -> Response:
    """A join of `run`'s stream from the client's `Last-Event-ID`, in the modes asked (else
    the run's own)."""
    return _stream_response(
        ctx,
        _frames(ctx, run, _asked_modes(stream_mode), _last_event_id(request)),
        _run_location(run, stream=True),
    )


def _asked_modes(stream_mode: list[str] | None) -> list[str] | None:
    """A join's `stream_mode` query, None when not given: `langgraph_sdk` sends `stream_mode=`
    (empty) for "the run's own modes", since httpx writes a None parameter as an empty one."""
    asked = [mode for mode in stream_mode or [] if mode]
    unknown = [mode for mode in asked if mode not in MODES]
    if unknown:
        raise ProtocolError(422, f"stream_mode: unknown mode(s) {unknown}; one of {list(MODES)}")
    return list(dict.fromkeys(asked)) or None


def _last_event_id(request: Request) -> ResumeAt | None:
    """`Last-Event-ID`: `E-k` (a frame), `E` (after our event E), `-1` or none (the start)."""
    raw = (request.headers.get("last-event-id") or "").strip()
    if raw in ("", "-1"):
        return None
    event, _, index = raw.partition("-")
    try:
        at = int(event), int(index) if index else 2**31
    except ValueError:
        at = (-1, -1)
    if not (0 <= at[0] < MAX_EVENT_ID and 0 <= at[1] <= 2**31):
        raise ProtocolError(
            422,
            f"Last-Event-ID must be an id this stream sent (E-k), an event id or -1, not {raw!r}",
        )
    return at


Run = Annotated[RunCreate, Body()]


def add_runs(router: APIRouter) -> None:
    async def stream(ctx: Ctx, thread_id: str | None, body: RunCreate) -> Response:
        run, handle = await ctx.p.create(thread_id, body, ctx.user)

        async def cancel() -> None:
            if body.on_disconnect == "cancel":
                current = await ctx.p.records.run(run["run_id"])
                if current is not None and current["status"] not in FINAL:
                    await ctx.p.cancel(current, action="interrupt", wait=False)

        return _stream_response(
            ctx,
            _frames(ctx, run, body.modes, None, fresh_handle=handle),
            _run_location(run, stream=True),
            on_disconnect=cancel,
        )

    async def wait(ctx: Ctx, thread_id: str | None, body: RunCreate) -> Response:
        run, _ = await ctx.p.create(thread_id, body, ctx.user)
        run = await ctx.p.join(run)
        return json_response(
            await _output(ctx, run["thread_id"], run), headers=_run_location(run, stream=False)
        )

    async def background(ctx: Ctx, thread_id: str | None, body: RunCreate) -> Response:
        run, _ = await ctx.p.create(thread_id, body, ctx.user)
        # handed to the engine, not yet begun: `pending`, as LangGraph's server answers a new
        # run (`runs.get` reads `running` from then on)
        shown = {**run, "status": "pending"} if run["status"] == "running" else run
        return JSONResponse(run_view(shown), headers=_run_location(run, stream=False))

    @router.post("/threads/{thread_id}/runs/stream")
    async def thread_stream(thread_id: str, body: Run, ctx: Ctx = CtxDep) -> Response:
        return await stream(ctx, thread_id, body)

    @router.post("/runs/stream")
    async def threadless_stream(body: Run, ctx: Ctx = CtxDep) -> Response:
        return await stream(ctx, None, body)

    @router.post("/threads/{thread_id}/runs/wait")
    async def thread_wait(thread_id: str, body: Run, ctx: Ctx = CtxDep) -> Response:
        return await wait(ctx, thread_id, body)

    @router.post("/runs/wait")
    async def threadless_wait(body: Run, ctx: Ctx = CtxDep) -> Response:
        return await wait(ctx, None, body)

    @router.post("/threads/{thread_id}/runs")
    async def thread_background(thread_id: str, body: Run, ctx: Ctx = CtxDep) -> Response:
        return await background(ctx, thread_id, body)

    @router.post("/runs")
    async def threadless_background(body: Run, ctx: Ctx = CtxDep) -> Response:
        return await background(ctx, None, body)

    @router.get("/threads/{thread_id}/runs")
    async def list_runs(
        thread_id: str,
        limit: int = Query(10, ge=0, le=MAX_LIMIT),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
        status: RunStatus | None = None,
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
    async def join(thread_id: str, run_id: str, ctx: Ctx = CtxDep) -> Response:
        run = await ctx.p.join(await ctx.p.run_row(thread_id, run_id, ctx.user))
        return json_response(await _output(ctx, thread_id, run))

    @router.get("/threads/{thread_id}/runs/{run_id}/stream")
    async def join_stream(
        thread_id: str,
        run_id: str,
        request: Request,
        stream_mode: list[str] | None = Query(None),
        ctx: Ctx = CtxDep,
    ) -> Response:
        run = await ctx.p.run_row(thread_id, run_id, ctx.user)
        return _joined(ctx, run, request, stream_mode)

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
            raise ProtocolError(404, f"thread {shown(thread_id)} has no runs")
        run = runs[0]
        return _joined(ctx, run, request, stream_mode)

    @router.post("/threads/{thread_id}/runs/{run_id}/cancel")
    async def cancel(
        thread_id: str,
        run_id: str,
        wait: bool = Query(False),
        action: Literal["interrupt", "rollback"] = Query("interrupt"),
        ctx: Ctx = CtxDep,
    ) -> Response:
        run = await ctx.p.run_row(thread_id, run_id, ctx.user)
        if run["status"] in FINAL:  # as LangGraph's server answers: no active run by that id
            raise ProtocolError(404, f"run {run_id} has already ended ({run['status']})")
        run = await ctx.p.cancel(run, action=action, wait=bool(wait))
        if wait:
            return JSONResponse(run_view(run))
        return Response(status_code=202)
