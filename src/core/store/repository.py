"""The app store: one async repository, two backends (SQLite default, PostgreSQL by URL).

Every write that decides who may run something (claiming a paused message, optimistic artifact
updates) is a single conditional UPDATE whose row count says who won, so it is correct across
processes on both backends without advisory locks.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import secrets
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event as sa_event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ...errors import ArtifactConflictError, ConfigError
from ..checkpoints import WAL_BOUNDS
from . import schema as t
from .codec import dumps as _dumps
from .codec import loads as _loads
from .eventlog import EventLog, message_values
from .migrate import migrate

FINAL_STATUSES = ("completed", "failed", "cancelled")
log = logging.getLogger("artifactflow.store")


def normalize_database_url(url: str) -> str:
    """Accept plain `postgresql://` / `sqlite:///` URLs and pick the async drivers."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        return "postgresql+asyncpg://" + url[len("postgresql://") :]
    if url.startswith("sqlite:///"):
        return "sqlite+aiosqlite:///" + url[len("sqlite:///") :]
    if url.startswith(("postgresql+asyncpg://", "sqlite+aiosqlite://")):
        return url
    raise ConfigError(
        f"unsupported database URL {url.split('://')[0]}://…; use postgresql://user@host:port/db "
        "or sqlite:///path/to/file.db"
    )


