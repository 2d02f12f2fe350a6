"""Storage upkeep at quiet moments, off every run's path.

When a message finishes and its checkpoints are deleted, the pages they held are free but
still in the checkpoint file, and both SQLite files keep a write-ahead log. Handing the pages
back (`incremental_vacuum`) and emptying the logs (`wal_checkpoint(TRUNCATE)`) cost about
20 ms, an fsync or two, and wait for other connections; done at the end of each run, that was
the largest fixed cost of a short run, and the next run (or the caller reading the result)
waited for it. Here a finished run only asks for it (`request`); one background task per
engine does it once nothing has run for `QUIET_SECONDS`, however many runs asked meanwhile.

Storage stays bounded as before: under steady load freed pages are reused and each log is
bounded by `WAL_BOUNDS`; the upkeep catches up at the first quiet moment, and an engine that
closes with upkeep still due does it then (`close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..checkpoints import truncate_sqlite_wal

if TYPE_CHECKING:
    from ..checkpoints import CheckpointStore
    from ..store.repository import AppStore
    from .live import LiveRun

log = logging.getLogger("artifactflow")

QUIET_SECONDS = 0.5  # no run in flight for this long: a quiet moment


class QuietUpkeep:
    """Vacuums the checkpoint file and empties the write-ahead logs when runs are quiet."""

    def __init__(
        self, checkpoints: CheckpointStore, store: AppStore, runs: Mapping[str, LiveRun]
    ) -> None:
        self._checkpoints = checkpoints
        self._store = store
        self._runs = runs  # the runs in flight in this process (`Runtime.runs`)
        self._due = False
        self._task: asyncio.Task[None] | None = None
        self._running = False  # the task is past waiting: `close` lets it finish
        self.quiet_seconds = QUIET_SECONDS
        self.passes = 0  # upkeep passes made (many requests, one pass)

    @property
    def due(self) -> bool:
        """A finished message asked for upkeep that has not been done yet."""
        return self._due

    def request(self) -> None:
        """A message finished: do the upkeep at the next quiet moment."""
        self._due = True
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._when_quiet(), name="artifactflow-upkeep")

    def _busy(self) -> bool:
        return any(not handle.done for handle in self._runs.values())

    async def _when_quiet(self) -> None:
        while True:
            await asyncio.sleep(self.quiet_seconds)
            if not self._busy():
                break
        self._running = True
        try:
            await self.run()
        except Exception:  # the next request (or gc) tries again
            log.warning("storage upkeep failed; it is tried again later", exc_info=True)
        finally:
            self._running = False

    async def run(self) -> None:
        """Do the upkeep now (if due)."""
        if not self._due:
            return
        self._due = False
        self.passes += 1
        await self._checkpoints.vacuum()
        if self._store.is_sqlite:
            await truncate_sqlite_wal(self._store.engine)

    async def idle(self) -> None:
        """Wait until the pending pass (if any) is done."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def close(self) -> None:
        """Stop waiting; do what is still due (the files are left compact)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            if not self._running:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            await self.run()
        except Exception:
            log.warning("storage upkeep at close failed", exc_info=True)
