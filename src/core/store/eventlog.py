"""A message's event log and its status changes, written so racing writers stay correct.

Three rules, the same on SQLite and PostgreSQL:

- **A status change is a compare-and-set.** `change_status` updates the message only while it
  still has the expected status (and run token, and lease when asked): one conditional UPDATE
  whose row count says who won. The event that records the change is inserted in the *same*
  transaction, so nobody ever sees the status without its event or the reverse.
- **Event ids cannot collide.** The UPDATE takes the message row's write lock (PostgreSQL row
  lock; SQLite's single writer lock), and only then is the next id read (`max + 1`): writers
  of one message are serialised. A writer that does not take the lock can still race; its
  unique-key conflict rolls the whole change back and it is retried with a fresh id.
- **A stale owner writes nothing.** `append_events(..., run_token=...)` first locks the row
  while checking that the run still owns the message; if another process took it over (a
  recovery after the lease expired, a cancel), nothing is inserted and `LeaseLostError` says
  so. A status change that ends or takes over a run must therefore replace the run token.

On PostgreSQL a run's event batches (and rows written with them, `group_commit.py`) are one
statement (`append_together`): the row locks, the ownership check and every insert, atomic
without a BEGIN/COMMIT around it, in one round trip.
"""

from __future__ import annotations

import enum
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
import sqlalchemy.exc
from sqlalchemy.ext.asyncio import AsyncConnection

from ...errors import LeaseLostError
from ...events.status import FINAL_STATUSES
from . import schema as t
from .codec import dumps, event_record, event_row
from .pg_unnest import Rows, unnest_for
from .rows import EventRow
from .sqlite_writer import sqlite_writer_for
from .unit_of_work import UnitOfWork
from .writer_statements import plain_values, status_change_job

# A conflict on the event id can only come from a writer that skipped the row lock (an older
# version writing explicit ids); each retry sees its latest insert, but such a writer may keep
# inserting, so allow as many retries as a burst of its writes can take.
EVENT_ID_RETRIES = 50


class Unset(enum.Enum):
    """Sentinels: `ANY` token (do not check it), `KEEP` (leave the column as it is)."""

    ANY = "any"
    KEEP = "keep"


ANY: Literal[Unset.ANY] = Unset.ANY
KEEP: Literal[Unset.KEEP] = Unset.KEEP

JSON_FIELDS = ("waiting_for", "metrics", "decisions")

# A run's end is committed durably (`UnitOfWork.transaction(durable=True)`): a database crash
# must not bring back a finished message as `running`. So is a claim that stores accepted
# decisions (`resume.resume_start`): an approval once answered is never asked again.
DURABLE_STATUSES = frozenset(status.value for status in FINAL_STATUSES)


@dataclass(frozen=True)
class StatusChange:
    """What `change_status` did. `won` False: someone else changed the message first (or it
    does not exist); `status` is then the status found, so the loser can say why."""

    won: bool
    status: str | None
    event: EventRow | None = None  # the stored event, with its allocated `event_id`

    def __bool__(self) -> bool:
        return self.won


def message_values(fields: Mapping[str, Any]) -> dict[str, object]:
    """Column values for an UPDATE of `af_messages` (JSON fields encoded, `updated_at` set)."""
    values = dict(fields)
    for key in JSON_FIELDS:
        if key in values and values[key] is not None:
            values[key] = dumps(values[key])
    values["updated_at"] = time.time()
    return values



def _token_is(token: str | None) -> sa.ColumnElement[bool]:
    column = t.messages.c.run_token
    return column.is_(None) if token is None else column == token