def _hide_sql(context: ExceptionContext) -> None:
    """Keep SQL text and parameters out of error messages (they reach people: a message's
    `error`, a tool result, the CLI); log them at debug level instead. The exception keeps
    its type, so callers still catch `IntegrityError` and friends."""
    exc = context.sqlalchemy_exception
    if not isinstance(exc, sa.exc.StatementError) or exc.statement is None:
        return
    log.debug(
        "database error: %s\n[SQL: %s]\n[parameters: %r]",
        context.original_exception, exc.statement, exc.params,
    )
    exc.statement = None  # type: ignore[assignment]
    exc.params = None
    exc.code = None


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AppStore(EventLog):
    """Conversations, messages, events, artifacts, approvals and the tool-execution ledger.

    The event log and compare-and-set status changes live in `EventLog` (eventlog.py)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"

    # --- lifecycle -------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        sqlite_path: Path | None = None,
        pool_size: int = 10,
        synchronous_commit: str = "off",
    ) -> AppStore:
        if url:
            # No pre-ping: it costs a round trip per checkout; a connection broken by a server
            # restart fails one statement and is then replaced with the rest of the pool.
            engine = create_async_engine(
                normalize_database_url(url),
                pool_size=pool_size,
                max_overflow=pool_size,
                connect_args={"server_settings": {"synchronous_commit": synchronous_commit}},
            )
        else:
            assert sqlite_path is not None
            sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            engine = create_async_engine(f"sqlite+aiosqlite:///{sqlite_path}")

            @sa_event.listens_for(engine.sync_engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                cursor = dbapi_conn.cursor()
                # First: switching a new file to WAL needs a lock another process may hold.
                cursor.execute("PRAGMA busy_timeout=30000")
                # Before WAL, so a new file gets it: event rows of a few KB pack densely.
                cursor.execute("PRAGMA page_size=16384")
                cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.execute("PRAGMA foreign_keys=ON")
                for pragma in WAL_BOUNDS:  # as for the checkpoint file
                    cursor.execute(pragma)
                cursor.close()

        sa_event.listen(engine.sync_engine, "handle_error", _hide_sql)
        store = cls(engine)
        await _retry_when_locked(store.migrate)
        return store

    async def close(self) -> None:
        await self.engine.dispose()

    async def migrate(self) -> int:
        """Create missing tables and upgrade older schemas, under a lock (see migrate.py);
        safe from any number of processes at once. Returns the version found before."""
        return await migrate(self.engine)

    async def schema_version(self) -> int:
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(t.meta.c.value).where(t.meta.c.key == "schema"))).first()
        return int(row[0]) if row else 0

    # --- users and tokens ------------------------------------------------------------------

    async def create_token(self, user_name: str) -> tuple[str, str]:
        """Create (or reuse) the user and a new bearer token; returns (user_id, token)."""
        token = "af_" + secrets.token_urlsafe(32)
        now = time.time()
        async with self.engine.begin() as conn:
            row = (await conn.execute(sa.select(t.users.c.id).where(t.users.c.name == user_name))).first()
            if row is None:
                user_id = uuid.uuid4().hex
                await conn.execute(t.users.insert().values(id=user_id, name=user_name, created_at=now))
            else:
                user_id = row[0]
            await conn.execute(
                t.tokens.insert().values(
                    id=uuid.uuid4().hex, user_id=user_id, token_hash=hash_token(token), created_at=now
                )
            )
        return user_id, token

    async def user_for_token(self, token: str) -> str | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(t.tokens.c.user_id).where(t.tokens.c.token_hash == hash_token(token))
                )
            ).first()
        return row[0] if row else None

    # --- conversations ---------------------------------------------------------------------

    async def create_conversation(
        self, conversation_id: str | None = None, *, user_id: str | None = None, title: str | None = None
    ) -> dict[str, Any]:
        now = time.time()
        record = {
            "id": conversation_id or uuid.uuid4().hex,
            "user_id": user_id,
            "title": title,
            "active_message_id": None,
            "created_at": now,
            "updated_at": now,
        }
        async with self.engine.begin() as conn:
            await conn.execute(t.conversations.insert().values(**record))
        return record

    async def get_conversation(self, conversation_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(sa.select(t.conversations).where(t.conversations.c.id == conversation_id))
            ).mappings().first()
        return dict(row) if row else None

    async def list_conversations(
        self, *, user_id: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Newest first; only `user_id`'s when given."""
        query = sa.select(t.conversations).order_by(
            t.conversations.c.updated_at.desc(), t.conversations.c.id
        )
        if user_id is not None:
            query = query.where(t.conversations.c.user_id == user_id)
        query = query.limit(limit).offset(offset)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [dict(r) for r in rows]

    async def count_conversations(self, *, user_id: str | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(t.conversations)
        if user_id is not None:
            query = query.where(t.conversations.c.user_id == user_id)
        async with self.engine.connect() as conn:
            return int((await conn.execute(query)).scalar_one())

    async def touch_conversation(
        self, conversation_id: str, *, active_message_id: str | None = None, title: str | None = None
    ) -> None:
        values: dict[str, Any] = {"updated_at": time.time()}
        if active_message_id is not None:
            values["active_message_id"] = active_message_id
        async with self.engine.begin() as conn:
            if title is not None:
                await conn.execute(
                    t.conversations.update()
                    .where(t.conversations.c.id == conversation_id, t.conversations.c.title.is_(None))
                    .values(title=title)
                )
            await conn.execute(
                t.conversations.update().where(t.conversations.c.id == conversation_id).values(**values)
            )

    async def delete_conversation(self, conversation_id: str) -> list[str]:
        """Delete a conversation and everything in it; returns its thread ids."""
        async with self.engine.begin() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.messages.c.id, t.messages.c.thread_id).where(
                        t.messages.c.conversation_id == conversation_id
                    )
                )
            ).all()
            message_ids = [r[0] for r in rows]
            if message_ids:
                await conn.execute(t.events.delete().where(t.events.c.message_id.in_(message_ids)))
                await conn.execute(
                    t.tool_executions.delete().where(t.tool_executions.c.message_id.in_(message_ids))
                )
                for table in (t.workflow_nodes, t.workflow_runs):
                    await conn.execute(table.delete().where(table.c.message_id.in_(message_ids)))
            for table in (t.artifact_versions, t.artifacts, t.approvals):
                await conn.execute(table.delete().where(table.c.conversation_id == conversation_id))
            await conn.execute(t.messages.delete().where(t.messages.c.conversation_id == conversation_id))
            await conn.execute(t.conversations.delete().where(t.conversations.c.id == conversation_id))
        return [r[1] for r in rows]

    # --- messages --------------------------------------------------------------------------

    async def add_message(
        self,
        *,
        conversation_id: str,
        content: str,
        parent_id: str | None,
        message_id: str | None = None,
        thread_id: str | None = None,
        status: str = "running",
        run_token: str | None = None,
        lease_expires_at: float | None = None,
    ) -> dict[str, Any]:
        now = time.time()
        message_id = message_id or uuid.uuid4().hex
        record = {
            "id": message_id,
            "conversation_id": conversation_id,
            "parent_id": parent_id,
            "thread_id": thread_id or f"thread-{message_id}",
            "content": content,
            "response": None,
            "status": status,
            "outcome": None,
            "error": None,
            "waiting_for": None,
            "metrics": None,
            "run_token": run_token,
            "lease_expires_at": lease_expires_at,
            "checkpoints_deleted": False,
            "created_at": now,
            "updated_at": now,
        }
        async with self.engine.begin() as conn:
            await conn.execute(t.messages.insert().values(**record))
        return record

    @staticmethod
    def _message(row: Any) -> dict[str, Any]:
        record = dict(row)
        record["waiting_for"] = _loads(record.get("waiting_for"))
        record["metrics"] = _loads(record.get("metrics"))
        return record

    async def get_message(self, message_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(sa.select(t.messages).where(t.messages.c.id == message_id))
            ).mappings().first()
        return self._message(row) if row else None

    async def list_messages(self, conversation_id: str) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.messages)
                    .where(t.messages.c.conversation_id == conversation_id)
                    .order_by(t.messages.c.created_at, t.messages.c.id)
                )
            ).mappings().all()
        return [self._message(r) for r in rows]

    async def messages_with_status(self, statuses: Iterable[str]) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.messages)
                    .where(t.messages.c.status.in_(list(statuses)))
                    .order_by(t.messages.c.created_at)
                )
            ).mappings().all()
        return [self._message(r) for r in rows]

    async def update_message(self, message_id: str, *, run_token: str | None = None, **fields: Any) -> bool:
        """Update fields; with `run_token`, only while that run still owns the message."""
        values = message_values(fields)
        query = t.messages.update().where(t.messages.c.id == message_id)
        if run_token is not None:
            query = query.where(t.messages.c.run_token == run_token)
        async with self.engine.begin() as conn:
            result = await conn.execute(query.values(**values))
        return result.rowcount == 1

    # --- approvals -------------------------------------------------------------------------

    async def allow_always(self, conversation_id: str, tool_names: Iterable[str]) -> None:
        existing = await self.always_allowed(conversation_id)
        fresh = [n for n in set(tool_names) if n not in existing]
        if not fresh:
            return
        async with self.engine.begin() as conn:
            for name in fresh:
                try:
                    async with conn.begin_nested():
                        await conn.execute(
                            t.approvals.insert().values(
                                conversation_id=conversation_id, tool_name=name, created_at=time.time()
                            )
                        )
                except sa.exc.IntegrityError:
                    pass

    async def always_allowed(self, conversation_id: str) -> set[str]:
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.approvals.c.tool_name).where(
                        t.approvals.c.conversation_id == conversation_id
                    )
                )
            ).all()
        return {r[0] for r in rows}

    # --- tool-execution ledger (exactly-once across crashes) --------------------------------

    async def ledger_get(self, message_id: str, tool_call_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(t.tool_executions).where(
                        t.tool_executions.c.message_id == message_id,
                        t.tool_executions.c.tool_call_id == tool_call_id,
                    )
                )
            ).mappings().first()
        if row is None:
            return None
        record = dict(row)
        record["result"] = _loads(record["result"])
        return record

    async def ledger_start(self, message_id: str, tool_call_id: str) -> bool:
        """Record that a call is about to run. False if it was already started."""
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    t.tool_executions.insert().values(
                        message_id=message_id,
                        tool_call_id=tool_call_id,
                        status="started",
                        result=None,
                        updated_at=time.time(),
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    async def ledger_finish(self, message_id: str, tool_call_id: str, result: dict[str, Any]) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                t.tool_executions.update()
                .where(
                    t.tool_executions.c.message_id == message_id,
                    t.tool_executions.c.tool_call_id == tool_call_id,
                )
                .values(status="finished", result=_dumps(result), updated_at=time.time())
            )

    async def ledger_clear(self, message_id: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(t.tool_executions.delete().where(t.tool_executions.c.message_id == message_id))

    async def ledger_clear_finished(self) -> None:
        """Drop ledger rows of messages that can no longer resume."""
        finished = sa.select(t.messages.c.id).where(t.messages.c.status.in_(FINAL_STATUSES))
        async with self.engine.begin() as conn:
            await conn.execute(t.tool_executions.delete().where(t.tool_executions.c.message_id.in_(finished)))

    # --- hook marks (exactly-once hook points, src/hooks/dedupe.py) ---------------------------

    async def hook_mark_get(self, message_id: str, key: str) -> str | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(t.hook_marks.c.value).where(
                        t.hook_marks.c.message_id == message_id, t.hook_marks.c.key == key
                    )
                )
            ).first()
        return None if row is None else row[0]

    async def hook_mark_put(self, message_id: str, key: str, value: str) -> bool:
        """Store a mark once; False when the key was already marked (the first one stays)."""
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    t.hook_marks.insert().values(
                        message_id=message_id, key=key, value=value, created_at=time.time()
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    async def hook_marks_clear(self, message_id: str | None = None) -> None:
        """Drop one message's marks, or (no id) those of messages that can no longer resume."""
        if message_id is not None:
            where = t.hook_marks.c.message_id == message_id
        else:
            finished = sa.select(t.messages.c.id).where(t.messages.c.status.in_(FINAL_STATUSES))
            where = t.hook_marks.c.message_id.in_(finished)
        async with self.engine.begin() as conn:
            await conn.execute(t.hook_marks.delete().where(where))

    # --- artifacts (rows only; the rules live in artifacts.ArtifactService) ------------

    async def get_artifact(self, conversation_id: str, artifact_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(t.artifacts).where(
                        t.artifacts.c.conversation_id == conversation_id,
                        t.artifacts.c.artifact_id == artifact_id,
                    )
                )
            ).mappings().first()
        return dict(row) if row else None

    async def list_artifacts(self, conversation_id: str) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.artifacts)
                    .where(t.artifacts.c.conversation_id == conversation_id)
                    .order_by(t.artifacts.c.created_at, t.artifacts.c.artifact_id)
                )
            ).mappings().all()
        return [dict(r) for r in rows]

    async def artifact_versions(self, conversation_id: str, artifact_id: str) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.artifact_versions)
                    .where(
                        t.artifact_versions.c.conversation_id == conversation_id,
                        t.artifact_versions.c.artifact_id == artifact_id,
                    )
                    .order_by(t.artifact_versions.c.version)
                )
            ).mappings().all()
        return [dict(r) for r in rows]

    async def get_artifact_version(
        self, conversation_id: str, artifact_id: str, version: int
    ) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(t.artifact_versions).where(
                        t.artifact_versions.c.conversation_id == conversation_id,
                        t.artifact_versions.c.artifact_id == artifact_id,
                        t.artifact_versions.c.version == version,
                    )
                )
            ).mappings().first()
        return dict(row) if row else None

    async def create_artifact(
        self,
        conversation_id: str,
        artifact_id: str,
        *,
        title: str,
        content: str,
        content_type: str,
        agent: str | None = None,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        now = time.time()
        record = {
            "conversation_id": conversation_id,
            "artifact_id": artifact_id,
            "title": title,
            "content_type": content_type,
            "content": content,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        try:
            async with self.engine.begin() as conn:
                await conn.execute(t.artifacts.insert().values(**record))
                await conn.execute(
                    t.artifact_versions.insert().values(
                        conversation_id=conversation_id,
                        artifact_id=artifact_id,
                        version=1,
                        title=title,
                        content=content,
                        change="create",
                        agent=agent,
                        message_id=message_id,
                        created_at=now,
                    )
                )
        except sa.exc.IntegrityError:
            raise ArtifactConflictError(
                f"artifact '{artifact_id}' already exists in conversation '{conversation_id}'"
            ) from None
        return record

    async def write_artifact_version(
        self,
        conversation_id: str,
        artifact_id: str,
        *,
        expected_version: int,
        content: str,
        change: str,
        title: str | None = None,
        agent: str | None = None,
        message_id: str | None = None,
    ) -> int:
        """Write a new version if the artifact is still at `expected_version` (optimistic lock)."""
        now = time.time()
        new_version = expected_version + 1
        values: dict[str, Any] = {"content": content, "version": new_version, "updated_at": now}
        if title is not None:
            values["title"] = title
        async with self.engine.begin() as conn:
            result = await conn.execute(
                t.artifacts.update()
                .where(
                    t.artifacts.c.conversation_id == conversation_id,
                    t.artifacts.c.artifact_id == artifact_id,
                    t.artifacts.c.version == expected_version,
                )
                .values(**values)
            )
            if result.rowcount != 1:
                raise ArtifactConflictError(
                    f"artifact '{artifact_id}' was changed by another writer (expected version "
                    f"{expected_version}); read it again and retry"
                )
            current_title = (
                await conn.execute(
                    sa.select(t.artifacts.c.title).where(
                        t.artifacts.c.conversation_id == conversation_id,
                        t.artifacts.c.artifact_id == artifact_id,
                    )
                )
            ).scalar_one()
            await conn.execute(
                t.artifact_versions.insert().values(
                    conversation_id=conversation_id,
                    artifact_id=artifact_id,
                    version=new_version,
                    title=current_title,
                    content=content,
                    change=change,
                    agent=agent,
                    message_id=message_id,
                    created_at=now,
                )
            )
        return new_version

    # --- workflows: runs and lineage --------------------------------------------------------

    async def add_workflow_run(self, record: dict[str, Any]) -> None:
        values = {**record, "input": _dumps(record["input"]), "created_at": time.time()}
        async with self.engine.begin() as conn:
            await conn.execute(t.workflow_runs.insert().values(**values))

    async def get_workflow_run(self, message_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(t.workflow_runs).where(t.workflow_runs.c.message_id == message_id)
                )
            ).mappings().first()
        if row is None:
            return None
        return {**row, "input": _loads(row["input"])}

    async def list_workflow_runs(
        self, workflow: str | None = None, *, user_id: str | None = None, limit: int = 20,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Newest first, joined with their message's status; only `user_id`'s when given."""
        query = (
            sa.select(
                t.workflow_runs.c.message_id, t.workflow_runs.c.conversation_id,
                t.workflow_runs.c.workflow, t.workflow_runs.c.input,
                t.workflow_runs.c.created_at, t.messages.c.status, t.messages.c.outcome,
            )
            .join(t.messages, t.messages.c.id == t.workflow_runs.c.message_id)
            .order_by(t.workflow_runs.c.created_at.desc(), t.workflow_runs.c.message_id)
            .limit(limit)
            .offset(offset)
        )
        if workflow is not None:
            query = query.where(t.workflow_runs.c.workflow == workflow)
        if user_id is not None:
            query = query.join(
                t.conversations, t.conversations.c.id == t.workflow_runs.c.conversation_id
            ).where(t.conversations.c.user_id == user_id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [{**r, "input": _loads(r["input"])} for r in rows]

    async def put_lineage(self, record: dict[str, Any]) -> None:
        """Insert or replace one node execution (keyed by message and execution id)."""
        values = dict(record)
        values["parents"] = _dumps(values.get("parents") or [])
        for key in ("input", "output"):
            values[key] = _dumps(values.get(key))
        keys = (t.workflow_nodes.c.message_id == values["message_id"],
                t.workflow_nodes.c.execution_id == values["execution_id"])
        async with self.engine.begin() as conn:
            existing = (await conn.execute(sa.select(t.workflow_nodes.c.started_at).where(*keys))).first()
            if existing is None:
                try:
                    async with conn.begin_nested():
                        await conn.execute(t.workflow_nodes.insert().values(**values))
                    return
                except sa.exc.IntegrityError:
                    pass
            values.pop("started_at", None)  # the first write's start time stays
            await conn.execute(t.workflow_nodes.update().where(*keys).values(**values))

    async def lineage(self, message_id: str, *, group_id: str | None = None) -> list[dict[str, Any]]:
        """A workflow run's node executions in the order they started."""
        query = sa.select(t.workflow_nodes).where(t.workflow_nodes.c.message_id == message_id)
        if group_id is not None:
            query = query.where(t.workflow_nodes.c.group_id == group_id)
        query = query.order_by(t.workflow_nodes.c.started_at, t.workflow_nodes.c.execution_id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        out = []
        for row in rows:
            record = dict(row)
            for key in ("parents", "input", "output"):
                record[key] = _loads(record[key])
            out.append(record)
        return out


async def _retry_when_locked(step: Any, attempts: int = 6) -> Any:
    """Run `step`, again if SQLite answered "database is locked" at once.

    busy_timeout makes SQLite wait for most locks, but not all: a connection whose WAL
    snapshot went stale while another process created the schema, or a journal-mode switch
    racing a fresh file, fails immediately. Processes starting together on a new data folder
    hit that window; a short, jittered retry closes it.
    """
    for attempt in range(1, attempts + 1):
        try:
            return await step()
        except sa.exc.OperationalError as exc:
            if "database is locked" not in str(exc) or attempt == attempts:
                raise
            await asyncio.sleep(0.05 * attempt + random.random() * 0.05)
    return None
