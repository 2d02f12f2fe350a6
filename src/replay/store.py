"""Reading and writing the recorded model calls (table `af_model_calls`), both backends.

The table is additive (created by `AppStore.migrate` like every table) and its rows go with
their message (foreign key, ON DELETE CASCADE), so deleting a conversation deletes them. The
payload is zlib-compressed JSON: tool results and prompts are text that shrinks 3-5x.
This module also reads the few other rows an export needs straight from the shared schema
(approvals and history summaries), so the repository keeps its size.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import orjson
import sqlalchemy as sa

from ..core.store import schema as t
from ..core.store.codec import event_record
from ..core.store.group_commit import group_commit_for
from ..core.window.history_store import HistorySummaryRow
from . import result_refs
from .records import ModelCallRow

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from ..core.store.repository import AppStore
    from ..core.store.rows import EventRow

CALL, CONFIG = "call", "config"


def pack(data: Any) -> bytes:
    """`data` as zlib-compressed JSON (orjson; the standard encoder for what it refuses)."""
    try:
        text = orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        text = json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
    return zlib.compress(text, 1)


def unpack(raw: bytes) -> Any:
    return json.loads(zlib.decompress(raw).decode("utf-8"))


async def next_seq(store: AppStore, message_id: str) -> int:
    """The next free row number of a message (rows of earlier process segments come first)."""
    table = t.model_calls
    value = await store.fetch_value(
        sa.select(sa.func.max(table.c.seq)).where(table.c.message_id == message_id)
    )
    return int(value or 0) + 1


async def put(
    store: AppStore, message_id: str, seq: int, kind: str, agent: str | None, data: Any
) -> int:
    """Store one row (in the transaction of whatever events are written at the same moment,
    see `core/store/group_commit.py`); returns the size of its payload in bytes."""
    blob = pack(data)
    row = {"message_id": message_id, "seq": seq, "kind": kind, "agent": agent,
           "created_at": time.time(), "data_z": blob}
    await group_commit_for(store).insert(t.model_calls, [row])
    return len(blob)


def put_soon(
    store: AppStore, message_id: str, seq: int, kind: str, agent: str | None, data: Any
) -> tuple[int, asyncio.Future[None]]:
    """`put` without waiting for the commit: the row joins the transaction of the events the
    run emits next (`GroupCommit.insert_soon`). Returns its payload's size and the future of
    its commit."""
    blob = pack(data)
    row = {"message_id": message_id, "seq": seq, "kind": kind, "agent": agent,
           "created_at": time.time(), "data_z": blob}
    return len(blob), group_commit_for(store).insert_soon(t.model_calls, [row])


async def rows(
    store: AppStore, message_id: str, events: Sequence[EventRow] | None = None
) -> list[ModelCallRow]:
    """Every row of a message in `seq` order, payloads unpacked into `data`, with the tool
    results they refer to put back (`result_refs.py`): each request reads as it was sent.
    `events`: the message's event log when the caller has read it already."""
    table = t.model_calls
    query = sa.select(table).where(table.c.message_id == message_id).order_by(table.c.seq)
    async with store.engine.connect() as conn:
        found = (await conn.execute(query)).mappings().all()
        out: list[ModelCallRow] = []
        for row in found:
            record = dict(row)
            record["data"] = unpack(record.pop("data_z"))
            out.append(cast(ModelCallRow, record))
        payloads = [r["data"] for r in out if r["kind"] == CALL]
        ids = result_refs.wanted(payloads)
        if ids:
            by_id = (
                {e["event_id"]: e for e in events if e["event_id"] in ids}
                if events is not None
                else await _events(conn, message_id, ids)
            )
            for data in payloads:
                result_refs.expand(data, by_id)
    return out


async def _events(conn: AsyncConnection, message_id: str, ids: set[int]) -> dict[int, EventRow]:
    """Stored events of a message by id (in chunks: a long run refers to many)."""
    table = t.events
    out: dict[int, EventRow] = {}
    ordered = sorted(ids)
    for start in range(0, len(ordered), 500):
        query = sa.select(table).where(
            table.c.message_id == message_id, table.c.event_id.in_(ordered[start : start + 500])
        )
        for row in (await conn.execute(query)).mappings():
            record = event_record(row)
            out[record["event_id"]] = record
    return out


async def stored_bytes(store: AppStore, message_id: str | None = None) -> int:
    """Bytes of compressed payload stored (for one message, or all): for benchmarks."""
    table = t.model_calls
    query = sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(table.c.data_z)), 0))
    if message_id is not None:
        query = query.where(table.c.message_id == message_id)
    async with store.engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def approvals_before(store: AppStore, conversation_id: str, before: float) -> list[str]:
    """Tools the conversation had always-allowed before `before` (a run's start)."""
    table = t.approvals
    query = sa.select(table.c.tool_name).where(
        table.c.conversation_id == conversation_id, table.c.created_at < before
    )
    async with store.engine.connect() as conn:
        return sorted(r[0] for r in (await conn.execute(query)).all())


async def history_summaries(store: AppStore, message_ids: Sequence[str]) -> list[HistorySummaryRow]:
    """Stored history summaries of messages on a path (see core/window/history_store.py)."""
    if not message_ids:
        return []
    table = t.history_summaries
    query = sa.select(table).where(table.c.message_id.in_(list(message_ids)))
    async with store.engine.connect() as conn:
        return [cast(HistorySummaryRow, dict(r)) for r in (await conn.execute(query)).mappings()]


async def put_history_summary(store: AppStore, row: Mapping[str, Any]) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(t.history_summaries.insert().values(**row))
