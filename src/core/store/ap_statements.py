"""The Agent Protocol's thread and run rows (`ap_threads`, `ap_runs`) on the SQLite writer,
with fixed SQL.

A protocol run reads and writes its run row and its thread's metadata row a handful of times
(created, looked up, settled, the thread's queue checked). Through SQLAlchemy each statement
cost about 0.75 ms of CPU here (statement building, its cache key, a pool checkout, a greenlet
switch, a thread hop to aiosqlite), against about 0.1 ms as one job on the store's writer
thread (`sqlite_writer.py`): together they were most of what a protocol run cost beyond the
native API's. The statements are the ones `protocol/records.py` builds (same conditions and
order, the columns' own bind processors, so NUL is replaced as on the SQLAlchemy path); the
rows come back as SQLAlchemy returns them (a mapping per row, JSON still text).

A single statement needs no BEGIN/COMMIT around it: on the writer's autocommit connection it
commits by itself, atomically, and the writer runs one job at a time. PostgreSQL and
in-memory stores keep the SQLAlchemy path; so does a call that meets a driver error here (the
SQLAlchemy path repeats it and raises what callers expect).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Dialect

from . import schema as t
from .writer_statements import bind_values

Row = dict[str, Any]
Job = Callable[[sqlite3.Connection], Any]

RUN_COLUMNS = tuple(c.name for c in t.ap_runs.c)
THREAD_COLUMNS = tuple(c.name for c in t.ap_threads.c)
_RUN = f"SELECT {', '.join(RUN_COLUMNS)} FROM ap_runs WHERE run_id = ?"
_THREAD = f"SELECT {', '.join(THREAD_COLUMNS)} FROM ap_threads WHERE thread_id = ?"


def _rows(cursor: sqlite3.Cursor, columns: Sequence[str]) -> list[Row]:
    try:
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    finally:
        cursor.close()  # no read left open: it would pin the WAL


def run_job(run_id: str) -> Job:
    """The run row, or None."""

    def job(conn: sqlite3.Connection) -> Row | None:
        rows = _rows(conn.execute(_RUN, (run_id,)), RUN_COLUMNS)
        return rows[0] if rows else None

    return job


def thread_job(thread_id: str) -> Job:
    """The thread's metadata row, or None."""

    def job(conn: sqlite3.Connection) -> Row | None:
        rows = _rows(conn.execute(_THREAD, (thread_id,)), THREAD_COLUMNS)
        return rows[0] if rows else None

    return job


@functools.cache
def _thread_runs_sql(statuses: int, oldest_first: bool) -> str:
    where = "thread_id = ?"
    if statuses:
        where += f" AND status IN ({', '.join('?' * statuses)})"
    order = "ASC" if oldest_first else "DESC"
    return (
        f"SELECT {', '.join(RUN_COLUMNS)} FROM ap_runs WHERE {where} "
        f"ORDER BY created_at {order}, run_id LIMIT ? OFFSET ?"
    )


def thread_runs_job(
    thread_id: str, statuses: Sequence[str], limit: int, offset: int, oldest_first: bool
) -> Job:
    """The thread's runs (those with one of `statuses`, when given), newest first (or oldest)."""
    sql = _thread_runs_sql(len(statuses), oldest_first)
    params = (thread_id, *statuses, limit, offset)

    def job(conn: sqlite3.Connection) -> list[Row]:
        return _rows(conn.execute(sql, params), RUN_COLUMNS)

    return job


@functools.cache
def _update_sql(table: str, key: str, columns: tuple[str, ...], when: int) -> str:
    sets = ", ".join(f"{name} = ?" for name in columns)
    where = f"{key} = ?"
    if when:
        where += f" AND status IN ({', '.join('?' * when)})"
    return f"UPDATE {table} SET {sets} WHERE {where}"


def update_run_job(
    dialect: Dialect, run_id: str, when: Sequence[str], values: Mapping[str, Any]
) -> Job:
    """The run's UPDATE (only if its status is one of `when`, when given): its row count."""
    sql = _update_sql("ap_runs", "run_id", tuple(values), len(when))
    params = (*bind_values(t.ap_runs, dialect, values), run_id, *when)
    return lambda conn: conn.execute(sql, params).rowcount


def update_thread_job(dialect: Dialect, thread_id: str, values: Mapping[str, Any]) -> Job:
    sql = _update_sql("ap_threads", "thread_id", tuple(values), 0)
    params = (*bind_values(t.ap_threads, dialect, values), thread_id)
    return lambda conn: conn.execute(sql, params).rowcount


@functools.cache
def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def insert_job(dialect: Dialect, table: str, values: Mapping[str, Any]) -> Job:
    """An INSERT into `ap_runs` or `ap_threads` (sqlite3.IntegrityError when the key is taken)."""
    sql = _insert_sql(table, tuple(values))
    params = bind_values(t.metadata.tables[table], dialect, values)
    return lambda conn: conn.execute(sql, params).rowcount
