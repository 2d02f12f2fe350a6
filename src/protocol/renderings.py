"""Each ended message as the protocol shows it (its steps, `steps.message_steps`), rendered
once from its events and then read: stored in `ap_renderings` and kept in memory.

A thread's state, history and search page show every message of the branch, and rendering a
message means decoding all its stored events and replaying them through the step tracker: at
1,000 messages a first read after a restart took a second, and every later read re-encoded
~4,000 message dicts. So an ended message (completed, failed, cancelled) is rendered once,
lazily on the first read that needs it, and its rendering is kept as JSON bytes:

- `messages`: its LangChain messages after its last step, a JSON list. A state's
  `values.messages` is these lists joined (`history.BranchValues`), sent as they are
  (`body.Raw`): no message of the branch before the page is decoded or encoded again;
- `steps`: every step, each one's messages given as a count of `messages` where they are its
  start (`compact`), decoded only for the messages whose states a read returns.

A rendering is valid for the message's (status, `updated_at`) and the renderer's `VERSION`:
a message that changes in any way (a resume, an edit, a new status) is rendered again, and
so is every message after a change of the renderer. Messages still running or waiting are
always rendered from their events. In memory: the renderings read or made here, per `Client`
(one per database), least recently used dropped beyond `MAX_BYTES`. A database this
process cannot write (read-only, or a version 8 one opened read-only) still reads: the
renderings are then kept in memory only.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from ..core.store import schema as t
from ..core.store.thread_reads import messages_by_id
from ..errors import NotFoundError
from ..events.status import FINAL_STATUSES
from .body import encode
from .steps import message_steps
from .views import events_by_message

if TYPE_CHECKING:
    from ..client import Client

JSON = dict[str, Any]
Steps = list[tuple[int, str | None, list[JSON], list[JSON]]]
VERSION = 1  # of the renderer (steps.py, convert.py): a change renders every message again
MAX_BYTES = 64 * 1024 * 1024  # per client: ~4 threads of 1,000 messages with 4 KB tool results
_FINAL = frozenset(str(status) for status in FINAL_STATUSES)
log = logging.getLogger("artifactflow.protocol")


@dataclass(slots=True)
class Rendering:
    """One message's steps: its messages after its last step (`part`: the JSON list's
    elements, comma-joined, to join with other messages') and its `count` of steps for every
    read; the steps themselves decoded when a read builds its states (`steps()`)."""

    count: int
    part: bytes
    blob: bytes | None  # `compact` steps as stored; None: `decoded` holds them
    decoded: Steps | None = None

    @classmethod
    def of(cls, count: int, messages: bytes, blob: bytes | None, decoded: Steps | None = None) -> Rendering:
        return cls(count, messages[1:-1], blob, decoded)  # `messages`: a JSON list

    @property
    def messages(self) -> bytes:
        return b"[" + self.part + b"]"

    def steps(self) -> Steps:
        """Decoded on each call from the stored form (a read decodes the few messages whose
        states it returns, and the memory holds bytes only); a rendering that has no stored
        form keeps its steps."""
        if self.blob is not None:
            return expand(self.messages, self.blob)
        return self.decoded or []

    @property
    def size(self) -> int:
        """What it holds, near enough (steps kept decoded: ~4× their JSON)."""
        return len(self.part) + len(self.blob) if self.blob is not None else len(self.part) * 4


def compact(steps: Steps) -> list[list[Any]]:
    """`steps` with each step's messages as a count of the last step's where they are its
    start (they are, as a message's messages only grow): the stored form is ~the message's
    JSON twice (its messages and its steps' writes), not once per step."""
    final = steps[-1][3]
    out: list[list[Any]] = []
    for step, node, writes, messages in steps:
        count = len(messages)
        out.append([step, node, writes, count if messages == final[:count] else messages])
    return out


def expand(messages: bytes, blob: bytes) -> Steps:
    final = orjson.loads(messages)
    return [
        (step, node, writes, final[:kept] if isinstance(kept, int) else kept)
        for step, node, writes, kept in orjson.loads(blob)
    ]


def render(message: JSON, events: list[Any]) -> Rendering:
    """The message's rendering from its events (`steps.message_steps`)."""
    steps = message_steps(message, events)
    try:  # what orjson writes, orjson reads back as it was
        return Rendering.of(len(steps), orjson.dumps(steps[-1][3]), orjson.dumps(compact(steps)))
    except TypeError:  # e.g. an integer beyond 64 bits: sent as json.dumps writes it, not stored
        return Rendering.of(len(steps), encode(steps[-1][3]), None, steps)


class RenderingCache:
    """Renderings of ended messages in memory, least recently used dropped beyond
    `max_bytes`; `hits` (from memory), `loaded` (from the database) and `misses` (rendered
    from events) are read by tests and benchmarks."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.entries: OrderedDict[tuple[str, str, float], Rendering] = OrderedDict()
        self.hits = self.loaded = self.misses = 0

    def clear(self) -> None:
        self.entries.clear()
        self.size = 0

    @staticmethod
    def key(message: JSON) -> tuple[str, str, float] | None:
        status = str(message.get("status"))
        if status not in _FINAL:
            return None
        return (message["id"], status, float(message.get("updated_at") or 0.0))

    def get(self, message: JSON) -> Rendering | None:
        key = self.key(message)
        found = self.entries.get(key) if key is not None else None
        if found is None:
            return None
        self.entries.move_to_end(key)  # type: ignore[arg-type]
        self.hits += 1
        return found

    def put(self, message: JSON, rendering: Rendering) -> None:
        key = self.key(message)
        if key is None or rendering.size > self.max_bytes:
            return
        old = self.entries.pop(key, None)
        self.size += rendering.size - (old.size if old is not None else 0)
        self.entries[key] = rendering
        while self.size > self.max_bytes:
            _, dropped = self.entries.popitem(last=False)
            self.size -= dropped.size


# one per client (per database); a closed client's goes with it
CACHES: weakref.WeakKeyDictionary[Client, RenderingCache] = weakref.WeakKeyDictionary()


def cache_of(client: Client) -> RenderingCache:
    cache = CACHES.get(client)
    if cache is None:
        cache = CACHES[client] = RenderingCache()
    return cache


async def renderings(client: Client, messages: list[JSON]) -> dict[str, Rendering]:
    """Every listed message's rendering: from memory, else stored, else from its events (one
    read for all of those, `views.events_by_message`), storing the ended ones."""
    cache = cache_of(client)
    out: dict[str, Rendering] = {}
    missing: list[JSON] = []
    for message in messages:
        found = cache.get(message)
        if found is None:
            missing.append(message)
        else:
            out[message["id"]] = found
    ended = [m for m in missing if cache.key(m) is not None]
    stored = await _stored(client, ended) if ended else {}
    cache.loaded += len(stored)
    rest: list[JSON] = []
    for message in missing:
        found = stored.get(message["id"])
        if found is None:
            rest.append(message)
        else:
            cache.put(message, found)
            out[message["id"]] = found
    if rest:
        cache.misses += len(rest)
        rest = await _whole(client, rest)
        events = await events_by_message(client, rest)
        rows: list[JSON] = []
        for message in rest:
            made = out[message["id"]] = render(message, events[message["id"]])
            if cache.key(message) is not None:
                cache.put(message, made)
                if made.blob is not None:
                    rows.append(_row(message, made))
        if rows:
            await _keep(client, rows)
    return out


async def _whole(client: Client, messages: list[JSON]) -> list[JSON]:
    """`messages` as whole rows (a thread's read lists them without their texts,
    `thread_reads.message_tree`; rendering one needs its question and answer)."""
    partial = [m["id"] for m in messages if "content" not in m]
    if not partial:
        return messages
    whole = await messages_by_id(client.admin.store, partial)
    missing = [mid for mid in partial if mid not in whole]
    if missing:
        raise NotFoundError(f"message {missing[0]} was deleted during the read")
    return [dict(whole[m["id"]]) if "content" not in m else m for m in messages]


def _row(message: JSON, made: Rendering) -> JSON:
    return {
        "message_id": message["id"], "conversation_id": message["conversation_id"],
        "status": str(message["status"]), "updated_at": float(message["updated_at"]),
        "version": VERSION, "step_count": made.count, "messages": made.messages,
        "steps": made.blob,
    }


async def _stored(client: Client, messages: list[JSON]) -> dict[str, Rendering]:
    """The stored renderings of `messages` still valid for them (see the module doc)."""
    r = t.ap_renderings
    wanted = {m["id"]: (str(m["status"]), float(m["updated_at"])) for m in messages}
    ids = list(wanted)
    out: dict[str, Rendering] = {}
    store = client.admin.store
    columns = (r.c.message_id, r.c.status, r.c.updated_at, r.c.step_count, r.c.messages, r.c.steps)
    for start in range(0, len(ids), 500):
        query = sa.select(*columns).where(
            r.c.message_id.in_(ids[start : start + 500]), r.c.version == VERSION
        )
        try:
            rows = await store.fetch_rows(query)
        except SQLAlchemyError as exc:  # a database opened read-only before version 9
            log.debug("stored renderings not read: %s", exc)
            return out
        for row in rows:
            if wanted[row["message_id"]] == (row["status"], row["updated_at"]):
                out[row["message_id"]] = Rendering.of(
                    row["step_count"], bytes(row["messages"]), bytes(row["steps"])
                )
    return out


async def _keep(client: Client, rows: list[JSON]) -> None:
    """Store `rows` in place of any older renderings of their messages. A read that stores
    nothing (another read stored them first, the message was deleted meanwhile, the database
    is read-only) still answers: the next read renders them again."""
    r = t.ap_renderings
    store = client.admin.store
    for start in range(0, len(rows), 200):
        chunk = rows[start : start + 200]
        ids = [row["message_id"] for row in chunk]
        try:
            await store.write(r.delete().where(r.c.message_id.in_(ids)), r.insert().values(chunk))
        except SQLAlchemyError as exc:
            log.debug("renderings not stored: %s", exc)
