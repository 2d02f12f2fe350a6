"""The process's one checkpoint saver: SQLite (own file, WAL) or PostgreSQL.

Checkpoints matter only while a run is in flight or paused; once a message finishes, the
event log holds the record and its thread's checkpoints are deleted (see `core/run/maintenance.py`
and `artifactflow gc`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import zlib
from collections.abc import Iterable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from .sqlite_saver import OneHopSqliteSaver
from .store.readonly import read_only_target, writable
from .store.unit_of_work import SQLITE_PRAGMAS, WAL_BOUNDS, retry_when_locked

__all__ = ["WAL_BOUNDS", "CheckpointStore", "CompressingSerializer", "truncate_sqlite_wal"]

QUIET_BUSY_MS = 200  # housekeeping at quiet moments waits this long for another process


async def truncate_sqlite_wal(engine: Any) -> None:
    """Fold an SQLite engine's WAL into its file and empty it, unless another process is busy
    with the file (then it stays bounded by `WAL_BOUNDS` and is emptied another time)."""
    async with engine.connect() as conn:
        await conn.exec_driver_sql(f"PRAGMA busy_timeout={QUIET_BUSY_MS}")
        try:
            await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        except Exception:  # busy
            pass
        finally:
            await conn.exec_driver_sql("PRAGMA busy_timeout=30000")


# Any 64-bit number unique to this lock (the app store's schema lock uses another).
SETUP_LOCK_KEY = 0x6166_5F63_6B70  # "af_ckp"
SETUP_POLL_SECONDS = 0.05


async def _advisory_lock(conn: Any, key: int) -> None:
    """Take a session advisory lock by polling, not by waiting inside one statement: the
    holder's setup runs CREATE INDEX CONCURRENTLY, which waits for every open transaction,
    including a blocked `pg_advisory_lock` call (a deadlock)."""
    while True:
        cursor = await conn.execute("SELECT pg_try_advisory_lock(%s) AS locked", (key,))
        row = await cursor.fetchone()  # the saver's connection returns dict rows
        if row["locked"] if isinstance(row, dict) else row[0]:
            return
        await asyncio.sleep(SETUP_POLL_SECONDS)


class CompressingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, strict, with zlib on large blobs.

    Strict whatever the environment says (no `LANGGRAPH_STRICT_MSGPACK` needed): state holds
    plain data, so only LangGraph's own safe types and `allowed_types` are ever constructed
    when a checkpoint is read; any other object comes back as its raw data (and LangGraph logs
    a warning naming it). Put a type on `allowed_types` only if it must survive a checkpoint.

    Every checkpoint row repeats the channel-version maps (~2 KB for this graph), and tool
    results are text; both compress well. The type tag records the compression, so rows
    written without it still load.
    """

    PREFIX = "z:"
    THRESHOLD = 512

    def __init__(self, allowed_types: Iterable[type | tuple[str, ...]] = ()) -> None:
        super().__init__(allowed_msgpack_modules=tuple(allowed_types) or None)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = super().dumps_typed(obj)
        if len(data) >= self.THRESHOLD:
            packed = zlib.compress(data, 1)
            if len(packed) < len(data):
                return self.PREFIX + type_, packed
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_.startswith(self.PREFIX):
            return super().loads_typed((type_[len(self.PREFIX) :], zlib.decompress(payload)))
        return super().loads_typed(data)


