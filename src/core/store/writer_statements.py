"""A run's per-run statements on the SQLite writer's thread, with fixed SQL.

Every run ends with a status change (a compare-and-set on the message row with the event that
records it) and a clean-up (its tool ledger and hook marks dropped, its conversation touched,
its checkpoints marked deleted). Through SQLAlchemy each statement cost a pool checkout, a
greenlet switch, its statement's cache key and a thread hop to aiosqlite, and a durable ending
two more trips for the `synchronous` pragma: about a dozen hops per run, a sixth of the event
loop's busy time at 100 concurrent runs. Here each of them is one function run on the store's
writer thread (`sqlite_writer.py`): one hop per transaction, SQL text made once per shape.

The statements are the same as `EventLog.change_status` and `RunRecords.run_records_clear`
issue (same conditions, same columns through the columns' own bind processors, the next event
id read after the row lock, a durable commit with `synchronous=FULL` on the connection for
that transaction), so SQLite sees the same writes; PostgreSQL and in-memory stores keep the
SQLAlchemy path.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from . import schema as t
from .codec import event_row
from .rows import EventRow

Job = Callable[[sqlite3.Connection], Any]

_MAX_EVENT_ID = "SELECT COALESCE(MAX(event_id), 0) FROM af_events WHERE message_id = ?"
_STATUS = "SELECT status FROM af_messages WHERE id = ?"
_CLEAR = (
    "DELETE FROM af_tool_executions WHERE message_id = ?",
    "DELETE FROM af_hook_marks WHERE message_id = ?",
)
_TOUCH = "UPDATE af_conversations SET updated_at = ? WHERE id = ?"
_ACTIVATE = (
    "UPDATE af_conversations SET updated_at = ?, active_message_id = ?, title = COALESCE(title, ?) "
    "WHERE id = ?"
)
_CHECKPOINTS_DELETED = "UPDATE af_messages SET checkpoints_deleted = 1, updated_at = ? WHERE id = ?"
_EVENT_COLUMNS = ("message_id", "event_id", "type", "agent", "timestamp", "data", "data_z")


@functools.cache
def _processor(table: sa.Table, column: str, dialect: Dialect) -> Callable[[Any], Any] | None:
    return table.c[column].type.bind_processor(dialect)


def bind_values(table: sa.Table, dialect: Dialect, values: Mapping[str, Any]) -> list[Any]:
    """`values` as the driver takes them: each through its column's bind processor."""
    out = []
    for name, value in values.items():
        process = _processor(table, name, dialect)
        out.append(value if process is None else process(value))
    return out


@functools.cache
def _status_sql(
    columns: tuple[str, ...], expected: int, token: str, guard_cancel: bool, stale: bool
) -> str:
    """The compare-and-set UPDATE for one shape (`token`: "any", "null" or "equal")."""
    sets = ", ".join(f"{name} = ?" for name in columns)
    where = [f"id = ? AND status IN ({', '.join('?' * expected)})"]
    if token == "null":
        where.append("run_token IS NULL")
    elif token == "equal":
        where.append("run_token = ?")
    if guard_cancel:
        where.append("cancel_requested_at IS NULL")
    if stale:
        where.append("(lease_expires_at IS NULL OR lease_expires_at < ?)")
    return f"UPDATE af_messages SET {sets} WHERE {' AND '.join(where)}"


@functools.cache
def _insert_event_sql() -> str:
    marks = ", ".join("?" for _ in _EVENT_COLUMNS)
    return f"INSERT INTO af_events ({', '.join(_EVENT_COLUMNS)}) VALUES ({marks})"


def status_change_job(
    dialect: Dialect,
    message_id: str,
    *,
    expected: Sequence[str],
    values: Mapping[str, Any],
    token: tuple[str, str | None],
    guard_cancel: bool,
    stale_before: float | None,
    event: Mapping[str, Any] | None,
) -> Callable[[sqlite3.Connection], tuple[bool, str | None, EventRow | None]]:
    """`EventLog.change_status` as one writer job (inside the writer's transaction): the
    conditional UPDATE, then, if it won, the event numbered after the row lock. Returns
    (won, status, stored event); the status found when it lost."""
    mode, expected_token = token
    sql = _status_sql(tuple(values), len(expected), mode, guard_cancel, stale_before is not None)
    params = [*bind_values(t.messages, dialect, values), message_id, *expected]
    if mode == "equal":
        params.append(expected_token)
    if stale_before is not None:
        params.append(stale_before)

    def job(conn: sqlite3.Connection) -> tuple[bool, str | None, EventRow | None]:
        if conn.execute(sql, params).rowcount != 1:
            found = conn.execute(_STATUS, (message_id,)).fetchall()
            return False, found[0][0] if found else None, None
        status = values.get("status")
        if event is None:
            return True, status, None
        (last,) = conn.execute(_MAX_EVENT_ID, (message_id,)).fetchone()
        record = EventRow(
            message_id=message_id,
            event_id=int(last) + 1,
            type=event["type"],
            agent=event.get("agent"),
            timestamp=event.get("timestamp") or time.time(),
            data=dict(event.get("data") or {}),
        )
        row = event_row(message_id, record)
        conn.execute(_insert_event_sql(), bind_values(t.events, dialect, {c: row[c] for c in _EVENT_COLUMNS}))  # type: ignore[literal-required]
        return True, status, record

    return job


def clear_run_records_job(message_id: str, touch: str | None, checkpoints_deleted: bool) -> Job:
    """`RunRecords.run_records_clear` as one writer job."""

    def job(conn: sqlite3.Connection) -> None:
        now = time.time()
        if touch is not None:
            conn.execute(_TOUCH, (now, touch))
        for sql in _CLEAR:
            conn.execute(sql, (message_id,))
        if checkpoints_deleted:
            conn.execute(_CHECKPOINTS_DELETED, (now, message_id))

    return job


@functools.cache
def _insert_sql(table: sa.Table, columns: tuple[str, ...]) -> str:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"


def add_message_job(
    dialect: Dialect,
    message: Mapping[str, Any],
    conversation: Mapping[str, Any] | None,
    activate: str | None,
) -> Job:
    """`ConversationRecords.add_message` as one writer job: the new conversation's row (if
    any), the message's, and with `activate` the conversation's active message and title."""
    rows = [] if conversation is None else [(t.conversations, conversation)]
    rows.append((t.messages, message))
    inserts = [(_insert_sql(table, tuple(row)), bind_values(table, dialect, row)) for table, row in rows]
    touch = None
    if activate is not None:
        title = bind_values(t.conversations, dialect, {"title": activate})[0]
        touch = (message["created_at"], message["id"], title, message["conversation_id"])

    def job(conn: sqlite3.Connection) -> None:
        for sql, params in inserts:
            conn.execute(sql, params)
        if touch is not None:
            conn.execute(_ACTIVATE, touch)

    return job


def plain_values(values: Mapping[str, Any]) -> bool:
    """Whether every value is a plain one (no SQL expression): the writer's SQL binds them."""
    return not any(isinstance(v, sa.ClauseElement) for v in values.values())
