"""A cancel recorded by another process on SQLite takes effect within one model call or tool
step (issue 34).

Before: with no bus between processes on SQLite, the owner saw a recorded cancel only at its
next approved tool, status change or lease renewal (every 10 s by default): a run cancelled
from a second terminal went on calling the model meanwhile. Now the segment asks at every
step boundary (`core/run/cancel_poll.py`).

Two clients on one data folder are two processes' worth: the second records the cancel; the
first, running a run of many short model calls and tool rounds, must stop at its next step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import make_config
from scripted_llm import Call, Delay, Text, ToolCalls
from waiting import wait_until

from artifactflow import Client, load_settings, tool

ROUNDS = 8


@tool
async def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What.
    """
    return f"facts about {topic}"


async def test_a_cancel_from_another_process_stops_the_run_at_its_next_step(
    tmp_path: Path, llm_env: Any
) -> None:
    config = make_config(tmp_path, lead_tools=["lookup"], max_tool_rounds=ROUNDS + 2)
    data = tmp_path / "data"
    owner = await Client.open(load_settings(config, data), extra_tools=[lookup])
    other = await Client.open(load_settings(config, data), extra_tools=[lookup])
    try:
        llm_env.script(
            *[Delay(0.3, ToolCalls([Call("lookup", {"topic": f"t{i}"}, id=f"call_{i}")])) for i in range(ROUNDS)],
            Text("done"),
        )
        run = await owner.runs.start("look everything up")
        await wait_until(lambda: llm_env.request_count >= 2, timeout=120, what="the second model call")
        at_cancel = llm_env.request_count
        assert await other.runs.cancel(run.message_id)
        result = await run.result()
        assert result.status == "cancelled", result
        # the model call in flight when the cancel was recorded may finish; no other starts
        assert llm_env.request_count <= at_cancel + 1, (at_cancel, llm_env.request_count)
        assert llm_env.request_count < ROUNDS + 1
    finally:
        await other.aclose()
        await owner.aclose()
