"""LangGraph's PostgreSQL saver on a connection pool, without its process-wide lock.

`AsyncPostgresSaver.from_conn_string` gives the saver one connection, and the saver guards
every statement with one `asyncio.Lock` (`_cursor`) even when handed a pool: with many runs
in flight, every checkpoint read and write of the process waits in one line, which held the
PostgreSQL path at about half a core. The lock only protects a single shared connection; a
pooled connection is used by one task at a time anyway. So this subclass takes a connection
from a `psycopg_pool.AsyncConnectionPool` per operation and skips the lock.

Writes are one statement each: a checkpoint with its blobs (`CHECKPOINT_SQL`) and a task's
pending writes (`INSERT_WRITES_SQL`) insert from arrays (`unnest`) with LangGraph's conflict
rules, instead of a statement per row. A run's checkpoint is written only while the run owns
its message (`run/ownership.py`): when the app store is this same database, `aput_owned`
checks that in the same statement (`OWNED_CHECKPOINT_SQL`) instead of a query of its own
through the app store.

The arrays are sent in binary (`%b`): psycopg's default (`%s`) sends a list in text form, a
`bytea[]` as one hex-escaped array literal, which the worker spent ~0.5 ms building for five
4 KB blobs (0.013 ms in binary, measured) and the server its `array_in` and `byteain` parsing
back (~3 % of PostgreSQL's CPU in a profile of the concurrency benchmark).

Connections are checked when taken from the pool (`_check`), mostly without a round trip.
Writes wait out a database outage (`store/outage_retry.py`): a run whose model answered while
the database was away keeps its step. The pool gives up reconnecting after
`RECONNECT_SECONDS`, and a write waits for a connection at most `CONNECT_WAIT_SECONDS` (then it
is tried again, and the pool opens a new connection at once) instead of the pool's own
reconnection backoff (1, 2, 4, … s, uncapped) and its 30 s wait.
"""

from __future__ import annotations

import asyncio
import select
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.types import ERROR, _DeltaSnapshot
from psycopg import AsyncConnection
from psycopg.errors import DivisionByZero
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from ..errors import LeaseLostError
from .store.outage_retry import through_outage
from .store.unit_of_work import (
    CONNECT_TIMEOUT_SECONDS,
    PING_IDLE_AFTER,  # the app store's pool uses the same
)

# A checkpoint as one statement: its blobs (from arrays) and its row, LangGraph's two upserts
# (`UPSERT_CHECKPOINT_BLOBS_SQL`, one per blob, and `UPSERT_CHECKPOINTS_SQL`) with the same
# conflict rules. `OWNED_CHECKPOINT_SQL` also checks a run's ownership: while the run owns the
# message `owned` reads 1 and the row is inserted from it; when it does not, `1 / 0` fails the
# statement, and nothing (blobs included) is written. (`one` is used, so it is computed.)
_BLOBS = (
    "blobs AS (INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type,"
    " blob) SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[],"
    " %b::bytea[]) ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING)"
)
_CHECKPOINT = (
    " INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,"
    " checkpoint, metadata) SELECT %s::text, %s::text, %s::text, %s::text, %s::jsonb, %s::jsonb"
)
_ON_CONFLICT = (
    " ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)"
    " DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata"
)
CHECKPOINT_SQL = f"WITH {_BLOBS}{_CHECKPOINT}{_ON_CONFLICT}"
OWNED_CHECKPOINT_SQL = (
    "WITH owned AS MATERIALIZED (SELECT 1 / count(*) AS one FROM af_messages"
    " WHERE id = %s AND run_token = %s),"
    f" {_BLOBS}{_CHECKPOINT} FROM owned WHERE one = 1{_ON_CONFLICT}"
)

# A task's pending writes as one statement from arrays, instead of LangGraph's statement per
# write (`executemany`, pipelined but still executed row by row): same rows, same conflicts.
_WRITES_FROM_ARRAYS = (
    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path,"
    " idx, channel, type, blob) SELECT * FROM unnest(%b::text[], %b::text[], %b::text[],"
    " %b::text[], %b::text[], %b::int4[], %b::text[], %b::text[], %b::bytea[])"
    " ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO "
)
INSERT_WRITES_SQL = _WRITES_FROM_ARRAYS + "NOTHING"
UPSERT_WRITES_SQL = (
    _WRITES_FROM_ARRAYS
    + "UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
)


