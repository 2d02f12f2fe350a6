"""What the Agent Protocol needs stored beyond our conversations: a thread's metadata and the
protocol's runs (one per started segment: a new message, a resume, a workflow; or a queued
request not started yet).

A thread IS a conversation (its key is the conversation's id); `ap_threads` only adds its
free-form metadata and, for a key derived from its owner's id (`thread_ids.py`), the id its
owner knows it by (`public_id`). A run row
points at the message whose segment it is (`message_id`, `cursor`: the event id its segment
starts after), so its events, status and answer are read from our event log, never copied.
The tables are declared with the app store's (`core/store/schema.py`) and made by its schema
step (version 7; before, this layer made them on first use, racing other workers); every row
is the user's own (`user_id`).

A conversation deleted below this layer (`/api/v1`, the CLI, the facade: they know nothing of
these tables) leaves its rows here. They are never shown (every thread is read through its
conversation, so such a thread is a 404 and absent from searches) and are removed lazily:
`purge_orphans` runs when the tables are first used and on every thread search (a read that
finds none in the usual case), and a thread found missing has its rows deleted there and then.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..core.store import ap_statements as fast
from ..core.store.schema import ap_runs as runs
from ..core.store.schema import ap_threads as threads
from ..core.store.schema import conversations
from ..core.store.sqlite_writer import sqlite_writer_for

if TYPE_CHECKING:
    from ..core.store.repository import AppStore

FINAL = frozenset({"success", "error", "interrupted", "timeout"})
_SLOW = object()  # `_on_writer`: take the SQLAlchemy path


class ProtocolRecords:
    """Thread metadata and protocol runs over the app store's engine."""

    def __init__(self, store: AppStore) -> None:
        self.store = store
        self._ready = False
        self._lock = asyncio.Lock()

    async def ready(self) -> ProtocolRecords:
        """The records, once their first use has removed the rows of conversations deleted
        below this layer (the tables themselves come from the schema step)."""
        if not self._ready:
            async with self._lock:
                if not self._ready:
                    self._ready = True
                    await self.purge_orphans()
        return self

    async def _on_writer(self, job: Callable[[sqlite3.Connection], Any]) -> Any:
        """`job` on a SQLite store's writer thread (`ap_statements.py`: fixed SQL, one hop);
        `_SLOW` for PostgreSQL and memory stores, or when the driver failed (the SQLAlchemy
        path then repeats the statement and raises what callers expect)."""
        writer = sqlite_writer_for(self.store)
        if writer is None:
            return _SLOW
        try:
            return await writer.run(job)
        except sqlite3.Error:
            return _SLOW

    @property
    def _dialect(self) -> Any:
        return self.store.engine.dialect

    # --- threads ---------------------------------------------------------------------------

    async def thread_row(self, thread_id: str) -> dict[str, Any] | None:
        row = await self._on_writer(fast.thread_job(thread_id))
        if row is not _SLOW:
            return None if row is None else _decoded(row)
        rows = await self.store.fetch_rows(
            sa.select(threads).where(threads.c.thread_id == thread_id)
        )
        return _decoded(rows[0]) if rows else None

    async def thread_rows(self, thread_ids: list[str]) -> dict[str, dict[str, Any]]:
        if not thread_ids:
            return {}
        rows = await self.store.fetch_rows(
            sa.select(threads).where(threads.c.thread_id.in_(thread_ids))
        )
        return {r["thread_id"]: _decoded(r) for r in rows}

    async def put_thread(
        self,
        thread_id: str,
        user_id: str | None,
        meta: dict[str, Any],
        public_id: str | None = None,
        *,
        existing: dict[str, Any] | None | bool = True,
    ) -> dict[str, Any]:
        """Insert or replace the thread's metadata row; the row as written. A new row keeps
        `public_id`, the id its owner knows it by when it differs from the key
        (`thread_ids.py`). `existing`: the row as the caller just read it (None: it has
        none), so it is not read again; True (the default): read it here."""
        now = time.time()
        if existing is True:
            existing = await self.thread_row(thread_id)
        if isinstance(existing, dict):
            values = {"metadata": json.dumps(meta), "updated_at": now}
            job = fast.update_thread_job(self._dialect, thread_id, values)
            if await self._on_writer(job) is _SLOW:
                await self.store.write(
                    threads.update().where(threads.c.thread_id == thread_id).values(**values)
                )
            return {**existing, "metadata": meta, "updated_at": now}
        row = {"thread_id": thread_id, "user_id": user_id,
               "public_id": public_id if public_id != thread_id else None, "metadata": meta,
               "created_at": now, "updated_at": now}
        stored = {**row, "metadata": json.dumps(meta)}
        # a key taken (a driver error) goes the SQLAlchemy way: `insert_once` says False
        inserted = await self._on_writer(fast.insert_job(self._dialect, "ap_threads", stored))
        if inserted is _SLOW:
            inserted = await self.store.insert_once(threads.insert().values(**stored))
        if inserted:
            return row
        # another request made it between the read and the insert: write over it, as before
        return await self.put_thread(thread_id, user_id, meta, public_id)

    async def merge_thread_metadata(
        self,
        thread_id: str,
        user_id: str | None,
        extra: dict[str, Any],
        public_id: str | None = None,
    ) -> dict[str, Any]:
        row = await self.thread_row(thread_id)
        meta = {**(row["metadata"] if row else {}), **extra}
        return await self.put_thread(thread_id, user_id, meta, public_id, existing=row)

    async def add_thread_defaults(
        self,
        thread_id: str,
        user_id: str | None,
        defaults: dict[str, Any],
        public_id: str | None = None,
    ) -> None:
        """Set the keys of `defaults` the thread's metadata does not have yet (a run's
        `assistant_id` and `graph_id`, as the first run sets them): one read, and a write only
        when a key is missing (not on a thread's later runs)."""
        row = await self.thread_row(thread_id)
        meta = row["metadata"] if row else {}
        missing = {k: v for k, v in defaults.items() if k not in meta}
        if missing or row is None:
            await self.put_thread(thread_id, user_id, {**meta, **missing}, public_id, existing=row)

    async def delete_thread(self, thread_id: str) -> None:
        await self.store.write(
            runs.delete().where(runs.c.thread_id == thread_id),
            threads.delete().where(threads.c.thread_id == thread_id),
        )

    async def purge_orphans(self) -> int:
        """Delete the rows of threads whose conversation no longer exists; the number of
        threads they belonged to. Only reads when there are none."""
        orphan_ids = sorted(
            {
                r["thread_id"]
                for table in (threads, runs)
                for r in await self.store.fetch_rows(
                    sa.select(table.c.thread_id)
                    .where(~sa.exists().where(conversations.c.id == table.c.thread_id))
                    .distinct()
                )
            }
        )
        for thread_id in orphan_ids:
            await self.delete_thread(thread_id)
        return len(orphan_ids)

    async def forget_if_orphan(self, thread_id: str) -> None:
        """The thread was not found for someone: delete its rows if its conversation is gone
        (not if it merely belongs to another user)."""
        if await self.store.fetch_rows(
            sa.select(conversations.c.id).where(conversations.c.id == thread_id)
        ):
            return
        has_row = await self.thread_row(thread_id) is not None
        if has_row or await self.thread_runs(thread_id, limit=1):
            await self.delete_thread(thread_id)

    # --- runs ------------------------------------------------------------------------------

    async def add_run(self, **values: Any) -> dict[str, Any]:
        """Insert a run row; the row as stored (not read back: every column is known here)."""
        now = time.time()
        row: dict[str, Any] = {
            "message_id": None, "cursor": 0, "user_id": None, "request": None,
            **values, "created_at": now, "updated_at": now,
        }
        row.setdefault("run_id", str(uuid.uuid4()))
        row["metadata"] = row.get("metadata") or {}
        stored = {**row, "metadata": json.dumps(row["metadata"])}
        if row["request"] is not None:
            stored["request"] = json.dumps(row["request"])
        if await self._on_writer(fast.insert_job(self._dialect, "ap_runs", stored)) is _SLOW:
            await self.store.write(runs.insert().values(**stored))
        return row

    async def run(self, run_id: str) -> dict[str, Any] | None:
        row = await self._on_writer(fast.run_job(run_id))
        if row is not _SLOW:
            return None if row is None else _decoded(row)
        rows = await self.store.fetch_rows(sa.select(runs).where(runs.c.run_id == run_id))
        return _decoded(rows[0]) if rows else None

    async def thread_runs(
        self,
        thread_id: str,
        *,
        statuses: tuple[str, ...] = (),
        limit: int = 100,
        offset: int = 0,
        oldest_first: bool = False,
    ) -> list[dict[str, Any]]:
        job = fast.thread_runs_job(thread_id, statuses, limit, offset, oldest_first)
        found = await self._on_writer(job)
        if found is not _SLOW:
            return [_decoded(r) for r in found]
        order = runs.c.created_at.asc() if oldest_first else runs.c.created_at.desc()
        query = sa.select(runs).where(runs.c.thread_id == thread_id).order_by(order, runs.c.run_id)
        if statuses:
            query = query.where(runs.c.status.in_(statuses))
        rows = await self.store.fetch_rows(query.limit(limit).offset(offset))
        return [_decoded(r) for r in rows]

    async def running_runs(self, limit: int = 1000) -> list[dict[str, Any]]:
        """Runs still `running` here, in any thread (the oldest first)."""
        query = sa.select(runs).where(runs.c.status == "running").order_by(runs.c.created_at)
        return [_decoded(r) for r in await self.store.fetch_rows(query.limit(limit))]

    async def set_run(self, run_id: str, *, when: tuple[str, ...] = (), **values: Any) -> bool:
        """Update the run; with `when`, only if its status is one of those (compare-and-set:
        the row count says who won)."""
        return await self.update_run(run_id, when=when, **values) is not None

    async def update_run(
        self, run_id: str, *, when: tuple[str, ...] = (), **values: Any
    ) -> float | None:
        """`set_run`, returning the `updated_at` it wrote when it did (None when it did not),
        so a caller holding the row has it as stored without reading it again."""
        now = time.time()
        count = await self._on_writer(
            fast.update_run_job(self._dialect, run_id, when, {**values, "updated_at": now})
        )
        if count is not _SLOW:
            return now if count == 1 else None
        query = runs.update().where(runs.c.run_id == run_id)
        if when:
            query = query.where(runs.c.status.in_(when))
        return now if await self.store.write(query.values(updated_at=now, **values)) == 1 else None

    async def delete_run(self, run_id: str) -> None:
        await self.store.write(runs.delete().where(runs.c.run_id == run_id))


def _decoded(row: Any) -> dict[str, Any]:
    out = dict(row)
    out["metadata"] = json.loads(out.get("metadata") or "{}")
    if out.get("request"):
        out["request"] = json.loads(out["request"])
    return out
