"""The one engine every part of the app store shares, and how they use it.

The store is split by aggregate (conversation_records.py, eventlog.py, artifact_records.py,
run_records.py, workflow_records.py, token_records.py); each is a mixin over `UnitOfWork`, so
all of them use the same engine, connection pool and transaction rules, and `AppStore`
(repository.py) is simply their sum. A write that must be atomic runs inside one
`transaction()`; a write that decides who wins (a claim, an optimistic update) is a single
conditional statement whose row count says so.

Opening the engine lives here too: URL normalisation, the SQLite pragmas (shared with the
checkpoint file, core/checkpoints.py), checking pooled PostgreSQL connections on checkout (a
server restart kills them all: `check_on_checkout`), opening a file we may not write for reading only
(readonly.py), keeping SQL text out of error messages, and the retry for SQLite's immediate
"database is locked". `transaction(durable=True)` is the one way to make a commit survive a
database or machine crash when the defaults commit asynchronously. What counts as the
database being away (for 503s and for runs ending after an outage) is in faults.py.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Self, TypeVar, cast

import sqlalchemy as sa
import sqlalchemy.exc
from sqlalchemy import event as sa_event
from sqlalchemy.engine import ExceptionContext, RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from ...errors import ConfigError
from . import one_hop
from .readonly import read_only_uri, writable

log = logging.getLogger("artifactflow.store")

R = TypeVar("R")
T = TypeVar("T")
Query = sa.Select[*tuple[Any, ...]]  # a SELECT of any columns

# Bound the write-ahead log: fold it into the main file every 256 pages (4 MB of 16 KB pages,
# instead of SQLite's 1000 pages = 16 MB) and shrink the file back to 4 MB after it is reset,
# so a long run's WAL does not stay at its peak (33 MB was seen for one 200-round run).
WAL_BOUNDS = ("PRAGMA wal_autocheckpoint=256", "PRAGMA journal_size_limit=4194304")

# Every SQLite file we open (the app store's and the checkpoints'), in this order.
SQLITE_PRAGMAS = (
    # First: switching a new file to WAL needs a lock another process may hold.
    "PRAGMA busy_timeout=30000",
    # Before WAL, so a new file gets them: rows of a few KB (events, tool results) would each
    # spill into a mostly-empty 4 KB overflow page; 16 KB pages pack them densely.
    # Incremental auto-vacuum lets gc hand freed pages back cheaply.
    "PRAGMA page_size=16384",
    "PRAGMA auto_vacuum=INCREMENTAL",
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    *WAL_BOUNDS,
)


SQLITE_POOL = 15  # SQLAlchemy's default cap for the app store (5 + 10 overflow), all kept


def normalize_database_url(url: str) -> str:
    """Accept plain `postgresql://` / `sqlite:///` URLs and pick the async drivers."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        return "postgresql+asyncpg://" + url[len("postgresql://") :]
    if url.startswith("sqlite:///"):
        return "sqlite+aiosqlite:///" + url[len("sqlite:///") :]
    if url.startswith(("postgresql+asyncpg://", "sqlite+aiosqlite://")):
        return url
    raise ConfigError(
        f"unsupported database URL {url.split('://')[0]}://…; use postgresql://user@host:port/db "
        "or sqlite:///path/to/file.db"
    )


# How long opening a PostgreSQL connection may take (the app store, the checkpoint pool, the bus
# listener). Separate from query time, which is not bounded here: a slow statement is not an
# outage, a server that does not answer a connect is.
CONNECT_TIMEOUT_SECONDS = 5.0


def open_engine(
    url: str | None, *, sqlite_path: Path | None, pool_size: int, synchronous_commit: str
) -> AsyncEngine:
    """An engine for `url` (PostgreSQL or SQLite), or for the SQLite file `sqlite_path`."""
    if url:
        # Pooled connections are checked on checkout (`check_on_checkout`; a server restart
        # kills them all). No overflow: an overflow connection is closed as soon as it is
        # returned, so under load every burst opened new ones (1.8 server sessions per
        # conversation at 100 at once, each a backend start plus asyncpg's type
        # introspection). The same cap of 2 × pool_size connections, all kept.
        engine = create_async_engine(
            normalize_database_url(url),
            pool_size=2 * pool_size,
            max_overflow=0,
            # a connect that gets no answer fails in seconds (asyncpg waits 60 s by default):
            # a database that is away is noticed, and its return too, by the next attempt
            connect_args={"server_settings": {"synchronous_commit": synchronous_commit},
                          "timeout": CONNECT_TIMEOUT_SECONDS},
        )
        check_on_checkout(engine)
    else:
        assert sqlite_path is not None
        sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        if sqlite_path.exists() and not writable(sqlite_path):
            # A read-only data folder: reading commands work, writes fail as "read-only".
            log.warning("%s is not writable: opened for reading only", sqlite_path)
            return _with_hidden_sql(
                create_async_engine(f"sqlite+aiosqlite:///{read_only_uri(sqlite_path)}&uri=true")
            )
        # No reset on return: every transaction here ends in its own commit or rollback
        # (`engine.begin()`, and `connect()` rolls back what it began), so the pool's extra
        # ROLLBACK per checkout was a wasted thread hop, several per round. One hop per
        # statement, too (`one_hop.py`). No overflow either, as for PostgreSQL: an overflow
        # connection (a thread, a sqlite3 connection and its pragmas) was opened and closed
        # for every burst above 5 (0.6 per conversation at 100 at once); the same cap of 15
        # connections, all kept.
        engine = create_async_engine(
            f"sqlite+aiosqlite:///{sqlite_path}",
            pool_reset_on_return=None,
            module=one_hop.dbapi(),
            pool_size=SQLITE_POOL,
            max_overflow=0,
        )

        @sa_event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            for pragma in (*SQLITE_PRAGMAS, "PRAGMA foreign_keys=ON"):
                cursor.execute(pragma)
            cursor.close()

    return _with_hidden_sql(engine)


