"""The platform's background work in a server (started in the HTTP app's lifespan): the cron
scheduler (`crons.py`) and the store's TTL sweeper (`store_ttl.py`). Every worker runs both;
the compare-and-set on a cron's next time and idempotent deletes make that safe."""

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
        if settings.crons.enabled:
            protocol = getattr(self.state, "protocol", None)
            if protocol is None or protocol.client is not client:
                protocol = self.state.protocol = Protocol(client)
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
