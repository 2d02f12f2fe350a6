"""Group commit of event batches across all runs of a process.

Each run's `EventSink` already commits the events that pile up while its previous write is in
flight as one transaction. With many runs at once that is still one commit per run per burst,
and every commit is a write lock (SQLite has one writer at a time), a thread hop per statement
(aiosqlite) or round trips (PostgreSQL). Here the batches of *all* runs that wait while a
write is in flight go into the next transaction together: one INSERT of many rows. Order
within a run is kept (a run waits for its batch before sending the next one).

Other append-only rows written at the same moments (the recorded model calls of
`replay/store.py`) can join the same transaction through `insert`.

A failed combined write is retried batch by batch, so one run's bad batch (say a duplicate
event id) fails that run only.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any

from . import schema as t

if TYPE_CHECKING:
    from .repository import AppStore

# (message id, events) for the event log, or (None, (table, rows)) for other inserts.
Batch = tuple[Any, Any, "asyncio.Future[None]"]


class GroupCommit:
    """Writes event batches of many messages in as few transactions as possible."""

    def __init__(self, store: AppStore) -> None:
        self._store = store
        self._pending: list[Batch] = []
        self._task: asyncio.Task[None] | None = None

    async def append(self, message_id: str, events: list[dict[str, Any]]) -> None:
        """Store `events` of `message_id` (all or none); returns once they are committed."""
        await self._submit(message_id, events)

    async def insert(self, table: Any, rows: list[dict[str, Any]]) -> None:
        """Insert `rows` into `table` (all or none); returns once they are committed."""
        await self._submit(None, (table, rows))

    async def _submit(self, key: Any, payload: Any) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((key, payload, future))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write_pending(), name="artifactflow-group-commit")
        await future

    async def _write_pending(self) -> None:
        while self._pending:
            batches, self._pending = self._pending, []
            if len(batches) == 1:
                await self._one(batches[0])
                continue
            try:
                await self._together(batches)
            except Exception:  # find the batch at fault: each alone
                for batch in batches:
                    await self._one(batch)
            else:
                for _, _, future in batches:
                    if not future.done():
                        future.set_result(None)

    async def _one(self, batch: Batch) -> None:
        key, payload, future = batch
        try:
            if key is None:
                await self._together([batch])
            else:
                await self._store.append_events(key, payload)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(None)

    async def _together(self, batches: list[Batch]) -> None:
        inserts: dict[Any, list[dict[str, Any]]] = {}
        for key, payload, _ in batches:
            if key is None:
                table, rows = payload
                inserts.setdefault(table, []).extend(rows)
            else:
                inserts.setdefault(t.events, []).extend(self._store._event_row(key, e) for e in payload)
        async with self._store.engine.begin() as conn:
            for table, rows in inserts.items():
                await conn.execute(table.insert(), rows)


_WRITERS: weakref.WeakKeyDictionary[Any, GroupCommit] = weakref.WeakKeyDictionary()


def group_commit_for(store: AppStore) -> GroupCommit:
    writer = _WRITERS.get(store)
    if writer is None:
        writer = _WRITERS[store] = GroupCommit(store)
    return writer