# How long a checkpoint write waits for a pooled connection, and how long the pool keeps
# reconnecting in the background after the database went away (see the module docstring).
CONNECT_WAIT_SECONDS = CONNECT_TIMEOUT_SECONDS
RECONNECT_SECONDS = 2.0
FAIL_FAST_SECONDS = 0.5  # a write that is not waited out: its wait for a pooled connection


class PooledPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose operations run concurrently on pooled connections."""

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False, wait: float | None = None) -> AsyncIterator[Any]:
        assert isinstance(self.conn, AsyncConnectionPool)
        async with self.conn.connection(wait) as conn:
            if pipeline and self.supports_pipeline:
                async with conn.pipeline(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
            elif pipeline:
                async with (
                    conn.transaction(),
                    conn.cursor(binary=True, row_factory=dict_row) as cur,
                ):
                    yield cur
            else:
                async with conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The base `aput` (primitive values inline in the checkpoint row, the others and
        delta snapshots in `checkpoint_blobs`), encoded in the loop."""
        return await self.aput_owned(None, config, checkpoint, metadata, new_versions)

    async def aput_owned(
        self,
        owner: tuple[str, str] | None,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`aput`, written only while `owner` (message id, run token) still owns the message in
        `af_messages` of this database (checked in the same statement, `OWNED_CHECKPOINT_SQL`);
        raises `LeaseLostError` (nothing written) when it does not. `owner` None: no check."""
        configurable: dict[str, Any] = config.get("configurable", {})
        thread_id = configurable["thread_id"]
        checkpoint_ns = configurable["checkpoint_ns"]
        inline = dict(checkpoint["channel_values"])
        blob_values: dict[str, Any] = {}
        for key, value in checkpoint["channel_values"].items():
            if isinstance(value, _DeltaSnapshot):
                blob_values[key] = inline.pop(key)
                inline[key] = True  # the base saver's marker for "in the blobs table"
            elif not (value is None or isinstance(value, (str, int, float, bool))):
                blob_values[key] = inline.pop(key)
        row = {**checkpoint, "channel_values": inline}
        versions = {k: v for k, v in new_versions.items() if k in blob_values}
        blobs = self._dump_blobs(thread_id, checkpoint_ns, blob_values, versions)
        parameters = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            Jsonb(row),
            Jsonb(get_serializable_checkpoint_metadata(config, metadata)),
        )
        arrays: list[Any] = [list(column) for column in zip(*blobs, strict=True)] or [[]] * 6
        async def attempt(_again: bool) -> None:  # an upsert: a retry writes nothing twice
            async with self._cursor(wait=CONNECT_WAIT_SECONDS) as cur:
                if owner is None:
                    await cur.execute(CHECKPOINT_SQL, [*arrays, *parameters])
                else:
                    await cur.execute(OWNED_CHECKPOINT_SQL, [*owner, *arrays, *parameters])

        try:  # a run's step waits out an outage rather than failing (`store/outage_retry.py`)
            await through_outage(attempt, what=f"checkpoint of thread {thread_id}")
        except DivisionByZero:
            if owner is None:
                raise
            raise LeaseLostError(
                f"message {owner[0]} is no longer owned by this run; its checkpoint was not written",
                message_id=owner[0],
            ) from None
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
        """The base `aput_writes` (special channels upserted, others inserted once), encoded
        in the loop, and written with other tasks' writes as one statement
        (`UPSERT_WRITES_SQL`, `INSERT_WRITES_SQL`, `_GroupedWrites`)."""
        configurable: dict[str, Any] = config.get("configurable", {})
        special = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        rows = self._dump_writes(
            configurable["thread_id"],
            configurable["checkpoint_ns"],
            configurable["checkpoint_id"],
            task_id,
            task_path,
            writes,
        )
        if any(channel == ERROR for channel, _ in writes):  # a failed task: no work to keep,
            await self._put_rows(special, _once(special, rows), wait_out_outage=False)  # fail now
            return
        await _writes_of(self).put(special, rows)

    async def _put_rows(
        self, special: bool, rows: list[tuple[Any, ...]], *, wait_out_outage: bool = True
    ) -> None:
        """Write pending-write rows (of any tasks, each key once) as one statement; through an
        outage unless told not to."""
        if not rows:
            return
        query = UPSERT_WRITES_SQL if special else INSERT_WRITES_SQL
        arrays = [list(column) for column in zip(*rows, strict=True)]

        async def attempt(_again: bool) -> None:  # conflicts skip or upsert: retried safely
            # not waited out: a short wait for a connection (the pool is empty while the
            # database is away), so the run's failure reaches its readers at once
            wait = CONNECT_WAIT_SECONDS if wait_out_outage else FAIL_FAST_SECONDS
            async with self._cursor(wait=wait) as cur:
                await cur.execute(query, arrays)

        if wait_out_outage:
            await through_outage(attempt, what="pending checkpoint writes")
        else:
            await attempt(False)


Rows = list[tuple[Any, ...]]


class _GroupedWrites:
    """Pending writes of all tasks of a process, written together: the calls that arrive while
    a write is in flight go in the next statement (one per kind: upserted special channels,
    inserted others). A call returns once its rows are committed; a failed statement is
    retried call by call, so one call's error stays its own."""

    def __init__(self, saver: PooledPostgresSaver) -> None:
        self._saver = saver
        self._pending: list[tuple[bool, Rows, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None

    async def put(self, special: bool, rows: Rows) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((special, rows, future))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write_pending(), name="artifactflow-writes")
        await future

    async def _write_pending(self) -> None:
        while self._pending:
            calls, self._pending = self._pending, []
            for special in (False, True):
                group = [call for call in calls if call[0] is special]
                if group:
                    await self._write(special, group)

    async def _write(
        self, special: bool, group: list[tuple[bool, Rows, asyncio.Future[None]]]
    ) -> None:
        try:
            await self._saver._put_rows(
                special, _once(special, [r for _, rows, _ in group for r in rows])
            )
        except Exception as exc:
            if len(group) == 1:
                _settle(group[0][2], exc)
                return
            for call in group:  # find the call at fault: each alone
                try:
                    await self._saver._put_rows(special, _once(special, call[1]))
                except Exception as alone:
                    _settle(call[2], alone)
                else:
                    _settle(call[2], None)
        else:
            for _, _, future in group:
                _settle(future, None)


def _once(special: bool, rows: Rows) -> Rows:
    """Each key (thread, namespace, checkpoint, task, idx) once: one statement may not upsert a
    key twice, so for upserts the last write of a key wins, as it would row by row (inserting
    once, the first one wins by itself)."""
    if not special:
        return rows
    return list({row[:4] + row[5:6]: row for row in rows}.values())


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


_WRITES: weakref.WeakKeyDictionary[PooledPostgresSaver, _GroupedWrites] = (
    weakref.WeakKeyDictionary()
)


def _writes_of(saver: PooledPostgresSaver) -> _GroupedWrites:
    if saver not in _WRITES:
        _WRITES[saver] = _GroupedWrites(saver)
    return _WRITES[saver]


_RETURNED_AT: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


async def _returned(conn: AsyncConnection[Any]) -> None:
    """The pool's `reset`: note when the connection came back."""
    _RETURNED_AT[conn] = time.monotonic()


async def _check(conn: AsyncConnection[Any]) -> None:
    """The pool's `check`, mostly without a round trip. A connection the server closed (a
    restart, `pg_terminate_backend`) has its last message and end of stream waiting on its
    socket, which an idle connection otherwise never has: only then, or after
    `PING_IDLE_AFTER` in the pool, is it pinged (`check_connection`, a round trip), and a dead
    one is replaced by the pool."""
    returned = _RETURNED_AT.get(conn)
    fresh = returned is not None and time.monotonic() - returned < PING_IDLE_AFTER
    if not fresh or conn.closed or _readable(conn.pgconn.socket):
        await AsyncConnectionPool.check_connection(conn)


def _readable(fd: int) -> bool:
    """Whether the socket `fd` has something to read (or was closed), without waiting."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


async def open_pooled_saver(
    stack: AsyncExitStack, url: str, serde: Any, pool_size: int, synchronous_commit: str = "off"
) -> PooledPostgresSaver:
    """Open a pool of up to `pool_size` connections (at least 2; closed with `stack`) and a
    saver on it; the caller runs its `setup()`. The saver writes in autocommit mode, a commit
    per statement, so `synchronous_commit` (settings.database_synchronous_commit) decides most
    of its cost."""
    pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max(2, pool_size),
        open=False,
        reconnect_timeout=RECONNECT_SECONDS,
        # A connection is checked when taken from the pool (`_check`): after a server restart
        # the pooled ones are dead, and each would otherwise fail one checkpoint read or write
        # (a failed run) before being discarded.
        check=_check,
        reset=_returned,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "options": f"-c synchronous_commit={synchronous_commit}",
            "connect_timeout": int(CONNECT_TIMEOUT_SECONDS),  # libpq: a silent server fails fast
        },
    )
    await pool.open(wait=True)
    stack.push_async_callback(pool.close)
    return PooledPostgresSaver(pool, serde=serde)  # type: ignore[arg-type]
