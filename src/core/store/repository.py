"""The app store: one async repository, two backends (SQLite default, PostgreSQL by URL).

`AppStore` is the one object callers hold. It is the sum of one mixin per aggregate, each in a
module of its own over the shared engine and transaction rules of `UnitOfWork`
(unit_of_work.py):

- conversations and messages (conversation_records.py);
- the event log and compare-and-set status changes, leases included (eventlog.py);
- artifacts and their versions (artifact_records.py);
- a run's exactly-once records: tool ledger and hook marks (run_records.py);
- workflow runs and lineage (workflow_records.py);
- users, tokens and approvals (token_records.py).

Every write that decides who may run something (claiming a paused message, optimistic artifact
updates) is a single conditional UPDATE whose row count says who won, so it is correct across
processes on both backends without advisory locks. Row shapes are in rows.py.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from . import schema as t
from .artifact_records import ArtifactRecords
from .config_errors import as_config_error
from .conversation_records import ConversationRecords
from .eventlog import EventLog
from .migrate import migrate
from .run_records import FINAL_STATUSES, RunRecords
from .sqlite_writer import close_sqlite_writer
from .token_records import TokenRecords, hash_token
from .unit_of_work import normalize_database_url, open_engine, retry_when_locked
from .workflow_records import WorkflowRecords

__all__ = ["FINAL_STATUSES", "AppStore", "hash_token", "normalize_database_url"]


class AppStore(
    ConversationRecords, EventLog, ArtifactRecords, RunRecords, WorkflowRecords, TokenRecords
):
    """Conversations, messages, events, artifacts, approvals and the tool-execution ledger."""

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        sqlite_path: Path | None = None,
        pool_size: int = 10,
        synchronous_commit: str = "off",
    ) -> AppStore:
        engine = open_engine(
            url, sqlite_path=sqlite_path, pool_size=pool_size, synchronous_commit=synchronous_commit
        )
        store = cls(engine)
        if not store.read_only:  # a read-only file is read as it is (store/readonly.py)
            await retry_when_locked(store.migrate)
        return store

    async def close(self) -> None:
        await close_sqlite_writer(self)
        await self.engine.dispose()

    async def migrate(self) -> int:
        """Create missing tables and upgrade older schemas, under a lock (see migrate.py);
        safe from any number of processes at once. Returns the version found before. The
        first statement of a store: a PostgreSQL database that does not exist is said here, as
        the configuration error it is."""
        try:
            return await migrate(self.engine)
        except Exception as exc:
            problem = as_config_error(exc, self.engine.url.render_as_string(hide_password=True))
            if problem is None:
                raise
            raise problem from exc

    async def schema_version(self) -> int:
        value = await self.fetch_value(sa.select(t.meta.c.value).where(t.meta.c.key == "schema"))
        return int(value) if value is not None else 0