class EventLog(UnitOfWork):
    """Mixed into `AppStore`: the event log and compare-and-set status changes."""

    # --- status changes --------------------------------------------------------------------

    async def change_status(
        self,
        message_id: str,
        *,
        expected_status: str | Iterable[str],
        status: str,
        expected_run_token: str | None | Literal[Unset.ANY] = ANY,
        run_token: str | None | Literal[Unset.KEEP] = KEEP,
        lease_expires_at: float | None | Literal[Unset.KEEP] = KEEP,
        stale_before: float | None = None,
        event: Mapping[str, Any] | None = None,
        unless_cancel_requested: bool = False,
        **fields: Any,
    ) -> StatusChange:
        """Move a message from `expected_status` to `status`, appending `event` atomically.

        Conditions (all must hold, or nothing is written): the status is `expected_status` (one
        or several), the run token is `expected_run_token` (unless `ANY`), and with
        `stale_before` the lease has expired before that time, and with
        `unless_cancel_requested` no cancel was accepted (`request_cancel`). `run_token`,
        `lease_expires_at` and other message columns (`response`, `error`, `waiting_for`, …)
        are set on success. `event` is `{"type", "agent"?, "data"?, "timestamp"?}`; its
        `event_id` is allocated here, after the row lock, and returned in `.event`.
        """
        expected = [expected_status] if isinstance(expected_status, str) else list(expected_status)
        values = message_values({**fields, "status": status})
        if run_token is not KEEP:
            values["run_token"] = run_token
        if lease_expires_at is not KEEP:
            values["lease_expires_at"] = lease_expires_at
        query = t.messages.update().where(
            t.messages.c.id == message_id, t.messages.c.status.in_(expected)
        )
        if expected_run_token is not ANY:
            query = query.where(_token_is(expected_run_token))
        if unless_cancel_requested:
            query = query.where(t.messages.c.cancel_requested_at.is_(None))
        if stale_before is not None:
            query = query.where(
                sa.or_(
                    t.messages.c.lease_expires_at.is_(None),
                    t.messages.c.lease_expires_at < stale_before,
                )
            )
        # Durable: a run's end, and a claim carrying accepted decisions (a person's answer
        # must not be asked again after a database crash).
        durable = status in DURABLE_STATUSES or fields.get("decisions") is not None
        writer = sqlite_writer_for(self)
        if writer is not None and plain_values(values):  # SQLite: one hop, fixed SQL
            token: tuple[str, str | None] = (
                ("any", None) if expected_run_token is ANY
                else ("null", None) if expected_run_token is None
                else ("equal", expected_run_token)
            )
            job = status_change_job(
                self.engine.dialect, message_id, expected=expected, values=values, token=token,
                guard_cancel=unless_cancel_requested, stale_before=stale_before, event=event,
            )
            try:
                won, found, stored = await writer.transact(job, durable=durable)
            except sqlite3.Error:  # rolled back: SQLAlchemy's path tries again, its errors as ever
                pass
            else:
                return StatusChange(won, found, stored)
        for attempt in range(EVENT_ID_RETRIES):
            try:
                async with self.transaction(durable=durable) as conn:
                    result = await conn.execute(query.values(**values))
                    if result.rowcount != 1:
                        found = (
                            await conn.execute(
                                sa.select(t.messages.c.status).where(t.messages.c.id == message_id)
                            )
                        ).scalar_one_or_none()
                        return StatusChange(False, found)
                    stored = None
                    if event is not None:
                        stored = await self._insert_next(conn, message_id, event)
                    return StatusChange(True, status, stored)
            except sqlalchemy.exc.IntegrityError:
                if event is None or attempt == EVENT_ID_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def claim_message(
        self,
        message_id: str,
        *,
        expected_status: str,
        run_token: str,
        lease_expires_at: float,
        expected_run_token: str | None | Literal[Unset.ANY] = ANY,
        stale_before: float | None = None,
    ) -> bool:
        """Atomically move a message to `running` under a new run token. One caller wins."""
        change = await self.change_status(
            message_id,
            expected_status=expected_status,
            status="running",
            expected_run_token=expected_run_token,
            run_token=run_token,
            lease_expires_at=lease_expires_at,
            stale_before=stale_before,
        )
        return change.won

    async def request_cancel(self, message_id: str, *, now: float) -> StatusChange:
        """Record that a cancel was accepted for a `running` message (its owner, wherever it
        is, must stop: `core/run/cancel.py`). Lost when the message is not running any more."""
        column = t.messages.c.cancel_requested_at
        query = (
            t.messages.update()
            .where(t.messages.c.id == message_id, t.messages.c.status == "running")
            .values(cancel_requested_at=sa.func.coalesce(column, now), updated_at=time.time())
        )
        async with self.transaction() as conn:
            if (await conn.execute(query)).rowcount == 1:
                return StatusChange(True, "running")
            found = await conn.execute(
                sa.select(t.messages.c.status).where(t.messages.c.id == message_id)
            )
            return StatusChange(False, found.scalar_one_or_none())

    async def renew_lease(self, message_id: str, run_token: str, expires_at: float) -> bool | None:
        """Extend the lease of the run `run_token` and say whether a cancel was accepted for
        the message (`request_cancel`), in one statement; None when that run no longer owns
        the message (nothing was written)."""
        query = (
            t.messages.update()
            .where(t.messages.c.id == message_id, t.messages.c.run_token == run_token)
            .values(**message_values({"lease_expires_at": expires_at}))
            .returning(t.messages.c.cancel_requested_at)
        )
        # as `write` does: one statement on PostgreSQL needs no BEGIN/COMMIT around it
        async with self.transaction() if self.is_sqlite else self.reads.begin() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else row[0] is not None

    async def cancel_requested(self, message_id: str) -> bool:
        """Whether a cancel was accepted for the message (`request_cancel`). A run asks at its
        step boundaries (`cancel_poll.py`): on SQLite one hop to the store's writer thread with
        fixed SQL, not a pooled connection, a greenlet and a thread hop per statement."""
        writer = sqlite_writer_for(self)
        if writer is not None:
            return await writer.cancel_requested(message_id)
        query = sa.select(t.messages.c.cancel_requested_at).where(t.messages.c.id == message_id)
        return await self.fetch_value(query) is not None

    async def holds_run(self, message_id: str, run_token: str) -> bool:
        """Whether `run_token` still owns the message (a cheap check before a side effect;
        on SQLite one hop to the store's writer thread)."""
        writer = sqlite_writer_for(self)
        if writer is not None:
            return await writer.holds_run(message_id, run_token)
        query = sa.select(t.messages.c.id).where(
            t.messages.c.id == message_id, t.messages.c.run_token == run_token
        )
        return await self.fetch_value(query) is not None

    # --- events ----------------------------------------------------------------------------

    async def append_event(
        self, message_id: str, event: Mapping[str, Any], *, run_token: str | None = None
    ) -> None:
        await self.append_events(message_id, [event], run_token=run_token)

    async def append_events(
        self, message_id: str, events: Iterable[Mapping[str, Any]], *, run_token: str | None = None
    ) -> None:
        """Append events with the ids they carry, in one transaction (all or none).

        With `run_token` (a run writing its own log) the message row is locked first and the
        events are written only while that token still owns the message; otherwise nothing is
        written and `LeaseLostError` is raised.
        """
        rows = [event_row(message_id, e) for e in events]
        if not self.is_sqlite:
            lost = await self.append_together([(message_id, run_token, rows)])
            if lost:
                raise LeaseLostError(
                    f"message {message_id} is no longer owned by this run (another process "
                    "took it over or it was cancelled); its events were not written",
                    message_id=message_id,
                )
            return
        async with self.transaction() as conn:
            if run_token is not None and not await self._lock_for(conn, message_id, run_token):
                raise LeaseLostError(
                    f"message {message_id} is no longer owned by this run (another process "
                    "took it over or it was cancelled); its events were not written",
                    message_id=message_id,
                )
            await conn.execute(t.events.insert(), rows)

    async def append_together(
        self,
        batches: Sequence[tuple[str, str | None, Rows]],
        inserts: Sequence[tuple[sa.Table, Rows]] = (),
    ) -> set[tuple[str, str]]:
        """PostgreSQL: write event rows of several messages (each batch: message id, run token
        or None, `af_events` rows) and `inserts` (rows of other tables) in one statement, all or
        none; the (message id, token) pairs whose batch was left out because the message is
        gone or owned by another token.

        The statement locks the rows of the token-checked messages in id order (`FOR NO KEY
        UPDATE`: the lock the no-op UPDATE of `_lock_for` takes, without a new row version;
        in id order so two workers cannot deadlock), keeps the events of the messages still
        owned by their batch's token and inserts them and `inserts` from arrays (`unnest`). A
        single statement commits on its own, so no BEGIN/COMMIT: one round trip in all.
        """
        assert not self.is_sqlite
        owned = sorted({(m, tok) for m, tok, _ in batches if tok is not None})
        events = unnest_for(t.events, self.engine.dialect)
        assert events is not None
        fence = "SELECT id, run_token FROM af_messages WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE"
        kept = (
            "WHERE u.run_token IS NULL OR EXISTS "
            "(SELECT 1 FROM fence f WHERE f.id = u.message_id AND f.run_token = u.run_token)"
        )
        parts = [f"fence AS ({fence})", f"e AS ({events.sql(2, extra=['run_token'], where=kept)})"]
        rows = [{**row, "run_token": tok} for _, tok, batch in batches for row in batch]
        parameters: list[Any] = [
            [m for m, _ in owned],
            *events.parameters(rows, extra=["run_token"]),
        ]
        by_table: dict[sa.Table, list[Mapping[str, Any]]] = {}
        for table, table_rows in inserts:
            by_table.setdefault(table, []).extend(table_rows)
        for i, (table, table_rows) in enumerate(by_table.items()):
            unnest = unnest_for(table, self.engine.dialect)
            if unnest is None:
                raise TypeError(f"{table.name} has a column with no PostgreSQL array type")
            parts.append(f"i{i} AS ({unnest.sql(len(parameters) + 1)})")
            parameters += unnest.parameters(table_rows)
        sql = f"WITH {', '.join(parts)} SELECT id, run_token FROM fence"
        async with self.reads.begin() as conn:  # autocommit: see `write`
            found = await conn.exec_driver_sql(sql, tuple(parameters))
            tokens: dict[str, str | None] = {
                row["id"]: row["run_token"] for row in found.mappings()
            }
        return {(m, tok) for m, tok in owned if tokens.get(m) != tok}

    async def append_next_event(
        self, message_id: str, event: Mapping[str, Any], *, run_token: str | None = None
    ) -> EventRow:
        """Append one event under the next free id (allocated after the row lock); return it.

        For writers outside a run (an operator's note, a recovery record). With `run_token`,
        only while that token owns the message (`LeaseLostError` otherwise).
        """
        for attempt in range(EVENT_ID_RETRIES):
            try:
                async with self.transaction() as conn:
                    locked = await self._lock_for(
                        conn, message_id, run_token, any_token=run_token is None
                    )
                    if not locked:
                        raise LeaseLostError(
                            f"message {message_id} is not owned by this run (or does not exist); "
                            "the event was not written",
                            message_id=message_id,
                        )
                    return await self._insert_next(conn, message_id, event)
            except sqlalchemy.exc.IntegrityError:
                if attempt == EVENT_ID_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def events(self, message_id: str, after_event_id: int | None = None) -> list[EventRow]:
        query = sa.select(t.events).where(t.events.c.message_id == message_id)
        if after_event_id is not None:
            query = query.where(t.events.c.event_id > after_event_id)
        return [
            event_record(row) for row in await self.fetch_rows(query.order_by(t.events.c.event_id))
        ]

    async def last_event_id(self, message_id: str) -> int:
        async with self.reads.connect() as conn:
            return await self._max_event_id(conn, message_id)

    # --- inside a transaction --------------------------------------------------------------

    @staticmethod
    async def _lock_for(
        conn: AsyncConnection, message_id: str, run_token: str | None, *, any_token: bool = False
    ) -> bool:
        """Take the message row's write lock (a no-op UPDATE); False if the row is not there
        or (unless `any_token`) is not owned by `run_token`."""
        query = t.messages.update().where(t.messages.c.id == message_id)
        if not any_token:
            query = query.where(_token_is(run_token))
        result = await conn.execute(query.values(run_token=t.messages.c.run_token))
        return result.rowcount == 1

    async def _lock_owned(
        self, conn: AsyncConnection, owned: Iterable[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """SQLite: lock the rows of several messages, each for its run token, in message-id
        order; the (message id, token) pairs whose message is gone or owned by another token.
        (PostgreSQL does this inside `append_together`'s one statement.)"""
        assert self.is_sqlite
        pairs = sorted(set(owned))
        return {(m, tok) for m, tok in pairs if not await self._lock_for(conn, m, tok)}

    @staticmethod
    async def _max_event_id(conn: AsyncConnection, message_id: str) -> int:
        value = (
            await conn.execute(
                sa.select(sa.func.max(t.events.c.event_id)).where(
                    t.events.c.message_id == message_id
                )
            )
        ).scalar_one()
        return int(value or 0)

    async def _insert_next(
        self, conn: AsyncConnection, message_id: str, event: Mapping[str, Any]
    ) -> EventRow:
        record = EventRow(
            message_id=message_id,
            event_id=await self._max_event_id(conn, message_id) + 1,
            type=event["type"],
            agent=event.get("agent"),
            timestamp=event.get("timestamp") or time.time(),
            data=dict(event.get("data") or {}),
        )
        await conn.execute(t.events.insert().values(**event_row(message_id, record)))
        return record
