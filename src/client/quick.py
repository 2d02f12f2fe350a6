"""Stored data read before anything heavy loads: the conversation list and the paused
messages of a SQLite store.

`artifactflow conversations` is what people type first, `pending` what they type after a
pause. Through `Reader` each imports SQLAlchemy and its asyncio extension (about 200 ms of CPU,
half the command) to run a SELECT or two; these functions run the same statements with the
standard library's `sqlite3`
(`core.store.quick_reads`) on a read-only connection. It answers only for a store that already
exists at this version's schema and None otherwise (no file yet, an older schema to upgrade,
PostgreSQL), and the caller then opens a `Reader`. `tests/test_startup_imports.py` checks that
both answer alike.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

    from ..core.store.rows import ConversationRow, MessageRow
    from ..settings import Settings


def _connect(settings: Settings) -> sqlite3.Connection | None:
    from ..core.store import quick_reads

    return None if settings.database_url else quick_reads.open_existing(settings.app_db_path)


def conversation_page(
    settings: Settings, *, limit: int = 20, offset: int = 0, project: str | None = None
) -> tuple[list[ConversationRow], int] | None:
    """`(conversations newest first, how many in all)` as `Reader.conversations.list` and
    `.count` give them, or None when only a `Reader` can answer."""
    from ..core.store import quick_reads

    conn = _connect(settings)
    if conn is None:
        return None
    with contextlib.closing(conn):
        rows = quick_reads.list_conversations(conn, limit=limit, offset=offset, project=project)
        return rows, quick_reads.count_conversations(conn, project)


def pending(settings: Settings) -> list[MessageRow] | None:
    """The paused messages as `Reader.runs.pending` gives them, or None when only a `Reader`
    can answer."""
    from ..core.store import quick_reads

    conn = _connect(settings)
    if conn is None:
        return None
    with contextlib.closing(conn):
        return quick_reads.messages_with_status(conn, "waiting")


def known(settings: Settings, kind: str, row_id: str) -> bool | None:
    """Whether a conversation or message (`kind`) with this id is stored: False also when
    no store exists yet; None when only a `Reader` can tell (PostgreSQL, an older schema).
    Never creates a file."""
    from ..core.store import quick_reads

    if not settings.database_url and not settings.app_db_path.exists():
        return False
    conn = _connect(settings)
    if conn is None:
        return None
    table = {"conversation": "af_conversations", "message": "af_messages"}[kind]
    with contextlib.closing(conn):
        return quick_reads.has_row(conn, table, row_id)
