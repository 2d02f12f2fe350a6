"""The crons endpoints, as `langgraph_sdk`'s `client.crons` calls them: create (threadless or
for a thread), search, count, update, delete (`crons.py` does the work). Bodies are pydantic
models: a wrong type is a 422 and nothing is stored; a bad schedule, zone, assistant, run
configuration or webhook too, with a message that names it."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from . import assistants_store, thread_ids, webhooks
from .crons import Crons, cron_view, parse_time
from .deps import JSON, Ctx, CtxDep
from .wire import AnyJSON, Id, JSONObject, Limit, Offset, StreamMode, Text, Wire

RUN_KEYS = ("input", "config", "context", "metadata", "webhook", "multitask_strategy", "stream_mode")


class CronCreate(Wire):

    assistant_id: Id
    schedule: Annotated[Text, Field(min_length=1, max_length=200)]
    timezone: Text | None = None
    end_time: Text | None = None
    enabled: bool = True
    input: AnyJSON = None
    config: JSONObject | None = None
    context: JSONObject | None = None
    metadata: JSONObject = Field(default_factory=dict)
    webhook: Text | None = None
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] | None = None
    on_run_completed: Literal["delete", "keep"] | None = None
    stream_mode: StreamMode | list[StreamMode] | None = None


class CronPatch(Wire):

    schedule: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    timezone: Text | None = None
    end_time: Text | None = None
    enabled: bool | None = None
    input: AnyJSON = None
    config: JSONObject | None = None
    context: JSONObject | None = None
    metadata: JSONObject | None = None
    webhook: Text | None = None


class CronSearch(Wire):

    assistant_id: Id | None = None
    thread_id: Id | None = None
    enabled: bool | None = None
    metadata: JSONObject | None = None
    limit: Limit = 10
    offset: Offset = 0
    sort_by: Literal["cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"] | None = None
    sort_order: Literal["asc", "desc"] | None = None


async def _checked_payload(ctx: Ctx, assistant_id: str, body: BaseModel) -> dict[str, Any]:
    """The run body each tick starts, checked now as a run would be (nothing stored if not)."""
    payload = {k: v for k, v in body.model_dump().items() if k in RUN_KEYS and v is not None}
    assistant = await assistants_store.find(ctx.p, assistant_id, user=ctx.user)
    assistants_store.run_config(ctx.p, assistant, payload)
    await webhooks.check(ctx.p.client.settings.webhooks, payload.get("webhook"))
    return payload


async def _views(ctx: Ctx, rows: list[dict[str, Any]]) -> list[JSON]:
    """The crons as shown, each thread by the id its owner knows (`thread_ids.py`)."""
    threads = await ctx.p.records.thread_rows([r["thread_id"] for r in rows if r["thread_id"]])
    for key, thread in threads.items():
        thread_ids.show_as(key, thread.get("public_id"))
    views = [cron_view(r) for r in rows]
    for view in views:
        if view["thread_id"] is not None:
            view["thread_id"] = thread_ids.shown(view["thread_id"])
    return views


def add_crons(router: APIRouter) -> None:
    async def create(ctx: Ctx, thread_id: str | None, body: CronCreate) -> JSON:
        if thread_id is not None:
            await ctx.p.conversation(thread_id, ctx.user)
        payload = await _checked_payload(ctx, body.assistant_id, body)
        if body.on_run_completed is not None:
            payload["on_run_completed"] = body.on_run_completed
        row = await Crons(ctx.p).create(
            assistant_id=body.assistant_id,
            thread_id=thread_id,
            user_id=ctx.user,
            schedule=body.schedule,
            timezone=body.timezone,
            end_time=parse_time(body.end_time),
            enabled=body.enabled,
            payload=payload,
            metadata=body.metadata,
        )
        return (await _views(ctx, [row]))[0]

    @router.post("/runs/crons")
    async def create_threadless(body: CronCreate, ctx: Ctx = CtxDep) -> JSON:
        return await create(ctx, None, body)

    @router.post("/threads/{thread_id}/runs/crons")
    async def create_for_thread(thread_id: str, body: CronCreate, ctx: Ctx = CtxDep) -> JSON:
        return await create(ctx, thread_id, body)

    async def found(ctx: Ctx, body: CronSearch) -> list[JSON]:
        thread_id = body.thread_id
        if thread_id is not None:  # the caller's thread of that id (`thread_ids.py`)
            with contextlib.suppress(thread_ids.TakenError):
                thread_id = await thread_ids.resolve(ctx.p.client.admin.store, thread_id, ctx.user)
        rows = await Crons(ctx.p).search(
            ctx.user,
            assistant_id=body.assistant_id,
            thread_id=thread_id,
            enabled=body.enabled,
            metadata=body.metadata,
        )
        views = await _views(ctx, rows)
        if body.sort_by:
            views.sort(key=lambda v: str(v.get(body.sort_by or "") or ""), reverse=body.sort_order == "desc")
        return views

    @router.post("/runs/crons/search")
    async def search(body: CronSearch | None = None, ctx: Ctx = CtxDep) -> list[JSON]:
        body = body or CronSearch()
        return (await found(ctx, body))[body.offset : body.offset + body.limit]

    @router.post("/runs/crons/count")
    async def count(body: CronSearch | None = None, ctx: Ctx = CtxDep) -> int:
        return len(await found(ctx, body or CronSearch()))

    @router.patch("/runs/crons/{cron_id}")
    async def update(cron_id: str, body: CronPatch, ctx: Ctx = CtxDep) -> JSON:
        crons = Crons(ctx.p)
        row = await crons.get(cron_id, ctx.user)
        given = body.model_dump(exclude_unset=True)
        changes: dict[str, Any] = {k: given[k] for k in ("schedule", "timezone", "enabled", "metadata") if given.get(k) is not None}
        if "end_time" in given:
            changes["end_time"] = parse_time(given["end_time"])
        changes["payload"] = {
            **{k: v for k, v in row["payload"].items() if k in RUN_KEYS},
            **{k: v for k, v in given.items() if k in RUN_KEYS and v is not None},
        }
        probe = CronCreate(assistant_id=row["assistant_id"], schedule=row["schedule"], **changes["payload"])
        await _checked_payload(ctx, row["assistant_id"], probe)
        return (await _views(ctx, [await crons.update(cron_id, ctx.user, changes)]))[0]

    @router.delete("/runs/crons/{cron_id}", status_code=204)
    async def delete(cron_id: str, ctx: Ctx = CtxDep) -> Response:
        await Crons(ctx.p).delete(cron_id, ctx.user)
        return Response(status_code=204)
