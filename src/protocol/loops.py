"""The platform's background work in a server (started in the HTTP app's lifespan): the cron
scheduler (`crons.py`), the store's TTL sweeper (`store_ttl.py`) and the settling of runs
whose worker died (`Protocol.settle_running`: their status and webhook). Every worker runs
them all; the compare-and-sets on a cron's next time and on a run's status, and idempotent
deletes, make that safe."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .crons import CronScheduler
from .service import Protocol
from .store_ttl import ttl_store_of

log = logging.getLogger("artifactflow.platform")
SETTLE_SECONDS = 5.0  # how often runs whose worker died are looked for (their webhooks)


async def _every(seconds: float, work: Callable[[], Awaitable[Any]], what: str) -> None:
    while True:
        try:
            await work()
        except Exception:  # the database may be away for a moment: try again next time
            log.exception("%s", what)
        await asyncio.sleep(seconds)


class PlatformLoops:
    def __init__(self, state: Any) -> None:
        self.state = state
        self.tasks: list[asyncio.Task[None]] = []
        self.scheduler: CronScheduler | None = None

    def start(self) -> PlatformLoops:
        client = self.state.client
        if client is None:
            return self
        settings = client.settings
        protocol = getattr(self.state, "protocol", None)
        if protocol is None or protocol.client is not client:
            protocol = self.state.protocol = Protocol(client)

        async def settle() -> None:
            await protocol.records.ready()
            await protocol.settle_running()

        self.tasks.append(
            asyncio.create_task(_every(SETTLE_SECONDS, settle, "settling protocol runs"), name="artifactflow-settle")
        )
        if settings.crons.enabled:
            scheduler = self.scheduler = CronScheduler(protocol)

            async def tick() -> None:
                await protocol.records.ready()
                await scheduler.tick()

            self.tasks.append(
                asyncio.create_task(_every(settings.crons.poll_seconds, tick, "cron tick"), name="artifactflow-crons")
            )
        store = ttl_store_of(self.state)
        self.tasks.append(
            asyncio.create_task(
                _every(settings.store_ttl.sweep_seconds, store.sweep, "store TTL sweep"), name="artifactflow-store-ttl"
            )
        )
        return self

    async def stop(self) -> None:
        tasks = [*self.tasks, *(self.scheduler.cleanups if self.scheduler else ())]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
