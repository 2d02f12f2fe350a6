"""Reads of a SQLite app store with the standard library's `sqlite3`, for the command line's
start-up.

`artifactflow conversations` is what people type first (and `pending` after a pause); through `Reader` it imports SQLAlchemy
and its asyncio extension (about 200 ms of a 0.5 s budget) to run one SELECT. These functions
run the same statements as `conversation_records.py` on a read-only connection, and decode
the rows as it does (JSON columns, booleans). They answer
only for a store that exists at this version's schema (`open_existing` returns None
otherwise, and the caller reads through `Reader`, which creates or upgrades it); PostgreSQL
always goes through `Reader`. `tests/test_startup_imports.py` checks both answer alike.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, cast

from .rows import ConversationRow, MessageRow
from .version import SCHEMA_VERSION

CONVERSATION_COLUMNS = (
    "id", "user_id", "title", "active_message_id", "created_at", "updated_at", "project",
)


def open_existing(path: Path) -> sqlite3.Connection | None:
    """A read-only connection to the app store at `path`, or None when there is no such file,
    it is not an app store at this schema version, or it cannot be read."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT value FROM af_meta WHERE key = 'schema'").fetchone()
    except sqlite3.Error:
        row = None
    if row is None or row[0] != str(SCHEMA_VERSION):
        conn.close()
        return None
    conn.row_factory = sqlite3.Row
    return conn


def list_conversations(
    conn: sqlite3.Connection, *, limit: int, offset: int, project: str | None = None
) -> list[ConversationRow]:
    """As `ConversationRecords.list_conversations` without a user: newest first."""
    where, args = _project_filter(project)
    rows = conn.execute(
        f"SELECT {', '.join(CONVERSATION_COLUMNS)} FROM af_conversations{where} "
        "ORDER BY updated_at DESC, id LIMIT ? OFFSET ?",
        (*args, limit, offset),
    ).fetchall()
    return [cast(ConversationRow, dict(row)) for row in rows]


def count_conversations(conn: sqlite3.Connection, project: str | None = None) -> int:
    where, args = _project_filter(project)
    return int(conn.execute(f"SELECT count(*) FROM af_conversations{where}", args).fetchone()[0])


def _project_filter(project: str | None) -> tuple[str, tuple[str, ...]]:
    return ("", ()) if project is None else (" WHERE project = ?", (project,))


def messages_with_status(conn: sqlite3.Connection, status: str) -> list[MessageRow]:
    """As `ConversationRecords.messages_with_status([status])`: oldest first."""
    rows = conn.execute(
        "SELECT * FROM af_messages WHERE status = ? ORDER BY created_at", (status,)
    ).fetchall()
    return [_message(dict(row)) for row in rows]


def _message(record: dict[str, Any]) -> MessageRow:
    for column in ("waiting_for", "metrics", "decisions"):
        value = record.get(column)
        record[column] = None if value is None else json.loads(value)
    record["checkpoints_deleted"] = bool(record["checkpoints_deleted"])
    return cast(MessageRow, record)


def has_row(conn: sqlite3.Connection, table: str, row_id: str) -> bool:
    """Whether `table` (af_conversations or af_messages) holds a row with this id."""
    if table not in ("af_conversations", "af_messages"):
        raise ValueError(f"not a table of ids: {table}")
    return conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (row_id,)).fetchone() is not None
