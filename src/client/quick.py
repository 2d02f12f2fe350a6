"""Stored data read before anything heavy loads: the conversation list and the paused
messages of a SQLite store.

`artifactflow conversations` is what people type first, `pending` what they type after a
pause. Through `Reader` each imports SQLAlchemy and its asyncio extension (about 200 ms of CPU,
half the command) to run a SELECT or two; these functions run the same statements with the
standard library's `sqlite3`
(`core.store.quick_reads`) on a read-only connection. A SQLite store that does not exist yet
holds nothing, and they say so without creating it; for a store at an older schema (to
upgrade) or PostgreSQL they answer None, and the caller then opens a `Reader`. `tests/test_startup_imports.py` checks that
both answer alike.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from ..core.store.rows import ConversationRow, MessageRow


class StoreAt(Protocol):
    """What these readers need of the settings: `Settings`, or the command line's remembered
    location of the store (`cli.settings_cache`), which spares a listing pydantic."""

    @property
    def database_url(self) -> str | None: ...

    @property
    def app_db_path(self) -> Path: ...


def _no_store_yet(settings: StoreAt) -> bool:
    """A SQLite store that does not exist holds nothing: say so without creating it (unless
    its folder cannot be one: a `Reader` then says why)."""
    path = settings.app_db_path
    folder_ok = path.parent.is_dir() or not path.parent.exists()
    return not settings.database_url and not path.exists() and folder_ok


def _connect(settings: StoreAt) -> sqlite3.Connection | None:
    from ..core.store import quick_reads

    return None if settings.database_url else quick_reads.open_existing(settings.app_db_path)


def conversation_page(
    settings: StoreAt, *, limit: int = 20, offset: int = 0, project: str | None = None
) -> tuple[list[ConversationRow], int] | None:
    """`(conversations newest first, how many in all)` as `Reader.conversations.list` and
    `.count` give them, or None when only a `Reader` can answer."""
    from ..core.store import quick_reads

    if _no_store_yet(settings):
        return [], 0
    conn = _connect(settings)
    if conn is None:
        return None
    with contextlib.closing(conn):
        rows = quick_reads.list_conversations(conn, limit=limit, offset=offset, project=project)
        return rows, quick_reads.count_conversations(conn, project)


def pending(settings: StoreAt) -> list[MessageRow] | None:
    """The paused messages as `Reader.runs.pending` gives them, or None when only a `Reader`
    can answer."""
    from ..core.store import quick_reads

    if _no_store_yet(settings):
        return []
    conn = _connect(settings)
    if conn is None:
        return None
    with contextlib.closing(conn):
        return quick_reads.messages_with_status(conn, "waiting")


def known(settings: StoreAt, kind: str, row_id: str) -> bool | None:
    """Whether a conversation or message (`kind`) with this id is stored: False also when
    no store exists yet; None when only a `Reader` can tell (PostgreSQL, an older schema).
    Never creates a file."""
    from ..core.store import quick_reads

    if _no_store_yet(settings):
        return False
    conn = _connect(settings)
    if conn is None:
        return None
    table = {"conversation": "af_conversations", "message": "af_messages"}[kind]
    with contextlib.closing(conn):
        return quick_reads.has_row(conn, table, row_id)
