"""Live news between workers sharing one PostgreSQL database: LISTEN/NOTIFY.

Two channels. `af_events` carries what a run emits, in order: token deltas (`llm_chunk`,
never stored) inline, stored events inline when small, or by id only (the reader reads those
from the log). `af_control` carries requests to whichever worker owns a run (cancel, watch).

A run announces its events only while a reader on another worker watches it: a NOTIFY costs
the database a global lock at commit and every listener a wake-up, which measured a third of
the PostgreSQL path's throughput when every run announced everything. A reader sends `watch`
when it attaches (and again whenever it has heard nothing for a while, so a run that starts or
is recovered later on any worker learns of it); the owner then announces everything, first the
id of its last stored event, so the reader reads the log up to there and continues live.

PostgreSQL delivers a notification only on commit, to connections that issued LISTEN and stay
open, in commit order, with payloads of at most 8000 bytes. So:
- the listener is one dedicated asyncpg connection (`add_listener`), never used for anything
  else; notifications are dispatched to per-message queues in this process;
- a run publishes each batch after storing it (one autocommit `pg_notify` statement carrying
  every payload of the batch), so a reader that is told about event n can read it;
- a batch is split into payloads under `MAX_PAYLOAD` bytes; a delta too large for one is cut
  into several deltas (their concatenation is the same text);
- the stored log stays the source of truth: a reader fills any gap from it, and re-reads it
  when it has heard nothing for a while (a lost listener connection loses notifications).

`NullBus` (SQLite, or no bus) publishes nothing: readers in other processes poll the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ...events.envelope import EPHEMERAL_TYPES
from ..store.unit_of_work import CONNECT_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from ...events.envelope import Event

log = logging.getLogger("artifactflow.cluster")

EVENTS_CHANNEL = "af_events"
CONTROL_CHANNEL = "af_control"
MAX_PAYLOAD = 7900  # bytes; PostgreSQL's limit is 8000
WATCH_MEMORY_SECONDS = 5.0  # a watch for a run not (yet) here is remembered this long
INLINE_EVENT_BYTES = 1500  # stored events above this travel by id only

Item = dict[str, Any]
ControlHandler = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def encode_items(events: Iterable[Event]) -> list[Item]:
    """What a batch of events looks like on the wire, in order."""
    items: list[Item] = []
    for event in events:
        full = {"t": event.type, "i": event.event_id, "s": event.timestamp, "a": event.agent,
                "d": event.model_dump(mode="json")["data"]}
        if event.type in EPHEMERAL_TYPES:
            items.extend(_split_chunk(full))
        elif _size(_dumps(full)) <= INLINE_EVENT_BYTES:
            items.append(full)
        else:
            items.append({"i": event.event_id})
    return items


def _split_chunk(item: Item) -> list[Item]:
    """A delta too large for one payload becomes several consecutive deltas."""
    budget = MAX_PAYLOAD - 200
    if _size(_dumps(item)) <= budget:
        return [item]
    delta = str(item["d"].get("delta", ""))
    frame = _size(_dumps({**item, "d": {**item["d"], "delta": ""}}))
    step = max(64, (budget - frame) // 4)  # worst case: 4 bytes per character (escaped less)
    return [{**item, "d": {**item["d"], "delta": delta[i : i + step]}} for i in range(0, len(delta), step)]


def payloads(message_id: str, items: list[Item]) -> list[str]:
    """Pack items into as few payloads as fit under `MAX_PAYLOAD` bytes, order kept."""
    out: list[str] = []
    current: list[Item] = []
    head = _size(_dumps({"m": message_id, "x": []}))
    size = head
    for item in items:
        cost = _size(_dumps(item)) + 1
        if current and size + cost > MAX_PAYLOAD:
            out.append(_dumps({"m": message_id, "x": current}))
            current, size = [], head
        current.append(item)
        size += cost
    if current:
        out.append(_dumps({"m": message_id, "x": current}))
    return out


class NullBus:
    """No cross-process news (SQLite): readers elsewhere poll the log."""

    live = False
    worker_id = "local"

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def publish(self, message_id: str, events: list[Event]) -> None:
        return None

    async def control(self, message: dict[str, Any]) -> None:
        return None

    async def watch(self, message_id: str) -> None:
        return None

    def on_control(self, handler: ControlHandler) -> None:
        return None

    def watched(self, message_id: str) -> bool:
        return False

    def remember_watch(self, message_id: str) -> None:
        return None

    def subscribe(self, message_id: str) -> asyncio.Queue[list[Item]]:
        raise RuntimeError("NullBus has no subscriptions; follow the log instead")

    def unsubscribe(self, message_id: str, queue: asyncio.Queue[list[Item]]) -> None:
        return None


class PgBus(NullBus):
    """LISTEN/NOTIFY on PostgreSQL (see the module docstring)."""

    live = True

    def __init__(self, url: str, engine: Any) -> None:
        self._url = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        self._engine = engine
        self._conn: Any = None
        self._subscribers: dict[str, set[asyncio.Queue[list[Item]]]] = {}
        self._handlers: list[ControlHandler] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._watches: dict[str, float] = {}  # message id → when a watch arrived
        self._closing = False
        self.worker_id = uuid.uuid4().hex[:12]

    async def start(self) -> None:
        import asyncpg

        if self._conn is not None:
            return
        self._closing = False
        conn = await asyncpg.connect(self._url, timeout=int(CONNECT_TIMEOUT_SECONDS))
        await conn.add_listener(EVENTS_CHANNEL, self._on_events)
        await conn.add_listener(CONTROL_CHANNEL, self._on_control)
        conn.add_termination_listener(self._lost)
        self._conn = conn

    def _lost(self, _conn: Any) -> None:
        """The listening connection died (a database restart): listen again, with backoff.
        Notifications sent meanwhile are lost; readers fill the gap from the log."""
        self._conn = None
        if not self._closing:
            task = asyncio.get_running_loop().create_task(self._reconnect())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _reconnect(self) -> None:
        delay = 0.5
        while not self._closing and self._conn is None:
            try:
                await self.start()
                log.warning("cluster: listening again after the connection was lost")
            except Exception:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def close(self) -> None:
        self._closing = True
        conn, self._conn = self._conn, None
        for task in list(self._tasks):
            task.cancel()
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    async def _notify(self, channel: str, texts: list[str]) -> None:
        if not texts:
            return
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(
                sa.text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:texts AS text[])) AS p"),
                {"channel": channel, "texts": texts},
            )

    async def publish(self, message_id: str, events: list[Event]) -> None:
        """Tell every worker about a batch a run just stored (and its deltas)."""
        await self._notify(EVENTS_CHANNEL, payloads(message_id, encode_items(events)))

    async def publish_position(self, message_id: str, event_id: int) -> None:
        """Tell readers the id of the last stored event (they read the log up to it)."""
        await self._notify(EVENTS_CHANNEL, payloads(message_id, [{"i": event_id}]))

    async def control(self, message: dict[str, Any]) -> None:
        """Send a request (e.g. `{"op": "cancel", "m": id}`) to every worker."""
        await self._notify(CONTROL_CHANNEL, [_dumps({**message, "from": self.worker_id})])

    async def watch(self, message_id: str) -> None:
        """Ask whichever worker runs `message_id` to announce its events."""
        await self.control({"op": "watch", "m": message_id})

    def remember_watch(self, message_id: str) -> None:
        """A watch for a run that is not here (yet): a run starting soon will see it."""
        now = time.monotonic()
        self._watches = {m: t for m, t in self._watches.items() if now - t < WATCH_MEMORY_SECONDS}
        self._watches[message_id] = now

    def watched(self, message_id: str) -> bool:
        when = self._watches.get(message_id)
        return when is not None and time.monotonic() - when < WATCH_MEMORY_SECONDS

    def on_control(self, handler: ControlHandler) -> None:
        self._handlers.append(handler)

    def subscribe(self, message_id: str) -> asyncio.Queue[list[Item]]:
        """A queue receiving the item lists published for `message_id` from now on."""
        queue: asyncio.Queue[list[Item]] = asyncio.Queue()
        self._subscribers.setdefault(message_id, set()).add(queue)
        return queue

    def unsubscribe(self, message_id: str, queue: asyncio.Queue[list[Item]]) -> None:
        queues = self._subscribers.get(message_id)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._subscribers[message_id]

    # --- listener callbacks (run on the loop by asyncpg) ------------------------------------

    def _on_events(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            message = json.loads(payload)
            queues = self._subscribers.get(message["m"])
            if queues:
                for queue in queues:
                    queue.put_nowait(message["x"])
        except Exception:  # a malformed payload must not break the listener
            log.exception("cluster: bad event notification %.200s", payload)

    def _on_control(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            log.warning("cluster: bad control notification %.200s", payload)
            return
        for handler in self._handlers:
            task = asyncio.get_running_loop().create_task(handler(message))
            self._tasks.add(task)
            task.add_done_callback(self._handled)

    def _handled(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cluster: a control request failed", exc_info=task.exception())