# A pooled PostgreSQL connection idle for longer than this is pinged before it is used.
PING_IDLE_AFTER = 30.0  # seconds
_RETURNED_AT = "artifactflow_returned_at"  # in a pool record's `info`: when it was last returned


def check_on_checkout(engine: AsyncEngine) -> None:
    """Hand out only live PostgreSQL connections, mostly without a round trip.

    After a server restart every pooled connection is dead; used unchecked, each failed one
    statement (a 500, a failed run) before being replaced. SQLAlchemy's `pool_pre_ping`
    checks with BEGIN, an empty query and ROLLBACK: three round trips on every checkout,
    several per round. But asyncpg reads every connection's socket all the time, so a
    connection the server closed (a restart, `pg_terminate_backend`, an idle timeout) is
    already marked closed when it is taken: that costs nothing to look at. Only a connection
    that sat in the pool longer than `PING_IDLE_AFTER` (where a silently dropped TCP
    connection could hide) is pinged as before. A dead one raises `DisconnectionError`, and the
    pool replaces it with a new connection. A connection that breaks while in use still fails
    its statement, which invalidates it and every connection pooled before it (SQLAlchemy's
    default), and `faults.py` names the failure an outage, as before.
    """

    @sa_event.listens_for(engine.sync_engine, "connect")
    def _opened(_dbapi_conn: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @sa_event.listens_for(engine.sync_engine, "checkin")
    def _returned(dbapi_conn: Any, record: Any) -> None:
        if dbapi_conn is not None:
            record.info[_RETURNED_AT] = time.monotonic()

    @sa_event.listens_for(engine.sync_engine, "checkout")
    def _alive(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if dbapi_conn.driver_connection.is_closed():
            raise sqlalchemy.exc.DisconnectionError("the server closed this pooled connection")
        returned = record.info.get(_RETURNED_AT)
        if returned is not None and time.monotonic() - returned < PING_IDLE_AFTER:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:
            raise sqlalchemy.exc.DisconnectionError(
                f"a pooled connection failed its ping: {exc}"
            ) from exc


def is_read_only(engine: AsyncEngine) -> bool:
    """Whether `engine` was opened for reading only (a SQLite file we may not write)."""
    return engine.url.query.get("mode") == "ro" or "mode=ro" in (engine.url.database or "")


def _with_hidden_sql(engine: AsyncEngine) -> AsyncEngine:
    sa_event.listen(engine.sync_engine, "handle_error", _hide_sql)
    return engine


def _hide_sql(context: ExceptionContext) -> None:
    """Keep SQL text and parameters out of error messages (they reach people: a message's
    `error`, a tool result, the CLI); log them at debug level instead. The exception keeps
    its type, so callers still catch `IntegrityError` and friends."""
    exc = context.sqlalchemy_exception
    if not isinstance(exc, sqlalchemy.exc.StatementError) or exc.statement is None:
        return
    log.debug(
        "database error: %s\n[SQL: %s]\n[parameters: %r]",
        context.original_exception,
        exc.statement,
        exc.params,
    )
    exc.statement = None  # type: ignore[assignment]
    exc.params = None
    exc.code = None


async def retry_when_locked(
    step: Callable[[], Awaitable[T]],
    error: type[Exception] = sqlalchemy.exc.OperationalError,
    attempts: int = 6,
) -> T:
    """Run `step`, again if SQLite answered "database is locked" at once.

    busy_timeout makes SQLite wait for most locks, but not all: a connection whose WAL
    snapshot went stale while another process created the schema, or a journal-mode switch
    racing a fresh file, fails immediately. Processes starting together on a new data folder
    hit that window; a short, jittered retry closes it.
    """
    for attempt in range(1, attempts + 1):
        try:
            return await step()
        except error as exc:
            if "database is locked" not in str(exc) or attempt == attempts:
                raise
            await asyncio.sleep(0.05 * attempt + random.random() * 0.05)
    raise AssertionError("unreachable")  # pragma: no cover


class UnitOfWork:
    """The base of every aggregate's records: the shared engine, one way to open a
    transaction, and the few read and write shapes all of them use."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"
        # For one statement outside a transaction. On PostgreSQL, asyncpg otherwise wraps
        # every read in BEGIN … ROLLBACK: three round trips for one query. A single statement
        # is atomic on its own, so autocommit changes nothing but the trips (SQLite's driver
        # does not open a transaction for a read anyway).
        self.reads = (
            engine if self.is_sqlite else engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        self.read_only = is_read_only(engine)  # a SQLite file in a folder we may not write
        self._companions: dict[Callable[..., Any], Any] = {}

    def companion(self, make: Callable[[Self], T]) -> T:
        """The one `make(self)` of this store, made on first use: a per-store helper (the
        group commit, a request recorder) lives exactly as long as the store."""
        if make not in self._companions:
            self._companions[make] = make(self)
        return self._companions[make]

    def transaction(self, *, durable: bool = False) -> AbstractAsyncContextManager[AsyncConnection]:
        """One transaction: every statement inside commits together or not at all.

        `durable`: its commit survives a crash of the database server or the machine. Bulk
        writes commit asynchronously by default (PostgreSQL `synchronous_commit` from settings,
        "off"; SQLite WAL with `synchronous=NORMAL`): a power loss or a database crash can lose
        the last commits. A durable transaction is flushed to disk before its commit returns:
        on PostgreSQL `SET LOCAL synchronous_commit = on`; on SQLite, whose setting is per
        connection and cannot change inside a transaction, `synchronous=FULL` on its connection
        for that transaction only. For the writes that must never be lost: the tool ledger's
        "started" record, accepted decisions, final statuses (about 1 ms each, measured here).
        """
        if not durable:
            return self.engine.begin()
        return self._durable_sqlite() if self.is_sqlite else self._durable_postgres()

    @asynccontextmanager
    async def _durable_postgres(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.begin() as conn:
            await conn.exec_driver_sql("SET LOCAL synchronous_commit = on")
            yield conn

    @asynccontextmanager
    async def _durable_sqlite(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            await conn.exec_driver_sql("PRAGMA synchronous=FULL")
            await conn.commit()  # ends the autobegun (empty) transaction; the pragma stays
            try:
                async with conn.begin():
                    yield conn
            finally:
                await conn.exec_driver_sql("PRAGMA synchronous=NORMAL")  # the pool's default
                await conn.commit()

    async def fetch_one(self, query: Query, row_type: type[R]) -> R | None:
        """The first row of `query` as a `row_type` (a TypedDict of its columns), or None."""
        async with self.reads.connect() as conn:
            row = (await conn.execute(query)).mappings().first()
        return None if row is None else cast(R, dict(row))

    async def fetch_all(self, query: Query, row_type: type[R]) -> list[R]:
        """Every row of `query`, each as a `row_type` (a TypedDict of its columns)."""
        return [cast(R, dict(row)) for row in await self.fetch_rows(query)]

    async def fetch_rows(self, query: Query) -> Sequence[RowMapping]:
        """Every row of `query` as it comes (for rows with columns still to decode)."""
        async with self.reads.connect() as conn:
            return (await conn.execute(query)).mappings().all()

    async def fetch_value(self, query: Query) -> Any:
        """The first column of the first row of `query`, or None when there is no row."""
        async with self.reads.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else row[0]

    async def fetch_column(self, query: Query) -> list[Any]:
        """The first column of every row of `query`."""
        async with self.reads.connect() as conn:
            return [row[0] for row in (await conn.execute(query)).all()]

    async def write(self, *statements: sa.Executable, durable: bool = False) -> int:
        """Run `statements` in one transaction (`durable`: see `transaction`); the row count
        of the last one."""
        count = 0
        # On PostgreSQL one statement needs no BEGIN/COMMIT around it (see `reads`), unless
        # it must commit durably (`SET LOCAL` needs a transaction).
        one = len(statements) == 1 and not self.is_sqlite and not durable
        async with self.reads.begin() if one else self.transaction(durable=durable) as conn:
            for statement in statements:
                count = (await conn.execute(statement)).rowcount
        return count

    async def insert_once(self, statement: sa.Insert, *, durable: bool = False) -> bool:
        """Run an INSERT in its own transaction; False when the key was already there."""
        try:
            await self.write(statement, durable=durable)
        except sqlalchemy.exc.IntegrityError:
            return False
        return True
