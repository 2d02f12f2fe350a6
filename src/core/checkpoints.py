"""The process's one checkpoint saver: SQLite (own file, WAL) or PostgreSQL.

Checkpoints matter only while a run is in flight or paused; once a message finishes, the
event log holds the record and its thread's checkpoints are deleted (see `ExecutionController`
and `artifactflow gc`).
"""

from __future__ import annotations

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

# Bound the write-ahead log: fold it into the main file every 256 pages (4 MB of 16 KB pages,
# instead of SQLite's 1000 pages = 16 MB) and shrink the file back to 4 MB after it is reset,
# so a long run's WAL does not stay at its peak (33 MB was seen for one 200-round run).
WAL_BOUNDS = ("PRAGMA wal_autocheckpoint=256", "PRAGMA journal_size_limit=4194304")
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
            packed = zlib.compress(data, 6)
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
        conn = await stack.enter_async_context(aiosqlite.connect(str(path)))
        # Both only take effect on a new file, and page_size must come first. Rows of a few KB
        # (tool results) would each spill into a mostly-empty 4 KB overflow page; 16 KB pages
        # pack them densely. Incremental auto-vacuum lets gc hand freed pages back cheaply.
        await conn.execute("PRAGMA page_size=16384")
        await conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA busy_timeout=30000")
        await conn.execute("PRAGMA synchronous=NORMAL")
        for pragma in WAL_BOUNDS:
            await conn.execute(pragma)
        saver = AsyncSqliteSaver(conn, serde=CompressingSerializer(allowed_types))
        await saver.setup()
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
        from .pg_saver import open_pooled_saver

        stack = AsyncExitStack()
        plain = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        saver = await open_pooled_saver(
            stack, plain, CompressingSerializer(allowed_types), pool_size, synchronous_commit
        )
        return cls(saver, stack, None)

    async def delete_thread(self, thread_id: str) -> None:
        await self.saver.adelete_thread(thread_id)

    async def has_checkpoint(self, thread_id: str) -> bool:
        config: Any = {"configurable": {"thread_id": thread_id}}
        return await self.saver.aget_tuple(config) is not None

    async def wal_checkpoint(self) -> None:
        """Fold the WAL into the main file (so file sizes measure what is stored)."""
        if isinstance(self.saver, AsyncSqliteSaver):
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
