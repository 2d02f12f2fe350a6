"""Several workers on one PostgreSQL database: what one worker asks of the others.

- **Cancel and delete from any worker.** A cancel is recorded in the database first
  (`cancel.py`), then goes out on the bus (`af_control`); the owner cancels its task at once,
  and the run ends the usual way (status `cancelled`, a final `cancelled` event). A cancel for
  a run not running here (yet) needs no memory: the run reads the recorded cancel when it
  starts.
- **Recovery.** With `run.recover_on_start`, a worker picks up runs whose owner died (status
  `running`, lease expired) when it starts, and keeps looking every half lease while it runs, so
  a surviving worker takes over a dead peer's runs. Claiming is the usual compare-and-set, so
  of several workers exactly one recovers a run.
- **A run limit per database** (`run.max_runs_per_database`): runs whose lease is live are
  counted in the database; on PostgreSQL the count and the start happen under one advisory
  lock, so workers starting runs at the same moment cannot both take the last place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from ...errors import ArtifactFlowError, ResumeConflictError
from ..store import schema as t
from . import segment
from .bus import PgBus
from .endings import keep_settling
from .runtime import Runtime

log = logging.getLogger("artifactflow.workers")

SLOT_LOCK_KEY = 0x6166_736C_6F74  # "afslot": serialises run starts across workers
SETTLE_SECONDS = 5.0  # how often marked endings are looked for


class RunLimitReached(ArtifactFlowError):
    """`run.max_runs_per_database` runs are in progress across all workers."""

    def __init__(self, running: int, limit: int) -> None:
        super().__init__(
            f"{running} runs are in progress in this database (limit run.max_runs_per_database "
            f"= {limit}); retry in a few seconds"
        )
        self.running = running
        self.limit = limit


@dataclass
class Workers:
    """This process's part in a group of workers: the bus and the recovery task."""

    rt: Runtime
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(BaseException):
                await task
        await self.rt.bus.close()


async def start(rt: Runtime) -> Workers:
    """Join the group: on PostgreSQL listen on the bus (answering cancels for runs here); with
    `run.recover_on_start`, recover dead owners' runs now and every half lease."""
    settings = rt.services.settings
    if not rt.store.is_sqlite and settings.database_url:
        rt.bus = PgBus(settings.database_url, rt.store.engine)
        rt.bus.on_control(lambda message: _on_control(rt, message))
        await rt.bus.start()
    workers = Workers(rt)
    # endings left by stopped processes (a full disk, an outage at exit): `endings.py`
    workers.tasks.append(asyncio.create_task(keep_settling(rt, SETTLE_SECONDS), name="artifactflow-endings"))
    if settings.run.recover_on_start:
        period = settings.run.lease_seconds / 2
        workers.tasks.append(asyncio.create_task(_keep_recovering(rt, period), name="artifactflow-recovery"))
    return workers


async def _on_control(rt: Runtime, message: dict[str, Any]) -> None:
    op, message_id = message.get("op"), str(message.get("m"))
    if op == "cancel" and rt.running_here(message_id):
        await segment.cancel(rt, message_id)  # the cancel is recorded: a run starting later sees it
    elif op == "watch":
        handle = rt.runs.get(message_id)
        if handle is None or handle.done:
            rt.bus.remember_watch(message_id)  # its run may start here in a moment
            return
        if not handle.watched:
            handle.watched = True
            await rt.bus.publish_position(message_id, handle.last_stored())


# --- recovery ----------------------------------------------------------------------------------


async def recover_dead_runs(rt: Runtime) -> list[str]:
    """Continue every run whose owner died (lease expired); returns the ids recovered here."""
    from .resume import recover

    recovered = []
    for message in await rt.store.messages_with_status(["running"]):
        if message["id"] in rt.runs or not rt.lease_expired(message):
            continue
        try:
            await recover(rt, message)
        except ResumeConflictError as exc:  # another worker was faster, or nothing to recover
            log.info("not recovering %s: %s", message["id"], exc)
            continue
        log.warning("recovered run %s (its owner's lease expired)", message["id"])
        recovered.append(message["id"])
    return recovered


async def _keep_recovering(rt: Runtime, period: float) -> None:
    """At once (the worker is starting), then every `period` seconds."""
    while True:
        try:
            await recover_dead_runs(rt)
        except Exception:
            log.exception("recovery sweep failed; trying again in %.1f s", period)
        await asyncio.sleep(period)


# --- a run limit per database -------------------------------------------------------------------


async def _running(conn: Any, now: float) -> int:
    query = sa.select(sa.func.count()).select_from(t.messages).where(
        t.messages.c.status == "running",
        sa.or_(t.messages.c.lease_expires_at.is_(None), t.messages.c.lease_expires_at > now),
    )
    return int((await conn.execute(query)).scalar_one())


@asynccontextmanager
async def database_slot(rt: Runtime, limit: int | None) -> AsyncIterator[None]:
    """Hold while starting a run: `RunLimitReached` when `limit` live runs exist already."""
    if limit is None:
        yield
        return
    async with rt.store.engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        locked = not rt.store.is_sqlite
        if locked:
            await conn.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": SLOT_LOCK_KEY})
        try:
            running = await _running(conn, rt.clock())
            if running >= limit:
                raise RunLimitReached(running, limit)
            yield
        finally:
            if locked:
                await conn.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": SLOT_LOCK_KEY})
