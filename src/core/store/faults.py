"""Telling a database that is away (down, restarting, full, read-only) from a bug.

Drivers report an outage in many shapes: SQLAlchemy's `OperationalError` / `InterfaceError`
(or any `DBAPIError` whose connection was invalidated), asyncpg's connection errors
(`AdminShutdownError`, "connection is closed", a refused connect), psycopg's
`OperationalError` and the pool's `PoolTimeout` (the checkpoint saver), and SQLite's
"database or disk is full", "attempt to write a readonly database", "unable to open database
file". `store_fault` looks through the exception and its causes and names the outage as one
typed `StoreUnavailableError` with a short stable reason, so the HTTP layer can answer 503 with
`Retry-After` and a run can record why it failed. Anything else (an integrity error, a bug)
is not an outage and yields None.

Driver modules are recognised by name, not imported: this runs on error paths of processes
that may have loaded only one of them.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import StoreUnavailableError

DISK_FULL = "disk full"
READ_ONLY = "read-only"
UNAVAILABLE = "database unavailable"

# SQLite's texts (sqlite3 / aiosqlite), lower case.
_SQLITE_TEXTS = (
    ("database or disk is full", DISK_FULL),
    ("disk is full", DISK_FULL),
    ("readonly database", READ_ONLY),
    ("read-only", READ_ONLY),
    ("unable to open database file", UNAVAILABLE),
    ("disk i/o error", UNAVAILABLE),
)

_CONNECTION_TYPES = {
    # asyncpg
    "AdminShutdownError",
    "CannotConnectNowError",
    "CrashShutdownError",
    "ConnectionDoesNotExistError",
    "ConnectionFailureError",
    "ClientCannotConnectError",
    "PostgresConnectionError",
    "TooManyConnectionsError",
    "InterfaceError",
    # psycopg, psycopg_pool
    "OperationalError",
    "AdminShutdown",
    "PoolTimeout",
    "PoolClosed",
}

# Where database errors come from (SQLite's are `sqlite3.OperationalError`).
_DB_MODULES = ("sqlalchemy", "asyncpg", "psycopg", "psycopg_pool", "sqlite3", "aiosqlite")

_MESSAGES = {
    DISK_FULL: "the disk is full, nothing more can be written",
    READ_ONLY: "the data folder or database is read-only, nothing can be written",
    UNAVAILABLE: "the database cannot be reached (down or restarting)",
}


# SQLite on a nearly full file system (a few dozen KB left) often fails a write with "disk I/O
# error" rather than "database or disk is full": the WAL or a temporary file could not grow.
# Where a watched data folder has less than this left, such an error is named a full disk.
LOW_SPACE_BYTES = 1024 * 1024
_WATCHED: set[Path] = set()


def watch_free_space(folder: Path) -> None:
    """Name SQLite's "disk I/O error" a full disk when `folder`'s file system is nearly full."""
    _WATCHED.add(folder)


def _nearly_full() -> bool:
    for folder in list(_WATCHED):
        try:
            stat = os.statvfs(folder)
        except OSError:
            continue
        if stat.f_bavail * stat.f_frsize < LOW_SPACE_BYTES:
            return True
    return False


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or any(item is s for s in seen) or len(seen) > 20:
            continue
        seen.append(item)
        todo.extend([item.__cause__, item.__context__, getattr(item, "orig", None)])
    return seen


def _reason(item: BaseException) -> str | None:
    text = str(item).lower()
    for needle, reason in _SQLITE_TEXTS:
        if needle in text:
            return reason
    module = type(item).__module__
    if module.startswith(("asyncpg", "psycopg")) and any(
        cls.__name__ in _CONNECTION_TYPES for cls in type(item).__mro__
    ):
        return UNAVAILABLE
    if module.startswith("sqlalchemy"):
        if getattr(item, "connection_invalidated", False):
            return UNAVAILABLE
        if type(item).__name__ in {"OperationalError", "InterfaceError"} and "locked" not in text:
            return UNAVAILABLE
    if isinstance(item, TimeoutError):  # a connect the server never answered (connect timeout)
        return UNAVAILABLE
    if isinstance(item, ConnectionError) or (
        isinstance(item, OSError) and "connect call failed" in text
    ):
        return UNAVAILABLE
    return None


ENDED_BY_SERVER = "the server ended the connection"


def _ended_by_server(item: BaseException) -> bool:
    """asyncpg's "cannot switch to state N; another operation (2) is in progress": a statement
    on a connection the server has just ended, never one connection shared by two operations
    (SQLAlchemy serialises a connection's statements). A stopping server (or
    `pg_terminate_backend`) sends each idle connection a FATAL error, then closes it; asyncpg
    reads the error outside any operation and enters its error-consuming state (2), and until
    it reads the end of the stream the connection does not look closed, so the pool may hand it
    out. asyncpg then aborts it and SQLAlchemy replaces it; the statement's failure is an
    outage like the others, named so here rather than with a text that reads as a bug
    (tests/test_faults_db_ended.py)."""
    return type(item).__name__ == "InternalClientError" and "another operation (2)" in str(item)


def _from_database(item: BaseException) -> bool:
    """Raised by a database driver: its type comes from one, or (a refused connect, which
    asyncpg raises as a plain `OSError`) it went through a driver's code."""
    if type(item).__module__.startswith(_DB_MODULES):
        return True
    tb = item.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_DB_MODULES):
            return True
        tb = tb.tb_next
    return False


def store_fault(exc: BaseException) -> StoreUnavailableError | None:
    """`exc` as a `StoreUnavailableError` when it means the database is away; else None.
    Only errors raised by a database driver (or SQLAlchemy) count: a model server that
    refuses connections is not a database outage."""
    if isinstance(exc, StoreUnavailableError):
        return exc
    chain = _chain(exc)
    if not any(map(_from_database, chain)):
        return None
    reasons = [r for r in map(_reason, chain) if r is not None]
    if not reasons:
        return None
    # The most specific cause wins: a full disk explains an "unable to open" as well.
    reason = next((r for r in (DISK_FULL, READ_ONLY) if r in reasons), UNAVAILABLE)
    if reason == UNAVAILABLE and any("disk i/o error" in str(i).lower() for i in chain) and _nearly_full():
        reason = DISK_FULL
    detail = str(exc.__cause__ or exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if any(map(_ended_by_server, chain)):
        detail = ENDED_BY_SERVER
    error = StoreUnavailableError(f"{reason}: {_MESSAGES[reason]} ({detail})", reason=reason)
    error.__cause__ = exc
    return error
