"""Threads, checkpoints and runs as the Agent Protocol shows them, read from our records
(the states themselves are built in `history.py`); a thread's id as its owner knows it
(`thread_ids.shown`), never a key derived from it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..core.run.eventlog import stored_event
from ..core.store.thread_reads import events_of
from ..events.envelope import Event
from .convert import message_messages
from .thread_ids import show_as, shown

if TYPE_CHECKING:
    from ..client import Client

ROOT = "root"
NODE = "tool_execution"  # where a paused run waits: the node that asks before tools run
# a cancelled last run leaves the thread `interrupted`, as LangGraph's server reports it
STATUS = {"running": "busy", "waiting": "interrupted", "failed": "error", "cancelled": "interrupted"}


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


async def events_by_message(client: Client, messages: list[dict[str, Any]]) -> dict[str, list[Event]]:
    """Every listed message's stored events: one read for them all (`thread_reads.events_of`),
    not two per message (its row and its log)."""
    rows = await events_of(client.admin.store, [m["id"] for m in messages])
    return {m["id"]: [stored_event(m, row) for row in rows[m["id"]]] for m in messages}  # type: ignore[arg-type]


async def path_messages(client: Client, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    events = await events_by_message(client, messages)
    out: list[dict[str, Any]] = []
    for message in messages:
        out += message_messages(message, events[message["id"]])
    return out


def path_to(by_id: dict[str, dict[str, Any]], tip: str | None) -> list[dict[str, Any]]:
    path: list[dict[str, Any]] = []
    while tip is not None and tip in by_id and len(path) <= len(by_id):
        path.append(by_id[tip])
        tip = by_id[tip]["parent_id"]
    return list(reversed(path))


def checkpoint(thread_id: str, checkpoint_id: str | None) -> dict[str, Any]:
    return {
        "thread_id": shown(thread_id),
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "checkpoint_map": None,
    }


def thread_status(tip: dict[str, Any] | None, busy: bool) -> str:
    if busy:
        return "busy"
    return STATUS.get(tip["status"], "idle") if tip else "idle"


def thread_view(
    conversation: dict[str, Any],
    row: dict[str, Any] | None,
    *,
    status: str,
    state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    interrupts = {
        t["id"]: t["interrupts"] for t in (state or {}).get("tasks", []) if t["interrupts"]
    }
    show_as(conversation["id"], (row or {}).get("public_id"))
    return {
        "thread_id": shown(conversation["id"]),
        "created_at": iso(conversation["created_at"]),
        "updated_at": iso(max(conversation["updated_at"], (row or {}).get("updated_at", 0))),
        "metadata": (row or {}).get("metadata", {}),
        "status": status,
        "values": (state or {}).get("values") or {},
        "interrupts": interrupts,
        "config": {},
        "error": None,
    }


def run_view(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": run["run_id"],
        "thread_id": shown(run["thread_id"]),
        "assistant_id": run["assistant_id"],
        "created_at": iso(run["created_at"]),
        "updated_at": iso(run["updated_at"]),
        "status": run["status"],
        "metadata": run["metadata"],
        "multitask_strategy": run["multitask_strategy"],
        "kwargs": {},
    }
