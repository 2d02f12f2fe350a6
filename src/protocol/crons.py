"""Crons: an assistant run on a schedule, on its own thread (`create_for_thread`) or on a new
thread per run (threadless).

- Schedules are standard 5-field cron expressions read by `croniter`, in UTC or a named IANA
  zone (`timezone`); `end_time` stops them (no run is due after it).
- Exactly once across workers and kills: every worker's scheduler looks for crons whose
  `next_run_at` has come, and moves it on with a compare-and-set (`UPDATE ... WHERE next_run_at
  = <the value read>`). The same transaction stores the tick's run as a queued (`pending`) row
  whose id is derived from (cron, scheduled time) with uuid5 (and, for a threadless cron, its
  new thread, id derived alike): a tick is claimed and recorded at once, or neither. The run is
  then started like any queued run (`Protocol.dispatch`: a compare-and-set on the row), so a
  worker killed between the claim and the start leaves a `pending` row that the next tick of
  any worker (the restarted one, or another) starts; a second claim of the same tick is refused
  by the row's key. What a kill after the start leaves is the engine's (leases, recovery).
- The next due time is the first one after *now*, not after the tick that was due: after a
  downtime the missed ticks are one late run, not one per missed minute.
- A run made by a cron says so: `metadata.cron_id` and `metadata.cron_scheduled_at`.
- The clock is a parameter (`CronScheduler(clock=...)`), so tests move time instead of
  waiting for it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import sqlalchemy as sa
import sqlalchemy.exc
from croniter import croniter

from ..core.store.conversation_records import new_conversation
from ..core.store.schema import ap_runs, ap_threads, conversations
from ..core.store.schema import crons as table
from ..errors import NotFoundError, UserError
from . import assistants_store
from .service import Protocol
from .views import iso
from .wire import RunCreate

log = logging.getLogger("artifactflow.crons")
TICKS = uuid.UUID("6f1c3a52-2f0e-4d55-9a8b-0c2a7d3e9b41")  # the uuid5 namespace of cron ticks


def tick_ids(cron_id: str, scheduled: float) -> tuple[str, str]:
    """The run id and the new-thread id of the tick of `cron_id` due at `scheduled`: the same
    on every worker and after any restart, so a tick has one run whoever starts it."""
    tick = f"{cron_id}@{scheduled!r}"
    return str(uuid.uuid5(TICKS, tick)), uuid.uuid5(TICKS, tick + "/thread").hex


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise UserError(f"timezone {name!r} is not an IANA time zone (e.g. 'Europe/Paris', 'UTC')") from None


def check_schedule(schedule: str) -> str:
    """A standard 5-field cron expression (minute hour day month weekday)."""
    fields = schedule.split()
    if len(fields) != 5 or not croniter.is_valid(schedule):
        raise UserError(
            f"schedule {schedule!r} is not a 5-field cron expression "
            "(minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5')"
        )
    return " ".join(fields)


def next_after(schedule: str, timezone: str | None, now: float) -> float:
    """The first time `schedule` is due strictly after `now` (seconds since the epoch)."""
    start = datetime.fromtimestamp(now, zone(timezone))
    return float(croniter(schedule, start).get_next(float))


def _decoded(row: Any) -> dict[str, Any]:
    out = dict(row)
    out["payload"] = json.loads(out["payload"])
    out["metadata"] = json.loads(out["metadata"])
    return out


def cron_view(row: dict[str, Any]) -> dict[str, Any]:
    payload = dict(row["payload"])
    return {
        "cron_id": row["cron_id"],
        "assistant_id": row["assistant_id"],
        "thread_id": row["thread_id"],
        "on_run_completed": payload.pop("on_run_completed", None),
        "end_time": iso(row["end_time"]),
        "schedule": row["schedule"],
        "timezone": row["timezone"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "payload": payload,
        "user_id": row["user_id"],
        "next_run_date": iso(row["next_run_at"]),
        "metadata": row["metadata"],
        "enabled": row["enabled"],
    }


class Crons:
    """The cron rows, over the app store."""

    def __init__(self, protocol: Protocol, clock: Callable[[], float] = time.time) -> None:
        self.p, self.clock = protocol, clock
        self.store = protocol.client.admin.store

    def _next(self, schedule: str, timezone: str, end_time: float | None, now: float) -> float | None:
        due = next_after(schedule, timezone, now)
        return None if end_time is not None and due > end_time else due

    async def create(
        self,
        *,
        assistant_id: str,
        thread_id: str | None,
        user_id: str | None,
        schedule: str,
        timezone: str | None,
        end_time: float | None,
        enabled: bool,
        payload: dict[str, Any],
        metadata: dict[str, Any],
    ) -> dict[str, Any]:
        schedule = check_schedule(schedule)
        timezone = zone(timezone).key
        now = self.clock()
        cron_id = str(uuid.uuid4())
        await self.store.write(
            table.insert().values(
                cron_id=cron_id,
                assistant_id=assistant_id,
                thread_id=thread_id,
                user_id=user_id,
                schedule=schedule,
                timezone=timezone,
                payload=json.dumps(payload),
                metadata=json.dumps(metadata),
                end_time=end_time,
                next_run_at=self._next(schedule, timezone, end_time, now),
                enabled=enabled,
                created_at=now,
                updated_at=now,
            )
        )
        row = await self.get(cron_id, user_id)
        return row

    async def get(self, cron_id: str, user_id: str | None) -> dict[str, Any]:
        rows = await self.store.fetch_rows(sa.select(table).where(table.c.cron_id == cron_id))
        if not rows or (user_id is not None and rows[0]["user_id"] != user_id):
            raise NotFoundError(f"cron {cron_id} not found")
        return _decoded(rows[0])

    async def search(self, user_id: str | None, **where: Any) -> list[dict[str, Any]]:
        query = sa.select(table).order_by(table.c.created_at.desc(), table.c.cron_id)
        if user_id is not None:
            query = query.where(table.c.user_id == user_id)
        for key in ("assistant_id", "thread_id", "enabled"):
            if where.get(key) is not None:
                query = query.where(table.c[key] == where[key])
        rows = [_decoded(r) for r in await self.store.fetch_rows(query)]
        meta = where.get("metadata") or {}
        return [r for r in rows if all(r["metadata"].get(k) == v for k, v in meta.items())]

    async def update(self, cron_id: str, user_id: str | None, changes: dict[str, Any]) -> dict[str, Any]:
        row = await self.get(cron_id, user_id)
        schedule = check_schedule(changes["schedule"]) if "schedule" in changes else row["schedule"]
        timezone = zone(changes["timezone"]).key if "timezone" in changes else row["timezone"]
        end_time = changes["end_time"] if "end_time" in changes else row["end_time"]
        enabled = changes["enabled"] if "enabled" in changes else row["enabled"]
        payload = {**row["payload"], **(changes.get("payload") or {})}
        metadata = {**row["metadata"], **(changes.get("metadata") or {})}
        now = self.clock()
        await self.store.write(
            table.update()
            .where(table.c.cron_id == cron_id)
            .values(
                schedule=schedule,
                timezone=timezone,
                end_time=end_time,
                enabled=enabled,
                payload=json.dumps(payload),
                metadata=json.dumps(metadata),
                next_run_at=self._next(schedule, timezone, end_time, now),
                updated_at=now,
            )
        )
        return await self.get(cron_id, user_id)

    async def delete(self, cron_id: str, user_id: str | None) -> None:
        await self.get(cron_id, user_id)
        await self.store.write(table.delete().where(table.c.cron_id == cron_id))


class CronScheduler(Crons):
    """Starts the runs of due crons; one per worker, all against the same rows."""

    def __init__(self, protocol: Protocol, clock: Callable[[], float] = time.time) -> None:
        super().__init__(protocol, clock)
        self.cleanups: set[asyncio.Task[None]] = set()  # threads to delete after their run

    async def tick(self) -> list[dict[str, Any]]:
        """Start every cron run due now that this worker wins, and every tick claimed but not
        started (its claimer was killed); the protocol runs it started."""
        now = self.clock()
        due = await self.store.fetch_rows(
            sa.select(table).where(
                table.c.enabled.is_(True),
                table.c.next_run_at.is_not(None),
                table.c.next_run_at <= now,
            )
        )
        started = []
        for row in due:
            run = await self._fire(_decoded(row), now)
            if run is not None:
                started.append(run)
        await self.start_claimed()
        return started

    async def start_claimed(self) -> None:
        """Start the cron runs still queued with nothing in their way: a tick whose claimer
        died before starting it is started here (`dispatch` decides who, once)."""
        for thread_id in await self._waiting_threads():
            try:
                await self.p.dispatch(thread_id)
            except Exception:
                log.exception("starting the claimed cron runs of thread %s", thread_id)

    async def _waiting_threads(self) -> list[str]:
        rows = await self.store.fetch_rows(
            sa.select(ap_runs.c.thread_id, ap_runs.c.metadata).where(
                ap_runs.c.status.in_(("pending", "starting"))
            )
        )
        threads = {r["thread_id"] for r in rows if '"cron_id"' in (r["metadata"] or "")}
        return sorted(threads)

    async def _fire(self, cron: dict[str, Any], now: float) -> dict[str, Any] | None:
        scheduled = cron["next_run_at"]
        body = {k: v for k, v in cron["payload"].items() if k != "on_run_completed"}
        body["assistant_id"] = cron["assistant_id"]
        body["metadata"] = {
            **(body.get("metadata") or {}),
            "cron_id": cron["cron_id"],
            "cron_scheduled_at": iso(scheduled),
        }
        if cron["thread_id"] is not None:
            body.setdefault("multitask_strategy", "enqueue")  # never refused by a busy thread
        try:
            request = RunCreate.model_validate(body)  # the typed request a client's run is
            assistant: Any = await assistants_store.find(self.p, cron["assistant_id"], user=cron["user_id"])
            if cron["thread_id"] is not None:
                await self.p.conversation(cron["thread_id"], cron["user_id"])
        except NotFoundError as exc:  # its thread or assistant is gone: stop asking
            log.warning("cron %s disabled: %s", cron["cron_id"], exc)
            await self.store.write(
                table.update().where(table.c.cron_id == cron["cron_id"]).values(enabled=False)
            )
            return None
        except Exception:
            log.exception("cron %s: its run cannot be made; tick skipped", cron["cron_id"])
            await self._advance(cron, now)
            return None
        run_id = await self.claim(cron, now, request, assistant)
        if run_id is None:
            return None  # another worker took this tick
        if cron["thread_id"] is not None:  # as a client's first run on a thread would
            await self.p.records.add_thread_defaults(
                cron["thread_id"],
                cron["user_id"],
                {"assistant_id": assistant.assistant_id, "graph_id": assistant.graph_id},
            )
        run = await self._start(run_id, request)
        if run is not None and cron["thread_id"] is None and cron["payload"].get("on_run_completed") == "delete":
            self._delete_after(run)
        return run

    def _advance_statement(self, cron: dict[str, Any], now: float) -> sa.Update:
        following = self._next(cron["schedule"], cron["timezone"], cron["end_time"], now)
        return (
            table.update()
            .where(table.c.cron_id == cron["cron_id"], table.c.next_run_at == cron["next_run_at"])
            .values(next_run_at=following, updated_at=now)
        )

    async def _advance(self, cron: dict[str, Any], now: float) -> bool:
        return await self.store.write(self._advance_statement(cron, now)) == 1

    async def claim(
        self, cron: dict[str, Any], now: float, request: RunCreate, assistant: Any
    ) -> str | None:
        """Claim the tick due and store its run, queued, in one transaction; the run's id, or
        None when another worker claimed it first."""
        run_id, new_thread = tick_ids(cron["cron_id"], cron["next_run_at"])
        thread_id = cron["thread_id"] or new_thread
        user = cron["user_id"]
        at = time.time()
        try:
            async with self.store.transaction(durable=True) as conn:
                if (await conn.execute(self._advance_statement(cron, now))).rowcount != 1:
                    return None  # nothing changed: the commit is empty
                if cron["thread_id"] is None:
                    first = {"assistant_id": assistant.assistant_id, "graph_id": assistant.graph_id}
                    await conn.execute(
                        conversations.insert().values(**new_conversation(thread_id, user_id=user))
                    )
                    await conn.execute(
                        ap_threads.insert().values(
                            thread_id=thread_id, user_id=user, metadata=json.dumps(first),
                            created_at=at, updated_at=at,
                        )
                    )
                await conn.execute(
                    ap_runs.insert().values(
                        run_id=run_id, thread_id=thread_id, user_id=user,
                        assistant_id=assistant.assistant_id, message_id=None, cursor=0,
                        status="pending", multitask_strategy=request.strategy,
                        metadata=json.dumps(request.metadata or {}),
                        request=json.dumps(request.queued()), created_at=at, updated_at=at,
                    )
                )
        except sqlalchemy.exc.IntegrityError:  # the tick's run is stored already: move on
            log.warning("cron %s: the run of the tick due %s exists", cron["cron_id"], iso(cron["next_run_at"]))
            await self._advance(cron, now)
            return None
        return run_id

    async def _start(self, run_id: str, request: RunCreate) -> dict[str, Any] | None:
        """Start the claimed run as its strategy says: on a busy thread `enqueue` waits,
        `interrupt` and `rollback` stop what runs first, `reject` drops the tick."""
        run = await self.p.records.run(run_id)
        if run is None:
            return None
        thread_id = run["thread_id"]
        if request.strategy != "enqueue":
            others = [r for r in await self.p.active_runs(thread_id) if r["run_id"] != run_id]
            if others and request.strategy == "reject":
                log.warning("cron run %s dropped: thread %s is busy (reject)", run_id, thread_id)
                await self.p.records.delete_run(run_id)
                return None
            for other in reversed(others):
                await self.p._stop(other, rollback=request.strategy == "rollback")
        await self.p.dispatch(thread_id)
        return await self.p.records.run(run_id) or run

    def _delete_after(self, run: dict[str, Any]) -> None:
        """`on_run_completed: "delete"`: the run's new thread is deleted once the run ends
        (by this worker: if it stops first, the thread is kept)."""

        async def delete() -> None:
            try:
                await self.p.join(run)
                await self.p.client.conversations.delete(run["thread_id"])
                await self.p.records.delete_thread(run["thread_id"])
            except Exception:
                log.exception("cron run %s: deleting its thread", run["run_id"])

        task = asyncio.create_task(delete(), name=f"cron-delete-{run['run_id']}")
        self.cleanups.add(task)
        task.add_done_callback(self.cleanups.discard)


def parse_time(value: str | None) -> float | None:
    """An ISO 8601 time as seconds since the epoch (a naive time is UTC)."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise UserError(f"end_time {value!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
