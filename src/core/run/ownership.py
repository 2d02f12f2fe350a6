"""Checkpoints are written only by the run that owns the message.

A process paused past its lease (a suspended laptop, a stopped container) wakes up inside a
graph step; meanwhile another process recovered the message and maybe finished it. Its events
are refused by the store (`append_events(run_token=...)`), but LangGraph would still write
its checkpoints. So the process's saver is guarded: while a run drives the graph
(`owned_by`, a context variable that LangGraph's tasks inherit), every checkpoint (`aput`, once
per step) first checks that the run's token still owns the message and raises
`LeaseLostError` if not; the step's pending writes (`aput_writes`, one per task) are not
checked, which would cost a read each for rows that only matter next to a checkpoint. Writes
outside a run (tests, tools) are not checked. With SQLite on both sides the check runs on the
checkpoint connection's thread in the same trip as the write (`aput_checked`), reading the
app store through a connection of that thread's own. With PostgreSQL on both sides (one
database) the check is part of the statement that writes the checkpoint
(`PooledPostgresSaver.aput_owned`). What slips through — those pending writes, or a
takeover between the check and the write — is removed by `gc` (checkpoint rows of messages
that are no longer resumable).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any

import sqlalchemy as sa

from ...errors import LeaseLostError
from ..sqlite_saver import OneHopSqliteSaver
from ..store.sqlite_writer import holds_run_here, sqlite_file_of

Owner = tuple[Any, str, str]  # (store, message_id, run_token)

_OWNER: ContextVar[Owner | None] = ContextVar("artifactflow_run_owner", default=None)


@contextlib.contextmanager
def owned_by(store: Any, message_id: str, run_token: str) -> Iterator[None]:
    """Checkpoint writes made in this context (and tasks started in it) need the token."""
    reset = _OWNER.set((store, message_id, run_token))
    try:
        yield
    finally:
        _OWNER.reset(reset)


async def _check() -> None:
    owner = _OWNER.get()
    if owner is None:
        return
    store, message_id, run_token = owner
    if not await store.holds_run(message_id, run_token):
        raise _lost(message_id)


def _lost(message_id: str) -> LeaseLostError:
    return LeaseLostError(
        f"message {message_id} is no longer owned by this run; its checkpoint was not written",
        message_id=message_id,
    )


def _guarded(write: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(write)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        await _check()
        return await write(*args, **kwargs)

    return guarded


def _guarded_on_thread(saver: OneHopSqliteSaver) -> Callable[..., Awaitable[Any]]:
    """A SQLite saver of a SQLite app store checks on its own thread, in the trip that
    writes the checkpoint (one trip instead of two, and no gap between check and write)."""
    plain = _guarded(saver.aput)

    @functools.wraps(saver.aput)
    async def guarded(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        owner = _OWNER.get()
        path = None if owner is None else sqlite_file_of(owner[0])
        if owner is None or path is None:
            return await plain(config, checkpoint, metadata, new_versions)
        _, message_id, run_token = owner

        def check() -> None:
            if not holds_run_here(path, message_id, run_token):
                raise _lost(message_id)

        return await saver.aput_checked(check, config, checkpoint, metadata, new_versions)

    return guarded


def _guarded_in_statement(saver: Any) -> Callable[..., Awaitable[Any]]:
    """A pooled PostgreSQL saver on the app store's own database checks in the statement
    that writes the checkpoint (one round trip instead of two, and no gap between check and
    write within it)."""
    plain = _guarded(saver.aput)
    same: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()

    @functools.wraps(saver.aput)
    async def guarded(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        owner = _OWNER.get()
        if owner is None:
            return await plain(config, checkpoint, metadata, new_versions)
        store, message_id, run_token = owner
        if store not in same:
            same[store] = _same_postgres(store, saver)
        if not same[store]:
            return await plain(config, checkpoint, metadata, new_versions)
        return await saver.aput_owned(
            (message_id, run_token), config, checkpoint, metadata, new_versions
        )

    return guarded


def _same_postgres(store: Any, saver: Any) -> bool:
    """Whether the app store and the saver's pool are one PostgreSQL database."""
    conninfo = getattr(saver.conn, "conninfo", None)
    if getattr(store, "is_sqlite", True) or not isinstance(conninfo, str):
        return False
    try:
        pool, app = sa.engine.make_url(conninfo), store.engine.url
    except Exception:  # a key=value conninfo: check through the app store instead
        return False
    fields = ("host", "port", "database", "username")
    return all(getattr(pool, f) == getattr(app, f) for f in fields)


def guard_saver(saver: Any) -> Any:
    """Make `saver`'s checkpoints (`aput`) check the owning run."""
    if not getattr(saver, "_artifactflow_guarded", False):
        target: Any = saver
        if isinstance(saver, OneHopSqliteSaver):
            target.aput = _guarded_on_thread(saver)
        elif hasattr(saver, "aput_owned"):  # PooledPostgresSaver (not imported: psycopg)
            target.aput = _guarded_in_statement(saver)
        else:
            target.aput = _guarded(saver.aput)
        target._artifactflow_guarded = True
    return saver
