"""`threads.copy`: a new thread with the same values, metadata and history up to the head.

A thread is a conversation (a message tree plus each message's event log), so a copy is the
path root → head rewritten under new ids: each message with a new id and LangGraph thread id,
its parent mapped, its events copied with it; the conversation's artifacts and their versions
come along (an artifact version's message is mapped too). Only finished messages are copied: a
head that is still running or paused is left out (its pause lives in checkpoints a copy cannot
share), so the copy's head is the last finished message on the path. One transaction: a copy is
whole or absent.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..core.store.schema import artifact_versions, artifacts, conversations, events, messages

if TYPE_CHECKING:
    from ..core.store.repository import AppStore

FINISHED = ("completed", "failed", "cancelled")


async def copy_thread(store: AppStore, thread_id: str, user_id: str | None) -> str:
    """Copy conversation `thread_id` (already checked to be the caller's); the new id."""
    source = (await store.fetch_rows(sa.select(conversations).where(conversations.c.id == thread_id)))[0]
    rows = await store.fetch_rows(sa.select(messages).where(messages.c.conversation_id == thread_id))
    by_id = {r["id"]: dict(r) for r in rows}
    path: list[dict[str, Any]] = []
    at = source["active_message_id"]
    while at is not None and at in by_id:
        path.append(by_id[at])
        at = by_id[at]["parent_id"]
    path.reverse()
    while path and path[-1]["status"] not in FINISHED:
        path.pop()
    new_id, now = uuid.uuid4().hex, time.time()
    ids = {m["id"]: uuid.uuid4().hex for m in path}
    statements: list[sa.Executable] = [
        conversations.insert().values(
            {**dict(source), "id": new_id, "user_id": user_id, "created_at": now, "updated_at": now,
             "active_message_id": ids[path[-1]["id"]] if path else None}
        )
    ]
    for message in path:
        statements.append(
            messages.insert().values(
                {**message, "id": ids[message["id"]], "conversation_id": new_id,
                 "thread_id": uuid.uuid4().hex, "parent_id": ids.get(message["parent_id"] or ""),
                 "run_token": None, "lease_expires_at": None, "checkpoints_deleted": True}
            )
        )
        for event in await store.fetch_rows(sa.select(events).where(events.c.message_id == message["id"])):
            statements.append(events.insert().values({**dict(event), "message_id": ids[message["id"]]}))
    for table in (artifacts, artifact_versions):
        for row in await store.fetch_rows(sa.select(table).where(table.c.conversation_id == thread_id)):
            values = {**dict(row), "conversation_id": new_id}
            if "message_id" in values and values["message_id"] is not None:
                values["message_id"] = ids.get(values["message_id"], values["message_id"])
            statements.append(table.insert().values(values))
    await store.write(*statements)
    return new_id
