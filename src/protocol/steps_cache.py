"""Each ended message's steps (`steps.message_steps`), kept between reads of its thread.

A thread's state, history and search page are built from every message of the branch, and
building a message's steps means decoding all its stored events (their JSON, their typed
payloads) and replaying them through the step tracker: at 1,000 messages, ~60 % of a state
read's CPU, paid again by every read although an ended message's steps never change. agent-
chat-ui and `useStream` read the state and the history after every run, so a long thread
paid it over and over.

What is kept: the steps of messages whose status is final (completed, failed, cancelled),
keyed by (id, status, `updated_at`), so a message that changes in any way is read again.
Messages still running or waiting for a decision are always built from their events. The
steps are kept as the objects and shared by the reads that use them, read-only: the states
(history.py) and the routes copy the lists they extend and never edit a message (keeping
orjson bytes and decoding a copy per read cost 60 % of what it saved, most of it the garbage
collector walking the copies). The cache is one per `Client` (one per database), bounded by
the steps' size as JSON, least recently used dropped first; it is a process's memory, so a
restarted server builds each message once again.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import orjson

from ..events.status import FINAL_STATUSES
from .steps import message_steps
from .views import events_by_message

if TYPE_CHECKING:
    from ..client import Client

Steps = list[tuple[int, str | None, list[dict[str, Any]], list[dict[str, Any]]]]
MAX_BYTES = 64 * 1024 * 1024  # per client: ~16 threads of 1,000 messages with 4 KB tool results
_FINAL = frozenset(str(status) for status in FINAL_STATUSES)


class StepsCache:
    """Ended messages' steps, least recently used dropped first beyond `max_bytes`."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.entries: OrderedDict[tuple[str, str, float], tuple[Steps, int]] = OrderedDict()
        self.hits = 0  # read by tests and benchmarks
        self.misses = 0

    def clear(self) -> None:
        self.entries.clear()
        self.size = 0

    @staticmethod
    def key(message: dict[str, Any]) -> tuple[str, str, float] | None:
        status = str(message.get("status"))
        if status not in _FINAL:
            return None
        return (message["id"], status, float(message.get("updated_at") or 0.0))

    def get(self, message: dict[str, Any]) -> Steps | None:
        key = self.key(message)
        found = self.entries.get(key) if key is not None else None
        if found is None:
            return None
        self.entries.move_to_end(key)  # type: ignore[arg-type]
        self.hits += 1
        return found[0]

    def put(self, message: dict[str, Any], steps: Steps) -> None:
        key = self.key(message)
        if key is None:
            return
        try:
            size = len(orjson.dumps(steps))  # what it holds, near enough (once per message)
        except TypeError:  # a value JSON does not hold as it is: not kept, built each time
            return
        if size > self.max_bytes:
            return
        old = self.entries.pop(key, None)
        self.size += size - (old[1] if old is not None else 0)
        self.entries[key] = (steps, size)
        while self.size > self.max_bytes:
            _, (_, dropped) = self.entries.popitem(last=False)
            self.size -= dropped


# one per client (per database); a closed client's goes with it
CACHES: weakref.WeakKeyDictionary[Client, StepsCache] = weakref.WeakKeyDictionary()


def cache_of(client: Client) -> StepsCache:
    cache = CACHES.get(client)
    if cache is None:
        cache = CACHES[client] = StepsCache()
    return cache


async def steps_by_message(client: Client, messages: list[dict[str, Any]]) -> dict[str, Steps]:
    """Every listed message's steps: ended ones from the cache where it has them, the rest
    from their events (one read for all of them, `views.events_by_message`)."""
    cache = cache_of(client)
    out: dict[str, Steps] = {}
    missing: list[dict[str, Any]] = []
    for message in messages:
        found = cache.get(message)
        if found is None:
            missing.append(message)
        else:
            out[message["id"]] = found
    if missing:
        cache.misses += len(missing)
        events = await events_by_message(client, missing)
        for message in missing:
            steps = message_steps(message, events[message["id"]])
            cache.put(message, steps)
            out[message["id"]] = steps
    return out
