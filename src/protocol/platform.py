"""The agent platform's endpoints (issue 35), registered next to the protocol's own:
assistants (`assistant_routes.py`), crons (`cron_routes.py`) and a run's webhook deliveries."""

from __future__ import annotations

from fastapi import APIRouter, Response

from . import webhooks
from .assistant_routes import add_assistants
from .body import json_response
from .cron_routes import add_crons
from .deps import JSON, Ctx, CtxDep, ProtocolError
from .thread_copy import copy_thread
from .threads import _thread as thread_view


def add_platform(router: APIRouter) -> None:
    add_assistants(router)
    add_crons(router)

    @router.get("/threads/{thread_id}/runs/{run_id}/webhook")
    async def webhook(thread_id: str, run_id: str, ctx: Ctx = CtxDep) -> JSON:
        """The run's webhook delivery: its URL, status and every attempt."""
        await ctx.p.run_row(thread_id, run_id, ctx.user)
        row = await webhooks.delivery(ctx.p.client.admin.store, run_id)
        if row is None:
            raise ProtocolError(404, f"run {run_id} has no webhook")
        return row

    @router.post("/threads/{thread_id}/copy")
    async def copy(thread_id: str, ctx: Ctx = CtxDep) -> Response:
        """A new thread with this one's values, metadata and finished history (thread_copy.py)."""
        await ctx.p.conversation(thread_id, ctx.user)
        new_id = await copy_thread(ctx.p.client.admin.store, thread_id, ctx.user)
        row = await ctx.p.records.thread_row(thread_id)
        await ctx.p.records.put_thread(new_id, ctx.user, dict(row["metadata"]) if row else {})
        return json_response(await thread_view(ctx, new_id))
