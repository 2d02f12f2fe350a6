"""Exactly-once keys for hook points that fire inside a node LangGraph may run again.

LangGraph re-runs a node from its first line when it resumes, and a recovered run (its
process died) re-runs the node it was in. A hook in such a node would fire twice for the
same step. The rule, as for the tool ledger: key the firing by what it is about, and
remember the first firing's output under that key in the app store.

    key = "{invocation}/{round}/{call id or *}/{point}"

`HookRunner.once(run, key, fire)` looks the key up (only for a resumed or recovered
segment: a new segment cannot have fired anything yet), fires the hooks when it is absent,
and stores their output (JSON) so a second firing returns it without calling any hook.
Per-call points ride the tool ledger instead (its key is the same `{invocation}/{round}/
{id}` prefix): a call whose ledger row is finished is replayed with its stored, already
rewritten result and no hook fires for it again.

Which points are keyed is listed in `KEYED_POINTS`; agent-node points are not keyed on
purpose: an agent node that runs again makes a new model call, and its hooks describe that
new call.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

KEYED_POINTS = frozenset({"on_tool_round_start", "after_tool_round"})


def hook_key(point: str, invocation: str, round: int, call_id: str | None = None) -> str:
    """The dedupe key of one firing of `point` for one invocation's round (and call)."""
    if "/" in invocation:
        raise ValueError(f"an invocation id may not contain '/': {invocation!r}")
    return f"{invocation}/{round}/{call_id or '*'}/{point}"


def encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def decode(text: str) -> Any:
    return json.loads(text)


class HookLedger(Protocol):
    """Where fired keys and their outputs are remembered (JSON text per key)."""

    async def get(self, message_id: str, key: str) -> str | None:
        """The stored output of `key`, or None when it never fired."""
        ...

    async def put(self, message_id: str, key: str, value: str) -> bool:
        """Store `key` once; False when it was already stored (the first one stays)."""
        ...

    async def clear(self, message_id: str) -> None:
        """Forget a message's keys (when it finishes for good)."""
        ...


class MemoryHookLedger:
    """A ledger for one process (tests, benchmarks, runs without an app store)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], str] = {}
        self.reads = 0
        self.writes = 0

    async def get(self, message_id: str, key: str) -> str | None:
        self.reads += 1
        return self._rows.get((message_id, key))

    async def put(self, message_id: str, key: str, value: str) -> bool:
        self.writes += 1
        if (message_id, key) in self._rows:
            return False
        self._rows[(message_id, key)] = value
        return True

    async def clear(self, message_id: str) -> None:
        for row in [k for k in self._rows if k[0] == message_id]:
            del self._rows[row]


class StoreHookLedger:
    """The app store's `af_hook_marks` table: survives the process, shared by workers."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def get(self, message_id: str, key: str) -> str | None:
        return await self.store.hook_mark_get(message_id, key)

    async def put(self, message_id: str, key: str, value: str) -> bool:
        return await self.store.hook_mark_put(message_id, key, value)

    async def clear(self, message_id: str) -> None:
        await self.store.hook_marks_clear(message_id)
