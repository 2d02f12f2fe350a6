"""The app store's aiosqlite driver, with one thread hop per statement.

SQLAlchemy drives aiosqlite as a DBAPI: each statement opens a cursor, executes, fetches and
closes it, and every one of those is a trip to the connection's thread and back through the
event loop (a queue put, a wake-up of the loop, a GIL hand-over): four hops for a query,
three for a write, before its commit. At 100 concurrent conversations those hops cost more
of the event loop's time than the queries themselves. Here a cursor is a local buffer: its
`execute` runs the statement, fetches every row and closes the sqlite3 cursor in one function
on the connection's thread, and fetching from it (or closing it) costs nothing more. Commits and
rollbacks are one hop each, and none when no transaction is open (a read's rollback).

Nothing else changes: the same aiosqlite connection thread and sqlite3 connection, the same
statements in the same order, the same driver errors (raised on the thread, handed back as
they are). A cursor buffers every row, so this is for the app store's bounded queries (SQLAlchemy's
aiosqlite dialect fetches every row at once as well, except for server-side cursors, which
nothing here uses). `dbapi()` is what `create_async_engine(..., module=...)` takes.
"""

from __future__ import annotations

import sqlite3
import types
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import aiosqlite

Row = Any
Description = Any


class OneHopCursor:
    """An aiosqlite-like cursor: each execute is one trip to the thread; rows are buffered."""

    def __init__(self, conn: OneHopConnection) -> None:
        self._conn = conn
        self._rows: list[Row] = []
        self.description: Description = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    def __await__(self) -> Any:  # `await conn.cursor()`, as aiosqlite allows
        if False:  # pragma: no cover - makes this a generator
            yield
        return self

    async def __aenter__(self) -> OneHopCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def _run(self, call: Callable[[sqlite3.Cursor], object]) -> OneHopCursor:
        def hop() -> tuple[list[Row], Description, int, int | None]:
            cursor = self._conn._conn.cursor()  # noqa: SLF001  # on the connection's own thread
            try:
                call(cursor)
                rows = cursor.fetchall() if cursor.description else []
                return rows, cursor.description, cursor.rowcount, cursor.lastrowid
            finally:
                cursor.close()

        self._rows, self.description, self.rowcount, self.lastrowid = await self._conn._execute(hop)  # noqa: SLF001
        return self

    async def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> OneHopCursor:
        params = [] if parameters is None else parameters
        return await self._run(lambda cursor: cursor.execute(sql, params))  # type: ignore[arg-type]

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> OneHopCursor:
        return await self._run(lambda cursor: cursor.executemany(sql, parameters))  # type: ignore[arg-type]

    async def executescript(self, sql_script: str) -> OneHopCursor:
        return await self._run(lambda cursor: cursor.executescript(sql_script))

    async def fetchone(self) -> Row | None:
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int | None = None) -> Sequence[Row]:
        count = self.arraysize if size is None else size
        taken, self._rows = self._rows[:count], self._rows[count:]
        return taken

    async def fetchall(self) -> Sequence[Row]:
        taken, self._rows = self._rows, []
        return taken

    async def close(self) -> None:
        self._rows = []


class OneHopConnection(aiosqlite.Connection):
    """An aiosqlite connection whose cursors make one hop per statement."""

    def cursor(self) -> OneHopCursor:  # type: ignore[override]
        return OneHopCursor(self)

    # sqlite3's commit and rollback do nothing outside a transaction; SQLAlchemy ends every
    # read with a rollback (and the durable-write dance with empty commits): those make no
    # trip. Reading `in_transaction` here is safe: a pooled connection serves one task at a
    # time, so nothing runs on its thread while its owner awaits this.
    async def commit(self) -> None:
        if self._connection is not None and not self._connection.in_transaction:
            return
        await super().commit()

    async def rollback(self) -> None:
        if self._connection is not None and not self._connection.in_transaction:
            return
        await super().rollback()


def connect(database: str | Path, *, iter_chunk_size: int = 64, **kwargs: Any) -> OneHopConnection:
    """`aiosqlite.connect`, returning a `OneHopConnection`."""
    location = database.decode() if isinstance(database, bytes) else str(database)

    def connector() -> sqlite3.Connection:
        return sqlite3.connect(location, **kwargs)

    return OneHopConnection(connector, iter_chunk_size)


@cache
def dbapi() -> Any:
    """The DBAPI module SQLAlchemy's aiosqlite dialect is given (`module=`)."""
    from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_dbapi

    module = types.ModuleType("artifactflow_one_hop_aiosqlite")
    module.__dict__.update({k: v for k, v in vars(aiosqlite).items() if not k.startswith("__")})
    module.connect = connect  # type: ignore[attr-defined]
    module.Connection = OneHopConnection  # type: ignore[attr-defined]
    return AsyncAdapt_aiosqlite_dbapi(module, sqlite3)
