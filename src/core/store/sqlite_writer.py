"""One writer connection per SQLite app store, for the writes of the hot path.

A run's event batch through SQLAlchemy + aiosqlite costs a pool checkout, a greenlet switch
and a thread hop per statement (the row lock, the INSERT, the COMMIT): profiled at 200 rounds,
persistence was most of a round's CPU, and under 100 concurrent runs aiosqlite alone was 37 %.
SQLite has one writer at a time anyway, so here the whole transaction of a group commit — lock
each message row, insert every row, commit — is one function run on the writer's own thread:
one hop per transaction, whatever it holds. The ownership check before a checkpoint
(`holds_run`) and the cancel flag a run reads at its step boundaries (`cancel_requested`) run
there too.

A job runs on the event loop's own thread instead when the writer is idle (nothing queued or
running) and the job is one run's: a hop wakes the writer thread while the loop holds the GIL,
and on a busy machine the two then take turns on it (profiled at 200 rounds: ~14 % of the
loop's time sat in the queue puts of the writer and the checkpoint saver). A group commit of
several runs' batches keeps its hop: it is shared, and its statements run beside the loop's
work (inline, 100 concurrent runs took as much CPU and more wall time). A commit in WAL mode with `synchronous=NORMAL`
writes to the WAL without syncing, so an idle writer's transaction takes tens of microseconds
there. What may wait stays on the thread: a durable commit (`synchronous=FULL` syncs), a
transaction that finds the file locked by another process (tried inline without waiting,
then queued, where it waits as before), and the WAL checkpoints (the writer's connection does
not checkpoint when it commits; the thread does it every `CHECKPOINT_EVERY` inline commits).

Only the statements of these few writes live here, compiled once from the shared schema (the
columns' bind processors are applied, so NUL is replaced exactly as on the SQLAlchemy path).
Every other read and write goes through SQLAlchemy. A failed write raises the driver's error;
the group commit then repeats it through SQLAlchemy, batch by batch, so callers see the same
error types as before.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from .unit_of_work import SQLITE_PRAGMAS

T = TypeVar("T")

_LOCK = "UPDATE af_messages SET run_token = run_token WHERE id = ? AND run_token = ?"
_HOLDS = "SELECT 1 FROM af_messages WHERE id = ? AND run_token = ?"
_CANCELLED = "SELECT cancel_requested_at FROM af_messages WHERE id = ?"


class _Insert:
    """An INSERT of `table` for rows with the columns of the first row, bind processors applied."""

    def __init__(self, table: sa.Table, columns: Sequence[str], dialect: Dialect) -> None:
        self.columns = tuple(columns)
        names = ", ".join(self.columns)
        marks = ", ".join("?" for _ in self.columns)
        self.sql = f"INSERT INTO {table.name} ({names}) VALUES ({marks})"
        self.processors = [table.c[name].type.bind_processor(dialect) for name in self.columns]

    def params(self, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        out = []
        pairs = list(zip(self.columns, self.processors, strict=True))
        for row in rows:
            out.append(tuple(row.get(name) if p is None else p(row.get(name)) for name, p in pairs))
        return out


class SqliteWriter:
    """A connection of its own on its own thread; `run` executes a function there.

    The thread takes jobs from a queue and hands each result back with one
    `call_soon_threadsafe`, as aiosqlite does: `run_in_executor` on a one-thread pool did the
    same work with a concurrent future, a work item and an asyncio future chained to it, about
    a third more CPU per trip (and every round of a run makes several). A job whose caller was
    cancelled before it started is skipped, as the pool skipped it; queued jobs still run at
    interpreter exit, as the pool's did."""

    CHECKPOINT_EVERY = 64  # inline commits between two WAL checkpoints on the thread

    def __init__(self, path: str, dialect: Dialect) -> None:
        self._path = path
        self._dialect = dialect
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self._inserts: dict[tuple[str, tuple[str, ...]], _Insert] = {}
        self._queued = 0  # jobs handed to the thread and not yet settled on the loop
        self._inline_commits = 0  # since the last checkpoint job
        self.transactions = 0  # committed by `write` (tests see the fast path was taken)
        self.inline_jobs = 0  # run on the loop's thread (tests see which path was taken)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            for pragma in (*SQLITE_PRAGMAS, "PRAGMA foreign_keys=ON", *_WRITER_PRAGMAS):
                conn.execute(pragma)
            self._conn = conn
        return self._conn

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, inline: bool = True) -> T:
        """`fn(connection)`: here on the loop's thread when the writer is idle and `inline`
        (without waiting for a lock another process holds), else on the writer's thread,
        after the jobs queued before it. `fn` may be run twice: a first, inline attempt that
        found the file locked raised before it changed anything (BEGIN IMMEDIATE failed)."""
        if inline and self._queued == 0:
            conn = self._connection()
            try:
                result = fn(conn)
            except sqlite3.OperationalError as exc:
                if not _locked(exc) or conn.in_transaction:
                    raise
            else:
                self.inline_jobs += 1
                self._inline_commits += 1
                if self._inline_commits >= self.CHECKPOINT_EVERY:
                    self._inline_commits = 0
                    done = self._submit(_checkpoint)  # nobody waits: its error is only logged
                    done.add_done_callback(lambda f: f.cancelled() or f.exception())
                return result
        return await self._submit(fn)

    def _submit(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Queue `fn` for the thread; the future settles on the loop when it has run."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._serve, name="artifactflow-sqlite-writer", daemon=True
            )
            self._thread.start()
            _at_exit(self)
        self._queued += 1
        self._jobs.put((loop, future, fn))
        return future

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, fn = job
            result, error = None, None
            if not future.cancelled():  # else its caller gave up before it started
                try:
                    conn = self._connection()
                    conn.execute(_WAIT)  # on this thread, a lock held elsewhere is waited for
                    result = fn(conn)
                    if conn is self._conn:  # not closed by `fn` (`close`)
                        conn.execute(_NO_WAIT)
                except BaseException as exc:  # handed to the caller, as the pool did
                    error = exc
            try:
                loop.call_soon_threadsafe(self._settled, future, result, error)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass

    def _settled(self, future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        self._queued -= 1
        _settle(future, result, error)

    def _stop(self) -> None:
        """Let the thread finish the jobs queued so far, then end (at close or at exit)."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._jobs.put(None)
            if thread is not threading.current_thread():
                thread.join()

    def _insert(self, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> _Insert:
        key = (table.name, tuple(rows[0]))
        insert = self._inserts.get(key)
        if insert is None:
            insert = self._inserts[key] = _Insert(table, key[1], self._dialect)
        return insert

    async def write(
        self,
        owned: Sequence[tuple[str, str]],
        parts: Sequence[tuple[tuple[str, str] | None, sa.Table, Sequence[Mapping[str, Any]]]],
    ) -> set[tuple[str, str]]:
        """One transaction: lock each `(message_id, run_token)` of `owned` (in the order
        given), then insert every part whose key is None or not lost; return the lost keys."""
        prepared = [(key, self._insert(table, rows), rows) for key, table, rows in parts if rows]
        statements = [(key, insert.sql, insert.params(rows)) for key, insert, rows in prepared]

        def transaction(conn: sqlite3.Connection) -> set[tuple[str, str]]:
            lost: set[tuple[str, str]] = set()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for key in owned:
                    if conn.execute(_LOCK, key).rowcount != 1:
                        lost.add(key)
                for key, sql, params in statements:
                    if key is None or key not in lost:
                        conn.executemany(sql, params)
                conn.execute("COMMIT")
                self.transactions += 1
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return lost

        # Several runs' batches at once (load): the hop is shared, and their statements
        # overlap with the loop's own work on the thread; one run's batch runs here.
        return await self.run(transaction, inline=len({key for key, _, _ in parts if key}) <= 1)

    async def transact(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool = False) -> T:
        """`fn` in one transaction on the writer (BEGIN IMMEDIATE ... COMMIT; ROLLBACK if it
        raises). `durable`: the commit is synced to disk (`synchronous=FULL` on this connection
        for that transaction, as `UnitOfWork.transaction(durable=True)` does on a pooled one)."""

        def transaction(conn: sqlite3.Connection) -> T:
            if durable:
                conn.execute("PRAGMA synchronous=FULL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    out = fn(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                self.transactions += 1
                return out
            finally:
                if durable:
                    conn.execute("PRAGMA synchronous=NORMAL")  # the connection's default

        return await self.run(transaction, inline=not durable)  # a durable commit syncs

    async def holds_run(self, message_id: str, run_token: str) -> bool:
        return await self.run(
            lambda conn: conn.execute(_HOLDS, (message_id, run_token)).fetchone() is not None
        )

    async def cancel_requested(self, message_id: str) -> bool:
        def read(conn: sqlite3.Connection) -> bool:
            rows = conn.execute(_CANCELLED, (message_id,)).fetchall()  # no read left open
            return bool(rows) and rows[0][0] is not None

        return await self.run(read)

    async def close(self) -> None:
        def shut(conn: sqlite3.Connection) -> None:
            conn.close()
            self._conn = None

        if self._conn is not None:
            await self.run(shut, inline=False)
            self._conn = None
        if self._thread is not None and self._thread.is_alive():
            self._jobs.put(None)  # ends the thread once the jobs before it are done
        self._thread = None


_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[sqlite3.Connection], Any]]

# The writer's connection does not wait for a lock (an inline job must not block the loop),
# nor checkpoint the WAL when it commits (the sync of a checkpoint is done by `_checkpoint`
# on the thread); on the thread it waits for a lock as every other connection does.
_WRITER_PRAGMAS = ("PRAGMA busy_timeout=0", "PRAGMA wal_autocheckpoint=0")
_WAIT = SQLITE_PRAGMAS[0]
_NO_WAIT = _WRITER_PRAGMAS[0]


def _checkpoint(conn: sqlite3.Connection) -> None:
    """What `wal_autocheckpoint` would have done at a commit (a passive checkpoint: it copies
    what no reader still needs, waits for nobody)."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _locked(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_LIVE: weakref.WeakSet[SqliteWriter] = weakref.WeakSet()  # writers with a thread
_HOOKED = False


def _at_exit(writer: SqliteWriter) -> None:
    """Stop `writer`'s thread when the interpreter exits, once its queued jobs are done (at
    the moment `concurrent.futures` stops its pools, before daemon threads are frozen)."""
    global _HOOKED
    _LIVE.add(writer)
    if _HOOKED:
        return
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(_stop_all)
            _HOOKED = True
        except RuntimeError:  # already shutting down
            pass


def _stop_all() -> None:
    for writer in list(_LIVE):
        writer._stop()


def sqlite_file_of(store: Any) -> str | None:
    """The store's SQLite file (None for PostgreSQL and memory)."""
    if not store.is_sqlite:
        return None
    database = store.engine.url.database
    if not database or database == ":memory:":
        return None
    return database


def sqlite_writer_for(store: Any) -> SqliteWriter | None:
    """The store's one writer (SQLite file stores only; None for PostgreSQL and memory)."""
    if sqlite_file_of(store) is None:
        return None
    return store.companion(_make_writer)


_READERS = threading.local()  # per thread: app-store file -> a connection for `holds_run_here`


def holds_run_here(path: str, message_id: str, run_token: str) -> bool:
    """`holds_run` on the calling thread, through a reading connection of this thread's own
    to the store's file (the checkpoint saver's thread checks before it writes, in the same
    trip). WAL: the read sees every transaction committed before it, as the writer's would."""
    readers: dict[str, sqlite3.Connection] | None = getattr(_READERS, "conns", None)
    if readers is None:
        readers = _READERS.conns = {}
    conn = readers.get(path)
    if conn is None:
        conn = readers[path] = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=30000")
    cursor = conn.execute(_HOLDS, (message_id, run_token))
    try:
        return cursor.fetchone() is not None
    finally:
        cursor.close()  # no read left open: it would pin the WAL


def _make_writer(store: Any) -> SqliteWriter:
    return SqliteWriter(store.engine.url.database, store.engine.dialect)


async def close_sqlite_writer(store: Any) -> None:
    """Close the store's writer, if it made one."""
    writer = store._companions.pop(_make_writer, None)
    if writer is not None:
        await writer.close()
