"""LangGraph's PostgreSQL saver on a connection pool, without its process-wide lock.

`AsyncPostgresSaver.from_conn_string` gives the saver one connection, and the saver guards
every statement with one `asyncio.Lock` (`_cursor`) even when handed a pool: with many runs
in flight, every checkpoint read and write of the process waits in one line, which held the
PostgreSQL path at about half a core. The lock only protects a single shared connection; a
pooled connection is used by one task at a time anyway. So this subclass takes a connection
from a `psycopg_pool.AsyncConnectionPool` per operation and skips the lock; pipelined writes
(`aput`, `aput_writes`, deletes) still go in one round trip each.
"""

from __future__ import annotations

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
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool


class PooledPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose operations run concurrently on pooled connections."""

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
        assert isinstance(self.conn, AsyncConnectionPool)
        async with self.conn.connection() as conn:
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
        async with self._cursor(pipeline=True) as cur:
            if blobs:
                await cur.executemany(self.UPSERT_CHECKPOINT_BLOBS_SQL, blobs)
            await cur.execute(self.UPSERT_CHECKPOINTS_SQL, parameters)
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
        in the loop."""
        configurable: dict[str, Any] = config.get("configurable", {})
        special = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        query = self.UPSERT_CHECKPOINT_WRITES_SQL if special else self.INSERT_CHECKPOINT_WRITES_SQL
        rows = self._dump_writes(
            configurable["thread_id"],
            configurable["checkpoint_ns"],
            configurable["checkpoint_id"],
            task_id,
            task_path,
            writes,
        )
        async with self._cursor(pipeline=True) as cur:
            await cur.executemany(query, rows)


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
        # A connection is checked when taken from the pool: after a server restart the
        # pooled ones are dead, and each would otherwise fail one checkpoint read or write
        # (a failed run) before being discarded.
        check=AsyncConnectionPool.check_connection,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "options": f"-c synchronous_commit={synchronous_commit}",
        },
    )
    await pool.open(wait=True)
    stack.push_async_callback(pool.close)
    return PooledPostgresSaver(pool, serde=serde)  # type: ignore[arg-type]
