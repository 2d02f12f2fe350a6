"""A result replayed from the tool ledger is never logged twice (issue 34).

Repro (1 of 24 SQLite kills in the torture run): a process dies after an approved call's
`tool_complete` is stored and before the tool step's checkpoint. The recovered run re-runs the
tool node from the pause's checkpoint; the ledger says the call finished, so its result is
reused (the tool does not run again) — and its `tool_complete` was emitted a second time. Now a
replayed result is emitted only when the log does not hold its `tool_complete` yet.

"The process dies" here: the first client's run is held in `after_tool_round` (after the
round's `tool_complete` events, before the step ends and its checkpoint is written) once its
`tool_complete` is stored; its lease is then expired, as a dead owner's would be, and a second
client on the same data folder (another process's worth) recovers the message.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from conftest import make_config
from scripted_llm import Call, Text, ToolCalls
from waiting import wait_until

from artifactflow import Client, Resume, load_settings, tool
from artifactflow.hooks import Hooks

EFFECTS: list[str] = []


@tool(permission="confirm")
async def ship(target: str) -> str:
    """Ship (needs approval).

    Args:
        target: Where.
    """
    EFFECTS.append(target)
    return f"shipped {target}"


class Stall(Hooks):
    """Holds the run after its tool round once the round's `tool_complete` is stored."""

    name = "stall"

    def __init__(self) -> None:
        self.client: Client | None = None
        self.reached = asyncio.Event()
        self.never = asyncio.Event()

    async def after_tool_round(self, run: Any, round: Any) -> None:
        assert self.client is not None
        client = self.client

        async def stored() -> bool:
            return any(e.type == "tool_complete" for e in await client.runs.events(run.message_id))

        await wait_until(stored, what="the stored tool_complete")
        self.reached.set()
        await self.never.wait()  # "killed": nothing after this point happens


async def test_a_kill_after_tool_complete_logs_one_tool_complete(tmp_path: Path, llm_env: Any) -> None:
    EFFECTS.clear()
    config = make_config(tmp_path, lead_tools=["ship"])
    data = tmp_path / "data"
    stall = Stall()
    first = await Client.open(load_settings(config, data), extra_tools=[ship], hooks=[stall])
    stall.client = first
    second = await Client.open(load_settings(config, data), extra_tools=[ship])
    try:
        llm_env.script(ToolCalls([Call("ship", {"target": "prod"}, id="call_ship")]), Text("shipped it"))
        paused = await first.run("ship to prod")
        assert paused.status == "waiting", paused
        await first.runs.start(Resume(paused.message_id, "approve"))  # runs until the stall
        await asyncio.wait_for(stall.reached.wait(), 120)
        store = second.admin.store
        await store.update_message(paused.message_id, lease_expires_at=0.0)  # its owner is dead

        result = await second.run(Resume(paused.message_id, "approve"))  # recovers it
        assert result.status == "completed", result
        events = await second.runs.events(paused.message_id)
        completes = Counter(e.data.tool_call_id for e in events if e.type == "tool_complete")  # type: ignore[union-attr]
        starts = Counter(e.data.tool_call_id for e in events if e.type == "tool_start")  # type: ignore[union-attr]
        assert completes == {"call_ship": 1}, [e.type for e in events]
        assert starts == {"call_ship": 1}
        assert EFFECTS == ["prod"]  # the ledger kept it from running twice
    finally:
        await second.aclose()
        await first.aclose()
