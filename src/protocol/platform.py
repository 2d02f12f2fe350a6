"""The agent platform's endpoints (issue 35), registered next to the protocol's own:
assistants (`assistant_routes.py`), crons (`cron_routes.py`) and a run's webhook deliveries."""

from __future__ import annotations

from fastapi import APIRouter

from . import webhooks
from .assistant_routes import add_assistants
from .cron_routes import add_crons
from .deps import JSON, Ctx, CtxDep, ProtocolError


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
