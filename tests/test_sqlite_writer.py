"""The SQLite store's writer: a job runs on the event loop's thread when the writer is idle,
on the writer's thread when it must wait (a lock held elsewhere, a durable commit, jobs queued
before it), once, in order, and the loop never waits for another process's lock."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from waiting import wait_until

from artifactflow.core.store.repository import AppStore
from artifactflow.core.store.sqlite_writer import SqliteWriter, sqlite_writer_for


async def _writer(tmp_path: Path) -> tuple[AppStore, SqliteWriter]:
    store = await AppStore.open(None, sqlite_path=tmp_path / "app.db")
    writer = sqlite_writer_for(store)
    assert writer is not None
    await writer.run(lambda conn: conn.execute("CREATE TABLE t (i INTEGER)"))
    return store, writer


def _insert(i: int, threads: list[int]):
    def job(conn: sqlite3.Connection) -> None:
        threads.append(threading.get_ident())
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO t VALUES (?)", (i,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    return job


async def test_an_idle_writer_runs_the_job_here_a_durable_one_on_its_thread(tmp_path: Path):
    store, writer = await _writer(tmp_path)
    try:
        threads: list[int] = []
        await writer.run(_insert(1, threads))
        assert threads == [threading.get_ident()] and writer.inline_jobs >= 1

        def durable(conn: sqlite3.Connection) -> int:
            threads.append(threading.get_ident())
            return conn.execute("PRAGMA synchronous").fetchone()[0]

        assert await writer.transact(durable, durable=True) == 2  # FULL, on the thread
        assert threads[1] != threading.get_ident()
    finally:
        await store.close()


async def test_a_lock_held_elsewhere_is_waited_for_on_the_thread_not_the_loop(tmp_path: Path):
    """Another connection holds the write lock: the job's inline attempt gives up at once
    (nothing written), the loop goes on, and the job runs once on the thread when the lock
    is released; a job asked meanwhile runs after it, on the thread too."""
    store, writer = await _writer(tmp_path)
    other = sqlite3.connect(tmp_path / "app.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        threads: list[int] = []
        first = asyncio.ensure_future(writer.run(_insert(1, threads)))
        # the loop is free while the job waits for the lock: tried here, then queued
        await wait_until(lambda: len(threads) == 2, what="the attempt on the thread")
        second = asyncio.ensure_future(writer.run(_insert(2, threads)))
        await asyncio.sleep(0.05)
        assert not first.done() and not second.done()
        other.execute("COMMIT")
        await asyncio.gather(first, second)
        here = threading.get_ident()
        assert threads[0] == here and threads[1] != here and threads[2] != here
        rows = await writer.run(lambda conn: conn.execute("SELECT i FROM t").fetchall())
        assert rows == [(1,), (2,)]  # each once, in the order asked
    finally:
        other.close()
        await store.close()


async def test_the_wal_is_checkpointed_on_the_thread_every_so_many_inline_commits(tmp_path: Path):
    store, writer = await _writer(tmp_path)
    try:
        traced: list[tuple[str, int]] = []
        await writer.run(
            lambda conn: conn.set_trace_callback(
                lambda sql: traced.append((sql, threading.get_ident()))
            )
        )
        threads: list[int] = []
        for i in range(writer.CHECKPOINT_EVERY + 1):
            await writer.run(_insert(i, threads))
        await wait_until(
            lambda: any("wal_checkpoint" in sql for sql, _ in traced), what="the checkpoint"
        )
        here = threading.get_ident()
        assert [thread != here for sql, thread in traced if "wal_checkpoint" in sql] == [True]
        inserts = [thread == here for sql, thread in traced if sql.startswith("INSERT")]
        # here, but for those asked while the checkpoint was queued (they wait behind it)
        assert len(inserts) == writer.CHECKPOINT_EVERY + 1 and sum(inserts) >= len(inserts) - 2
        autocheckpoint = await writer.run(
            lambda conn: conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        )
        assert autocheckpoint == 0  # its commits never checkpoint (nor sync) on the loop
    finally:
        await store.close()


async def test_checkpoint_trips_run_here_and_wait_for_a_lock_on_the_thread(tmp_path: Path):
    """The checkpoint saver's trips run on the loop's thread when the file's write lock is
    free; when another connection holds it, the trip goes to the connection's thread and
    waits there (the loop goes on), and the checkpoint is stored once."""
    from langgraph.checkpoint.base import empty_checkpoint

    from artifactflow.core.checkpoints import CheckpointStore

    store = await CheckpointStore.open_sqlite(tmp_path / "checkpoints.db")
    saver = store.saver
    puts: list[int] = []
    raw = saver.conn._conn  # type: ignore[attr-defined]  # aiosqlite's sqlite3 connection
    raw.set_trace_callback(
        lambda sql: puts.append(threading.get_ident()) if "INTO checkpoints" in sql else None
    )
    here = threading.get_ident()

    async def put(thread_id: str) -> None:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        await saver.aput(config, empty_checkpoint(), {}, {})  # type: ignore[arg-type]

    other = sqlite3.connect(tmp_path / "checkpoints.db", isolation_level=None)
    try:
        await put("a")
        assert puts == [here]
        other.execute("BEGIN IMMEDIATE")
        waiting = asyncio.ensure_future(put("b"))
        # the loop runs meanwhile, while the INSERT waits for the lock on the thread
        await wait_until(lambda: len(puts) == 2, what="the put on the connection's thread")
        assert puts[1] != here and not waiting.done()
        other.execute("COMMIT")
        await waiting
        assert len(puts) == 2
        rows = other.execute("SELECT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
        assert rows == [("a",), ("b",)]
        assert await saver.conn.execute_fetchall("PRAGMA wal_autocheckpoint") == [(0,)]  # type: ignore[attr-defined]
    finally:
        other.close()
        await store.close()
