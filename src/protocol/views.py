"""Threads, states and runs as the Agent Protocol shows them, read from our records.

Checkpoints are messages: a thread's state after message M has checkpoint id M (the
conversation's path root → M, read from the message tree and the event log), and the state
before its first message has checkpoint id `root`. A run given `checkpoint_id` M forks there
(its message answers after M). These states are rebuilt from durable records, so none of them
is ever collected: LangGraph's own checkpoints are still dropped when a message ends (kept
while it is paused), and no endpoint here needs them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..events.envelope import Event
from .convert import interrupt_of, message_messages

if TYPE_CHECKING:
    from ..client import Client

ROOT = "root"
NODE = "tool_execution"  # where a paused run waits: the node that asks before tools run
# a cancelled last run leaves the thread `interrupted`, as LangGraph's server reports it
STATUS = {"running": "busy", "waiting": "interrupted", "failed": "error", "cancelled": "interrupted"}


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


async def path_messages(client: Client, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        events: list[Event] = await client.runs.events(message["id"])
        out += message_messages(message, events)
    return out


def path_to(by_id: dict[str, dict[str, Any]], tip: str | None) -> list[dict[str, Any]]:
    path: list[dict[str, Any]] = []
    while tip is not None and tip in by_id and len(path) <= len(by_id):
        path.append(by_id[tip])
        tip = by_id[tip]["parent_id"]
    return list(reversed(path))


def checkpoint(thread_id: str, checkpoint_id: str | None) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "checkpoint_map": None,
    }


async def state_at(
    client: Client,
    thread_id: str,
    path: list[dict[str, Any]],
    *,
    messages: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The thread's state after the last message of `path` (the empty state for `[]`)."""
    tip = path[-1] if path else None
    values: dict[str, Any] = {
        "messages": messages if messages is not None else await path_messages(client, path)
    }
    tasks: list[dict[str, Any]] = []
    interrupts: list[dict[str, Any]] = []
    if tip is not None and tip["status"] == "waiting" and tip.get("waiting_for"):
        interrupts = [interrupt_of(tip["waiting_for"])]
        tasks = [
            {
                "id": tip["id"],
                "name": NODE,
                "path": [],
                "error": None,
                "interrupts": interrupts,
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        ]
    elif tip is not None and tip["status"] == "running":
        tasks = [
            {
                "id": tip["id"],
                "name": "lead_agent",
                "path": [],
                "error": None,
                "interrupts": [],
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        ]
    parent = (path[-2]["id"] if len(path) > 1 else ROOT) if path else None
    return {
        "values": values if path else {},
        "next": [t["name"] for t in tasks],
        "tasks": tasks,
        "checkpoint": checkpoint(thread_id, tip["id"] if tip else ROOT),
        "parent_checkpoint": checkpoint(thread_id, parent) if parent else None,
        "metadata": {
            "source": "loop",
            "step": len(path),
            "message_id": tip["id"] if tip else None,
            "status": tip["status"] if tip else None,
        },
        "created_at": iso(tip["updated_at"] if tip else None),
        "interrupts": interrupts,
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
    return {
        "thread_id": conversation["id"],
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
        "thread_id": run["thread_id"],
        "assistant_id": run["assistant_id"],
        "created_at": iso(run["created_at"]),
        "updated_at": iso(run["updated_at"]),
        "status": run["status"],
        "metadata": run["metadata"],
        "multitask_strategy": run["multitask_strategy"],
        "kwargs": {},
    }