class CheckpointStore:
    """Owns the saver and whatever connection it needs; one per process."""

    def __init__(self, saver: BaseCheckpointSaver, stack: AsyncExitStack, path: Path | None) -> None:
        self.saver = saver
        self._stack = stack
        self.path = path

    @classmethod
    async def open_sqlite(
        cls, path: Path, *, allowed_types: Iterable[type | tuple[str, ...]] = ()
    ) -> CheckpointStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        stack = AsyncExitStack()
        if not writable(path):  # a read-only data folder: read what is there (store/readonly.py)
            return await cls._open_read_only(path, stack, allowed_types)
        # Usable from the event loop's thread too (`OneHopSqliteSaver._here`, under its lock).
        conn = await stack.enter_async_context(aiosqlite.connect(str(path), check_same_thread=False))
        # The same pragmas as the app store's file (page size and WAL bounds included). The
        # saver's setup is then safe from several processes at once: it only creates tables
        # IF NOT EXISTS and tolerates a column another process just added; a stale WAL
        # snapshot fails at once, whatever busy_timeout says, and is retried briefly.
        for pragma in SQLITE_PRAGMAS:
            await conn.execute(pragma)
        # Its commits do not checkpoint the WAL (a checkpoint syncs): the saver does it on
        # the connection's thread every so many trips made on the loop's (`_here`).
        await conn.execute("PRAGMA wal_autocheckpoint=0")
        saver = OneHopSqliteSaver(conn, serde=CompressingSerializer(allowed_types))
        saver.inline_trips_ok = True
        await retry_when_locked(saver.setup, sqlite3.OperationalError)
        return cls(saver, stack, path)

    @classmethod
    async def _open_read_only(
        cls, path: Path, stack: AsyncExitStack, allowed_types: Iterable[type | tuple[str, ...]]
    ) -> CheckpointStore:
        target, exists = read_only_target(path)
        conn = await stack.enter_async_context(aiosqlite.connect(target, uri=exists))
        saver = AsyncSqliteSaver(conn, serde=CompressingSerializer(allowed_types))
        if exists:
            saver.is_setup = True  # its tables exist; setup would write
        else:
            await saver.setup()  # no checkpoints to read: an empty saver in memory
        return cls(saver, stack, path)

    @classmethod
    async def open_postgres(
        cls,
        url: str,
        *,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        pool_size: int = 10,
        synchronous_commit: str = "off",
    ) -> CheckpointStore:
        from psycopg_pool import AsyncConnectionPool

        from .pg_saver import open_pooled_saver

        stack = AsyncExitStack()
        plain = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        saver = await open_pooled_saver(
            stack, plain, CompressingSerializer(allowed_types), pool_size, synchronous_commit
        )
        # The saver's setup reads its migration version, then creates tables and records
        # versions: two processes starting together on a fresh database would both do it
        # (a unique violation on pg_type or checkpoint_migrations). One at a time, then: the
        # lock is held by one pooled connection while the setup runs on another.
        pool = saver.conn
        assert isinstance(pool, AsyncConnectionPool)
        async with pool.connection() as conn:
            await _advisory_lock(conn, SETUP_LOCK_KEY)
            try:
                await saver.setup()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))
        return cls(saver, stack, None)

    async def delete_thread(self, thread_id: str) -> None:
        await self.saver.adelete_thread(thread_id)

    async def thread_ids(self) -> set[str]:
        """Every thread that has checkpoint rows or pending writes (gc compares them with the
        messages)."""
        if isinstance(self.saver, AsyncSqliteSaver):
            query = "SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM writes"
            async with self.saver.lock, self.saver.conn.execute(query) as cursor:
                return {row[0] for row in await cursor.fetchall()}
        from .pg_saver import PooledPostgresSaver  # loaded already: the saver is one

        assert isinstance(self.saver, PooledPostgresSaver)
        query = "SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM checkpoint_writes"
        async with self.saver._cursor() as cur:  # the pooled saver's: a connection of its own
            await cur.execute(query)
            return {row["thread_id"] if isinstance(row, dict) else row[0] for row in await cur.fetchall()}

    async def has_checkpoint(self, thread_id: str) -> bool:
        config: Any = {"configurable": {"thread_id": thread_id}}
        return await self.saver.aget_tuple(config) is not None

    async def wal_checkpoint(self) -> None:
        """Fold the WAL into the main file (so file sizes measure what is stored)."""
        if isinstance(self.saver, AsyncSqliteSaver):
            async with self.saver.lock:  # the saver may use the connection from the loop
                await self.saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def vacuum(self) -> None:
        """Give the pages of deleted checkpoints back to the file system and empty the WAL
        (SQLite only). Called by gc, and when a message finishes while no other run of this
        process is in flight (a quiet moment: under load freed pages are reused anyway)."""
        if isinstance(self.saver, AsyncSqliteSaver):
            async with self.saver.lock:
                conn = self.saver.conn
                # Another process busy with the file must not stall us: give up quickly.
                await conn.execute(f"PRAGMA busy_timeout={QUIET_BUSY_MS}")
                try:
                    # Through executescript (sqlite3_exec): the pragma frees one page per
                    # step, and `execute` steps a statement without result columns only once.
                    await conn.commit()
                    await conn.executescript("PRAGMA incremental_vacuum;")
                    await (await conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")).fetchall()
                except sqlite3.OperationalError:  # busy: the pages are reused anyway
                    pass
                finally:
                    await conn.execute("PRAGMA busy_timeout=30000")

    async def close(self) -> None:
        await self._stack.aclose()
