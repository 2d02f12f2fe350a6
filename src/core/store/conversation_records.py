"""Conversations and their messages: the aggregate every other one hangs off.

A message is one turn and the run that answers it; its status and run token are changed
under compare-and-set by the event log (eventlog.py). Here: creating, reading, listing and
plain updates, and deleting a conversation with everything recorded under it (its messages'
events, ledger rows and workflow runs, its artifacts and approvals) in one transaction.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import RowMapping

from . import schema as t
from .codec import loads
from .eventlog import message_values
from .rows import ConversationRow, MessageRow
from .sqlite_writer import sqlite_writer_for
from .unit_of_work import UnitOfWork
from .writer_statements import add_message_job


def _message(row: RowMapping) -> MessageRow:
    record: Any = dict(row)
    record["waiting_for"] = loads(record["waiting_for"])
    record["metrics"] = loads(record["metrics"])
    record["decisions"] = loads(record.get("decisions"))
    return record


def new_conversation(
    conversation_id: str | None = None,
    *,
    user_id: str | None = None,
    title: str | None = None,
    project: str | None = None,
) -> ConversationRow:
    """A new conversation's row, not stored yet (`create_conversation` stores it)."""
    now = time.time()
    return ConversationRow(
        id=conversation_id or uuid.uuid4().hex,
        user_id=user_id,
        title=title,
        active_message_id=None,
        created_at=now,
        updated_at=now,
        project=project,
    )


def touch_statement(
    conversation_id: str, *, active_message_id: str | None = None, title: str | None = None
) -> sa.Update:
    """`touch_conversation`'s UPDATE, for a caller that runs it in a transaction of its own."""
    values: dict[str, Any] = {"updated_at": time.time()}
    if active_message_id is not None:
        values["active_message_id"] = active_message_id
    if title is not None:  # only a conversation without a title gets this one
        values["title"] = sa.func.coalesce(t.conversations.c.title, title)
    return t.conversations.update().where(t.conversations.c.id == conversation_id).values(**values)


class ConversationRecords(UnitOfWork):
    """Mixed into `AppStore`: the `af_conversations` and `af_messages` tables."""

    # --- conversations ---------------------------------------------------------------------

    async def create_conversation(
        self,
        conversation_id: str | None = None,
        *,
        user_id: str | None = None,
        title: str | None = None,
        project: str | None = None,
    ) -> ConversationRow:
        record = new_conversation(conversation_id, user_id=user_id, title=title, project=project)
        await self.write(t.conversations.insert().values(**record))
        return record

    async def get_conversation(self, conversation_id: str) -> ConversationRow | None:
        query = sa.select(t.conversations).where(t.conversations.c.id == conversation_id)
        return await self.fetch_one(query, ConversationRow)

    async def list_conversations(
        self, *, user_id: str | None = None, limit: int = 20, offset: int = 0,
        project: str | None = None,
    ) -> list[ConversationRow]:
        """Newest first; only `user_id`'s when given, only `project`'s when given."""
        query = sa.select(t.conversations).order_by(
            t.conversations.c.updated_at.desc(), t.conversations.c.id
        )
        if user_id is not None:
            query = query.where(t.conversations.c.user_id == user_id)
        if project is not None:
            query = query.where(t.conversations.c.project == project)
        return await self.fetch_all(query.limit(limit).offset(offset), ConversationRow)

    async def count_conversations(self, *, user_id: str | None = None, project: str | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(t.conversations)
        if user_id is not None:
            query = query.where(t.conversations.c.user_id == user_id)
        if project is not None:
            query = query.where(t.conversations.c.project == project)
        return int(await self.fetch_value(query))

    async def touch_conversation(
        self, conversation_id: str, *, active_message_id: str | None = None, title: str | None = None
    ) -> None:
        await self.write(
            touch_statement(conversation_id, active_message_id=active_message_id, title=title)
        )

    async def delete_conversation(self, conversation_id: str) -> list[str]:
        """Delete a conversation and everything in it; returns its thread ids."""
        async with self.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.messages.c.id, t.messages.c.thread_id).where(
                        t.messages.c.conversation_id == conversation_id
                    )
                )
            ).all()
            message_ids = [r[0] for r in rows]
            if message_ids:
                for table in (t.events, t.tool_executions, t.workflow_nodes, t.workflow_runs):
                    await conn.execute(table.delete().where(table.c.message_id.in_(message_ids)))
            # conversation-scoped memories go with it; their namespace's version moves on so
            # every process drops its cached vectors of it (src/memory/cache.py)
            await conn.execute(t.memories.delete().where(t.memories.c.conversation_id == conversation_id))
            for table in (t.memory_namespaces, t.memory_changes):
                await conn.execute(
                    table.delete().where(table.c.namespace.like(f"%.conversation.{conversation_id}"))
                )
            for table in (t.artifact_versions, t.artifacts, t.approvals, t.messages):
                await conn.execute(table.delete().where(table.c.conversation_id == conversation_id))
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
        new_conversation: ConversationRow | None = None,
        activate: str | None = None,
    ) -> MessageRow:
        """Store a message. In the same transaction, `new_conversation`: its conversation's
        row, inserted first (not stored yet); `activate`: make the message the conversation's
        active one, and give the conversation this title unless it has one
        (`touch_conversation`)."""
        now = time.time()
        message_id = message_id or uuid.uuid4().hex
        record = MessageRow(
            id=message_id, conversation_id=conversation_id, parent_id=parent_id,
            thread_id=thread_id or f"thread-{message_id}", content=content,
            # what the run fills in
            status=status, response=None, outcome=None, error=None, waiting_for=None,
            metrics=None, run_token=run_token, lease_expires_at=lease_expires_at,
            checkpoints_deleted=False, created_at=now, updated_at=now,
            cancel_requested_at=None, decisions=None,
        )
        writer = sqlite_writer_for(self)
        if writer is not None:  # SQLite: one hop to the store's writer, fixed SQL
            try:
                await writer.transact(add_message_job(self.engine.dialect, record, new_conversation, activate))
                return record
            except sqlite3.Error:  # rolled back: SQLAlchemy's path tries again, its errors as ever
                pass
        statements: list[sa.Executable] = [t.messages.insert().values(**record)]
        if new_conversation is not None:
            statements.insert(0, t.conversations.insert().values(**new_conversation))
        if activate is not None:
            statements.append(
                touch_statement(conversation_id, active_message_id=message_id, title=activate)
            )
        await self.write(*statements)
        return record

    async def get_message(self, message_id: str) -> MessageRow | None:
        rows = await self.fetch_rows(sa.select(t.messages).where(t.messages.c.id == message_id))
        return _message(rows[0]) if rows else None

    async def list_messages(self, conversation_id: str) -> list[MessageRow]:
        query = (
            sa.select(t.messages)
            .where(t.messages.c.conversation_id == conversation_id)
            .order_by(t.messages.c.created_at, t.messages.c.id)
        )
        return [_message(r) for r in await self.fetch_rows(query)]

    async def messages_with_status(self, statuses: Iterable[str]) -> list[MessageRow]:
        query = (
            sa.select(t.messages)
            .where(t.messages.c.status.in_(list(statuses)))
            .order_by(t.messages.c.created_at)
        )
        return [_message(r) for r in await self.fetch_rows(query)]

    async def update_message(self, message_id: str, *, run_token: str | None = None, **fields: Any) -> bool:
        """Update fields; with `run_token`, only while that run still owns the message."""
        query = t.messages.update().where(t.messages.c.id == message_id)
        if run_token is not None:
            query = query.where(t.messages.c.run_token == run_token)
        return await self.write(query.values(**message_values(fields))) == 1
