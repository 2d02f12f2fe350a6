"""What a run records so that a crash and resume does nothing twice.

A run can be interrupted anywhere and resumed by another process, which re-runs the graph
node it stopped in. Two tables make the side effects inside such a node exactly-once:

- the tool-execution ledger: a call is marked `started` before it runs and `finished` with its
  result after, so a resume reuses the result (or knows the call was cut off) instead of
  calling the tool again;
- hook marks (src/hooks/dedupe.py): the output of a hook point that fired, stored once.

Both only matter while a message may still resume; the rows of finished messages are cleared.
(Claiming a message and its lease are status changes: see eventlog.py.)
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from typing import Literal

import sqlalchemy as sa
import sqlalchemy.exc

from ...events.status import FINAL_STATUSES
from ...shapes import JsonValue
from . import schema as t
from .codec import dumps, loads
from .conversation_records import touch_statement
from .eventlog import message_values
from .rows import LedgerRow
from .sqlite_writer import sqlite_writer_for
from .unit_of_work import UnitOfWork
from .writer_statements import clear_run_records_job


class _CancelFirst(Exception):
    """Rolls back a ledger start that a cancel preceded."""


def _finished_messages() -> sa.Select[str]:
    """The ids of messages that can no longer resume."""
    return sa.select(t.messages.c.id).where(t.messages.c.status.in_([status.value for status in FINAL_STATUSES]))


class RunRecords(UnitOfWork):
    """Mixed into `AppStore`: the `af_tool_executions` and `af_hook_marks` tables."""

    # --- tool-execution ledger -------------------------------------------------------------

    async def ledger_get(self, message_id: str, tool_call_id: str) -> LedgerRow | None:
        query = sa.select(t.tool_executions).where(
            t.tool_executions.c.message_id == message_id,
            t.tool_executions.c.tool_call_id == tool_call_id,
        )
        rows = await self.fetch_rows(query)
        if not rows:
            return None
        row = rows[0]
        return LedgerRow(
            message_id=row["message_id"],
            tool_call_id=row["tool_call_id"],
            status=row["status"],
            result=loads(row["result"]),
            updated_at=row["updated_at"],
        )

    async def ledger_start(self, message_id: str, tool_call_id: str) -> bool:
        """Record that a call is about to run. False if it was already started. Committed
        durably (`transaction(durable=True)`): a lost "started" record would let a side
        effect run again after a database crash."""
        return await self.insert_once(
            t.tool_executions.insert().values(
                message_id=message_id,
                tool_call_id=tool_call_id,
                status="started",
                result=None,
                updated_at=time.time(),
            ),
            durable=True,
        )

    async def ledger_begin(self, message_id: str, tool_call_id: str) -> Literal["started", "exists", "cancelled"]:
        """Record that an approved call is about to run, unless a cancel was accepted first.

        "started": go ahead; "exists": it was started before (a crash cut it off); "cancelled":
        a cancel was accepted (`messages.cancel_requested_at`), nothing was written and the call
        must not run. The insert comes first, so the message row is read under the writer's
        lock (SQLite) or locked (PostgreSQL): a cancel lands either before (seen here) or after
        this call started, never in between. Committed durably (`transaction(durable=True)`):
        a lost "started" record would let a side effect run again after a database crash.
        """
        insert = t.tool_executions.insert().values(
            message_id=message_id, tool_call_id=tool_call_id, status="started", result=None,
            updated_at=time.time(),
        )
        flag = sa.select(t.messages.c.cancel_requested_at).where(t.messages.c.id == message_id)
        if not self.is_sqlite:
            flag = flag.with_for_update()
        try:
            async with self.transaction(durable=True) as conn:
                await conn.execute(insert)
                if (await conn.execute(flag)).scalar_one_or_none() is not None:
                    raise _CancelFirst
        except sqlalchemy.exc.IntegrityError:
            return "exists"
        except _CancelFirst:
            return "cancelled"
        return "started"

    async def ledger_finish(self, message_id: str, tool_call_id: str, result: Mapping[str, JsonValue]) -> None:
        await self.write(
            t.tool_executions.update()
            .where(
                t.tool_executions.c.message_id == message_id,
                t.tool_executions.c.tool_call_id == tool_call_id,
            )
            .values(status="finished", result=dumps(result), updated_at=time.time())
        )

    async def ledger_clear(self, message_id: str) -> None:
        await self.write(t.tool_executions.delete().where(t.tool_executions.c.message_id == message_id))

    async def run_records_clear(
        self, message_id: str, *, touch: str | None = None, checkpoints_deleted: bool = False
    ) -> None:
        """A message finished: drop its tool ledger and hook marks, in one transaction;
        `touch`: its conversation's id, to `touch_conversation` in the same transaction;
        `checkpoints_deleted`: mark the message's checkpoints gone in it too. On SQLite one
        hop to the store's writer with fixed SQL (`writer_statements.py`)."""
        writer = sqlite_writer_for(self)
        if writer is not None:
            try:
                await writer.transact(clear_run_records_job(message_id, touch, checkpoints_deleted))
                return
            except sqlite3.Error:  # rolled back: SQLAlchemy's path tries again, its errors as ever
                pass
        marked = t.messages.update().where(t.messages.c.id == message_id)
        await self.write(
            *([] if touch is None else [touch_statement(touch)]),
            t.tool_executions.delete().where(t.tool_executions.c.message_id == message_id),
            t.hook_marks.delete().where(t.hook_marks.c.message_id == message_id),
            *([marked.values(**message_values({"checkpoints_deleted": True}))] if checkpoints_deleted else []),
        )

    async def ledger_clear_finished(self) -> None:
        """Drop ledger rows of messages that can no longer resume."""
        await self.write(
            t.tool_executions.delete().where(t.tool_executions.c.message_id.in_(_finished_messages()))
        )

    # --- hook marks ------------------------------------------------------------------------

    async def hook_mark_get(self, message_id: str, key: str) -> str | None:
        return await self.fetch_value(
            sa.select(t.hook_marks.c.value).where(
                t.hook_marks.c.message_id == message_id, t.hook_marks.c.key == key
            )
        )

    async def hook_mark_put(self, message_id: str, key: str, value: str) -> bool:
        """Store a mark once; False when the key was already marked (the first one stays)."""
        return await self.insert_once(
            t.hook_marks.insert().values(
                message_id=message_id, key=key, value=value, created_at=time.time()
            )
        )

    async def hook_marks_clear(self, message_id: str | None = None) -> None:
        """Drop one message's marks, or (no id) those of messages that can no longer resume."""
        if message_id is not None:
            where = t.hook_marks.c.message_id == message_id
        else:
            where = t.hook_marks.c.message_id.in_(_finished_messages())
        await self.write(t.hook_marks.delete().where(where))
