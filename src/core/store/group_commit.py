"""Group commit of event batches across all runs of a process.

Each run's `EventSink` already commits the events that pile up while its previous write is in
flight as one transaction. With many runs at once that is still one commit per run per burst,
and every commit is a write lock (SQLite has one writer at a time), a thread hop per statement
(aiosqlite) or round trips (PostgreSQL). Here the batches of *all* runs that wait while a
write is in flight go into the next transaction together: one INSERT of many rows. Order
within a run is kept (a run waits for its batch before sending the next one).

Other append-only rows written at the same moments (the recorded model calls of
`replay/store.py`) can join the same transaction through `insert`.

On PostgreSQL the whole group is one statement (`EventLog.append_together`), one round trip
with no BEGIN/COMMIT.

A run's batch carries its run token: inside the shared transaction each message's row is
locked and checked first (in message-id order, so two workers' transactions cannot deadlock),
and the batch of a run that lost its message is left out and fails alone with
`LeaseLostError`, exactly as `append_events` would. A failed combined write is retried batch by
batch, so one run's bad batch (say a duplicate event id) fails that run only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ...errors import LeaseLostError
from . import schema as t
from .codec import event_row
from .sqlite_writer import sqlite_writer_for

if TYPE_CHECKING:
    from .repository import AppStore
    from .sqlite_writer import SqliteWriter

Rows = Sequence[Mapping[str, Any]]
RunKey = tuple[str, "str | None"]  # (message id, run token)
# (run key, events) for the event log, or (None, (table, rows)) otherwise.
Batch = tuple["RunKey | None", Any, "asyncio.Future[None]"]


class GroupCommit:
    """Writes event batches of many messages in as few transactions as possible."""

    def __init__(self, store: AppStore) -> None:
        self._store = store
        self._pending: list[Batch] = []
        self._task: asyncio.Task[None] | None = None

    async def append(self, message_id: str, events: Rows, *, run_token: str | None = None) -> None:
        """Store `events` of `message_id` (all or none; with `run_token` only while that run
        owns the message, `LeaseLostError` otherwise); returns once they are committed."""
        await self._submit((message_id, run_token), events)

    async def insert(self, table: sa.Table, rows: Rows) -> None:
        """Insert `rows` into `table` (all or none); returns once they are committed."""
        await self._submit(None, (table, rows))

    def insert_soon(self, table: sa.Table, rows: Rows) -> asyncio.Future[None]:
        """`insert` without waiting: the rows join the transaction of whatever else is
        submitted before the event loop's next turn (a run's events emitted right after), and
        the returned future says when they are committed (or why not)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._pending.append((None, (table, rows), future))
        loop.call_soon(self._start)  # after what is ready now, so they can join
        return future

    def _start(self) -> None:
        """Start the writing task unless it is running (it takes what is pending then)."""
        if self._pending and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(
                self._write_pending(), name="artifactflow-group-commit"
            )

    async def _submit(self, key: RunKey | None, payload: Any) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((key, payload, future))
        self._start()
        await future

    async def _write_pending(self) -> None:
        while self._pending:
            batches, self._pending = self._pending, []
            writer = sqlite_writer_for(self._store)
            if writer is not None:
                await self._on_writer(writer, batches)
                continue
            if len(batches) == 1:
                await self._one(batches[0])
                continue
            try:
                lost = await self._together(batches)
            except Exception:  # find the batch at fault: each alone
                for batch in batches:
                    await self._one(batch)
            else:
                for key, _, future in batches:
                    if future.done():
                        continue
                    if key in lost:
                        future.set_exception(_lease_lost(key[0]))
                    else:
                        future.set_result(None)

    async def _on_writer(self, writer: SqliteWriter, batches: list[Batch]) -> None:
        """SQLite: the whole group in one transaction on the store's writer thread; on any
        failure each batch is written again through SQLAlchemy alone (its own error, typed as
        before, fails only its run)."""
        owned = sorted(
            {(key[0], key[1]) for key, _, _ in batches if key is not None and key[1] is not None}
        )
        try:
            parts: list[tuple[Any, sa.Table, Rows]] = []
            for key, payload, _ in batches:
                if key is None:
                    parts.append((None, *payload))
                else:
                    parts.append((key, t.events, [event_row(key[0], e) for e in payload]))
            lost = await writer.write(owned, parts)
        except Exception:
            for batch in batches:
                await self._one(batch)
            return
        for key, _, future in batches:
            if not future.done():
                if key in lost:
                    future.set_exception(_lease_lost(key[0]))
                else:
                    future.set_result(None)

    async def _one(self, batch: Batch) -> None:
        key, payload, future = batch
        try:
            if key is None:
                await self._together([batch])
            else:
                await self._store.append_events(key[0], payload, run_token=key[1])
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(None)

    async def _together(self, batches: list[Batch]) -> set[RunKey]:
        """One transaction for all; returns the keys of the runs that lost their message."""
        if not self._store.is_sqlite:  # one statement (`EventLog.append_together`)
            runs = [
                (key[0], key[1], [event_row(key[0], e) for e in payload])
                for key, payload, _ in batches
                if key is not None
            ]
            others = [payload for key, payload, _ in batches if key is None]
            return set(await self._store.append_together(runs, others))
        lost: set[RunKey] = set()
        async with self._store.transaction() as conn:
            owned = [
                (key[0], key[1]) for key, _, _ in batches if key is not None and key[1] is not None
            ]
            lost.update(await self._store._lock_owned(conn, owned))
            inserts: dict[sa.Table, list[Mapping[str, Any]]] = {}
            for key, payload, _ in batches:
                if key is None:
                    table, rows = payload
                    inserts.setdefault(table, []).extend(rows)
                elif key not in lost:
                    inserts.setdefault(t.events, []).extend(event_row(key[0], e) for e in payload)
            for table, rows in inserts.items():
                if rows:
                    await conn.execute(table.insert(), rows)
        return lost


def _lease_lost(message_id: str) -> LeaseLostError:
    return LeaseLostError(
        f"message {message_id} is no longer owned by this run (another process took it over "
        "or it was cancelled); its events were not written",
        message_id=message_id,
    )


def group_commit_for(store: AppStore) -> GroupCommit:
    """The store's one group commit (all runs of a process share it)."""
    return store.companion(GroupCommit)
