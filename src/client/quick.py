"""Stored data read before anything heavy loads: the conversation list of a SQLite store.

`artifactflow conversations` is what people type first. Through `Reader` it imports SQLAlchemy
and its asyncio extension (about 200 ms of CPU, half the command) to run two SELECTs;
`conversation_page` runs the same statements with the standard library's `sqlite3`
(`core.store.quick_reads`) on a read-only connection. It answers only for a store that already
exists at this version's schema and None otherwise (no file yet, an older schema to upgrade,
PostgreSQL), and the caller then opens a `Reader`. `tests/test_startup_imports.py` checks that
both answer alike.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.store.rows import ConversationRow
    from ..settings import Settings


def conversation_page(
    settings: Settings, *, limit: int = 20, offset: int = 0
) -> tuple[list[ConversationRow], int] | None:
    """`(conversations newest first, how many in all)` as `Reader.conversations.list` and
    `.count` give them, or None when only a `Reader` can answer."""
    from ..core.store import quick_reads

    if settings.database_url:
        return None
    conn = quick_reads.open_existing(settings.app_db_path)
    if conn is None:
        return None
    with contextlib.closing(conn):
        rows = quick_reads.list_conversations(conn, limit=limit, offset=offset)
        return rows, quick_reads.count_conversations(conn)
