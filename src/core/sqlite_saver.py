"""LangGraph's `AsyncSqliteSaver` with one thread hop per operation on the hot path.

aiosqlite runs each call (execute, fetch, commit, closing a cursor) on its connection's
thread and hands the result back through the event loop: a hop costs a queue put, a wake-up
of the loop and a GIL hand-over. LangGraph's saver makes 3 hops per checkpoint (`aput`), 4 per
step's pending writes (`aput_writes`), 6 per read (`aget_tuple`) and 4 per thread deletion;
at 100 concurrent conversations these hops were most of the checkpointer's cost. Here each of
those operations is one function run on the same connection's thread: the same statements in
the same order, under the same lock (durability is unchanged: a checkpoint is committed before
`aput` returns, as with `durability="sync"` before). The operations of many runs waiting at
once share one trip and one commit (`_shared_trip`). Encoding and decoding stay on the event
loop, as in LangGraph's saver.

Everything else (setup, `alist`, delta-channel history, the sync API) is LangGraph's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.checkpoint.sqlite.utils import load_pending_writes, pending_writes_sql

T = TypeVar("T")

CHECKPOINT_EVERY = 64  # trips committed on the loop's thread between two WAL checkpoints
_NO_WAIT = "PRAGMA busy_timeout=0"
_WAIT = "PRAGMA busy_timeout=30000"  # the connection's own (SQLITE_PRAGMAS)
_CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"

_PUT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_WRITES = (
    "INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, "
    "type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_LATEST = (
    "SELECT thread_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM "
    "checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1"
)
_BY_ID = (
    "SELECT thread_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM "
    "checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)


def _together(
    fns: Sequence[Callable[[sqlite3.Connection], Any]], conn: sqlite3.Connection
) -> list[tuple[bool, Any]]:
    """Run `fns` on `conn` in order, in one transaction: (True, result) for each. If any
    fails, nothing of them is kept and each runs again alone, committed on its own as before:
    (True, result) or (False, its error) for each."""
    if len(fns) > 1:
        try:
            results = [fn(conn) for fn in fns]
            conn.commit()
            return [(True, value) for value in results]
        except Exception:  # find the one at fault: each alone
            if conn.in_transaction:
                conn.rollback()
    out: list[tuple[bool, Any]] = []
    for fn in fns:
        try:
            value = fn(conn)
            conn.commit()
            out.append((True, value))
        except Exception as exc:  # that operation's own error, as when alone
            if conn.in_transaction:
                conn.rollback()
            out.append((False, exc))
    return out


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    return cast(dict[str, Any], config)["configurable"]  # a KeyError without it, as LangGraph's


class OneHopSqliteSaver(AsyncSqliteSaver):
    """`AsyncSqliteSaver` whose put, put_writes, get_tuple and delete_thread each make one trip
    to the connection's thread — or share one: the operations of all runs that wait while a
    trip is under way go together in the next (`_shared_trip`)."""

    _waiting: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] | None = None
    _trips: asyncio.Task[None] | None = None
    # Trips may run on the loop's thread (`_here`): set by `CheckpointStore.open` once the
    # connection may be used from it (opened with `check_same_thread=False`, no
    # checkpoint at commit: `wal_autocheckpoint=0`).
    inline_trips_ok = False
    _commits_here = 0
    _background: set[asyncio.Task[None]] = set()  # noqa: RUF012  # strong refs, shared: tasks end

    async def setup(self) -> None:
        """LangGraph's, skipped once done: it takes the saver's lock before it looks, so every
        operation (its own `aget_delta_channel_history` too) queued behind the trip under way."""
        if not self.is_setup:
            await super().setup()

    async def _on_thread(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(connection)` on the aiosqlite connection's own thread (its only user)."""
        conn = self.conn
        return await conn._execute(lambda: fn(conn._conn))  # noqa: SLF001  # aiosqlite's own queue

    def _here(self, fns: Sequence[Callable[[sqlite3.Connection], Any]]) -> list[tuple[bool, Any]] | None:
        """The trip on the event loop's own thread (the caller holds the saver's lock, so the
        connection's thread is idle), without a hop: waking that thread while the loop holds
        the GIL cost more than the statements (WAL, `synchronous=NORMAL`: a commit does not
        sync). Taken when the write lock is free at once and every operation succeeds
        together; else nothing is kept and None says: make the trip (`_together`) there,
        where a lock held by another process is waited for and each operation runs alone."""
        raw = getattr(self.conn, "_conn", None)  # aiosqlite's sqlite3 connection
        if raw is None or not self.inline_trips_ok or len(fns) > 1:
            return None  # several runs' operations at once: the hop is shared (as the writer's)
        raw.execute(_NO_WAIT)
        try:
            raw.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # another connection writes: wait on the thread
            return None
        finally:
            raw.execute(_WAIT)
        try:
            results = [fn(raw) for fn in fns]
            raw.commit()
        except Exception:  # noqa: BLE001  # each alone on the thread, as `_together` does
            if raw.in_transaction:
                raw.rollback()
            return None
        self._commits_here += 1
        if self._commits_here >= CHECKPOINT_EVERY:
            self._commits_here = 0
            task = asyncio.get_running_loop().create_task(self._checkpoint())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return [(True, value) for value in results]

    async def _checkpoint(self) -> None:
        """What `wal_autocheckpoint` does at a commit, on the connection's thread (its sync
        off the loop): a passive checkpoint under the saver's lock."""
        async with self.lock:
            with contextlib.suppress(sqlite3.Error):
                await self._on_thread(lambda conn: conn.execute(_CHECKPOINT).fetchall())

    async def _shared_trip(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` on the connection's thread, under the saver's lock, in the same trip
        as the operations of other runs waiting at the same moment.

        The saver serialises its operations on one connection anyway (its lock); at 100 runs
        at once each waited for the lock and then made a trip of its own, and committed on its
        own. Now the operations that queue up while a trip is under way run in the next one,
        in the order they were asked, and commit together (group commit: one write of the
        pages they share to the WAL; each caller returns after that commit, so durability is
        as before). If any of them fails, the transaction is rolled back and each runs again
        alone with its own commit, so each gets its own result or error as before (`fn` must
        not commit). An operation whose caller was cancelled before its trip began is left
        out, as a caller cancelled while waiting for the lock never ran."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if self._waiting is None:
            self._waiting = []
        self._waiting.append((fn, future))
        if self._trips is None or self._trips.done():
            self._trips = asyncio.create_task(
                self._make_trips(), name="artifactflow-checkpoint-trips"
            )
        return await future

    async def _make_trips(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            batch = [(fn, future) for fn, future in batch if not future.done()]
            if not batch:
                continue

            fns = [fn for fn, _ in batch]
            try:
                async with self.lock:
                    outcomes = self._here(fns)
                    if outcomes is None:
                        outcomes = await self._on_thread(functools.partial(_together, fns))
            except Exception as exc:  # the trip itself failed (the connection is closed)
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            except BaseException:  # this task was cancelled (the loop is closing): so are they
                for _, future in [*batch, *(self._waiting or [])]:
                    future.cancel()
                raise
            for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self.aput_checked(None, config, checkpoint, metadata, new_versions)

    async def aput_checked(
        self,
        check: Callable[[], None] | None,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`aput`, calling `check()` on the connection's thread first, in the same trip: an
        exception from it writes nothing (the owning run's check, `core/run/ownership.py`)."""
        await self.setup()
        configurable = _configurable(config)
        thread_id = configurable["thread_id"]
        checkpoint_ns = configurable["checkpoint_ns"]
        type_, serialized_checkpoint = self.serde.dumps_typed(checkpoint)
        serialized_metadata = json.dumps(
            get_checkpoint_metadata(config, metadata), ensure_ascii=False
        ).encode("utf-8", "ignore")
        row = (
            str(thread_id),
            checkpoint_ns,
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            type_,
            serialized_checkpoint,
            serialized_metadata,
        )

        def put(conn: sqlite3.Connection) -> None:
            if check is not None:
                check()
            conn.execute(_PUT, row).close()

        await self._shared_trip(put)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        verb = (
            "INSERT OR REPLACE "
            if all(w[0] in WRITES_IDX_MAP for w in writes)
            else "INSERT OR IGNORE "
        )
        await self.setup()
        configurable = _configurable(config)
        rows = [
            (
                str(configurable["thread_id"]),
                str(configurable["checkpoint_ns"]),
                str(configurable["checkpoint_id"]),
                task_id,
                task_path,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                *self.serde.dumps_typed(value),
            )
            for idx, (channel, value) in enumerate(writes)
        ]

        def put(conn: sqlite3.Connection) -> None:
            conn.executemany(verb + _WRITES, rows).close()

        await self._shared_trip(put)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        await self.setup()
        configurable = _configurable(config)
        checkpoint_ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        thread_id = str(configurable["thread_id"])
        writes_sql = pending_writes_sql(self._has_task_path)

        def read(conn: sqlite3.Connection) -> tuple[Any, list[Any]] | None:
            if checkpoint_id:
                cursor = conn.execute(_BY_ID, (thread_id, checkpoint_ns, checkpoint_id))
            else:
                cursor = conn.execute(_LATEST, (thread_id, checkpoint_ns))
            try:
                value = cursor.fetchone()
                if value is None:
                    return None
                cursor.execute(writes_sql, (thread_id, checkpoint_ns, str(value[1])))
                return value, cursor.fetchall()
            finally:
                cursor.close()

        found = await self._shared_trip(read)
        if found is None:
            return None
        (found_thread, found_id, parent_id, type_, checkpoint, metadata), writes = found
        if not checkpoint_id:
            config = {
                "configurable": {
                    "thread_id": found_thread,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": found_id,
                }
            }
        return CheckpointTuple(
            config,
            self.serde.loads_typed((type_, checkpoint)),
            cast(CheckpointMetadata, json.loads(metadata) if metadata is not None else {}),
            {
                "configurable": {
                    "thread_id": found_thread,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": parent_id,
                }
            }
            if parent_id
            else None,
            load_pending_writes(writes, self.serde),
        )

    async def adelete_thread(self, thread_id: str) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            cursor = conn.cursor()
            try:
                cursor.execute("DELETE FROM checkpoints WHERE thread_id = ?", (str(thread_id),))
                cursor.execute("DELETE FROM writes WHERE thread_id = ?", (str(thread_id),))
            finally:
                cursor.close()

        await self._shared_trip(delete)
