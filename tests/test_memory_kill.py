"""A memory saved in a round that a crash cuts off is saved once (issue 24).

The CLI (`artifactflow run ... --json`, its `main()` in a process forked from a server that
imported it once: tests/cli_fork.py) runs a lead whose model calls `memory_save`, and is
SIGKILLed at points around that call: as the tool starts, after its
result, as the next model call starts. This process then recovers the message as a surviving
worker would (its lease made to expire) and the run re-executes the cut-off round from its
last checkpoint. The save's id comes from the message id and the tool call id, so however
often the round runs, the store holds the memory once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from cli_fork import fork_cli_async
from cli_helpers import CLI, kill_at
from conftest import make_config
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Resume
from artifactflow.core.store import schema as t

KILL_POINTS = [
    ("tool_start", 0.0),
    ("tool_start", 0.02),
    ("tool_complete", 0.0),
    ("tool_complete", 0.01),
    ("agent_start#2", 0.0),
]


FACTS = [
    "The launch of Project Falcon moved to Q3",
    "My sister Clara lives in Lisbon",
    "The VPN certificate expires on 14 February",
    "I take my coffee black with no sugar",
    "Daniel approves all firewall rule changes",
    "The staging cluster lives in eu-west-1",
]


def _route(request: dict[str, Any]) -> Any:
    messages = request.get("messages") or []
    task = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    if messages and messages[-1].get("role") == "tool":
        return Text("saved")
    return ToolCalls([Call("memory_save", {"text": FACTS[int(task.split()[-1][1:])]})])


async def _run_and_kill(config: Path, data: Path, task: str, point: str, delay: float) -> None:
    proc = await fork_cli_async(  # a process of its own, forked (tests/cli_fork.py)
        ["--config-dir", str(config), "--data-dir", str(data), "run", task, "--json"], CLI.env()
    )
    seen = await kill_at(proc, point, delay, 60)
    assert seen[point.partition("#")[0]], f"the CLI never printed {point}"


async def test_memory_save_cut_off_by_sigkill_saves_once(make_client: Any, tmp_path: Path, llm: Any) -> None:
    llm.route(_route)
    config = make_config(tmp_path, lead_tools=["memory_save"])
    data = tmp_path / "data"
    client = await make_client(config_dir=config, data_dir=data)
    store = client.admin.store
    for n, (point, delay) in enumerate(KILL_POINTS):
        tag = f"k{n}"
        await _run_and_kill(config, data, f"task {tag}", point, delay)
        message_id = await store.fetch_value(
            sa.select(t.messages.c.id).where(t.messages.c.content == f"task {tag}")
        )
        assert message_id, f"{point}: no message"
        message = await store.get_message(message_id)
        for _ in range(4):  # recover as a surviving process would, until the run ends
            message = await store.get_message(message_id)
            assert message is not None
            if message["status"] in ("completed", "failed", "cancelled"):
                break
            await store.update_message(message_id, lease_expires_at=0.0)  # its owner is dead
            await client.run(Resume(message_id, "approve"))
        assert message is not None and message["status"] == "completed", (point, delay, message)
        saved = await store.fetch_column(
            sa.select(t.memories.c.id).where(t.memories.c.text == FACTS[n])
        )
        assert len(saved) == 1, (point, delay, saved)
    # every fact is found by search afterwards, in the process that recovered them
    assert sorted(h.text for h in await client.memories.list()) == sorted(FACTS[: len(KILL_POINTS)])
    found = await client.memories.search("where does my sibling live", mode="hybrid", limit=1)
    assert found.hits[0].text == FACTS[1]
