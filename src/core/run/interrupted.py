"""Saying so when a re-asked approval is about a call a crash cut short.

An approved call is recorded in the tool ledger before it runs. If the process dies while it
runs, the recovered run pauses at the same approval again (the answer was lost with the
process). The person answering must then know that the call already started and that its
effect may or may not have happened: each such call is marked `interrupted: true` with a
note. Whatever they answer, the tool node records the call as `interrupted`, never as denied
(`tool_node._run_one`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ...shapes import AskedCall
from .runtime import Runtime

NOTE = (
    "this call was approved and started before the process died; whether its effect happened "
    "is unknown. It will not be run again (unless the tool is idempotent); check its effect."
)


async def mark_interrupted(
    rt: Runtime,
    message_id: str,
    calls: list[AskedCall],
    pending: Callable[[], Awaitable[Sequence[Mapping[str, Any]]]],
) -> list[AskedCall]:
    """`calls` of a pause, those the ledger saw start marked `interrupted` (with a note)."""
    if not calls:
        return calls
    rounds = {c["id"]: c.get("round", 0) for c in await pending()}
    marked = []
    for call in calls:
        key = f"{call.get('invocation')}/{rounds.get(call['tool_call_id'], 0)}/{call['tool_call_id']}"
        record = await rt.store.ledger_get(message_id, key)
        if record is not None:
            call = {**call, "interrupted": True, "note": NOTE}
            if record["status"] == "finished":
                call["note"] = "this call already ran before the process died; its result is kept"
        marked.append(call)
    return marked
