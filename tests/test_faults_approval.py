"""An approval survives a crash (issue 22, D5).

The CLI (`artifactflow run ... --yes --json`, its `main()` in a process forked from a server that
imported it once: tests/cli_fork.py) approves a pause and is SIGKILLed right after, at varying points: as the approval is recorded, while the approved tool
runs (after its side effect), after it. This process then recovers the message (its lease is
made to expire, as a dead process's would). The resume's claim stored the decision
(`af_messages.decisions`), so the recovered run uses it: nobody is asked again, the log holds one
`permission_request` and one `tool_start` per call id, and the side effect happened once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from cli_fork import fork_cli_async
from cli_helpers import CLI, kill_at
from conftest import make_config
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Resume
from artifactflow.core.store import schema as t

PLUGIN = '''
import os, time
from artifactflow import tool

@tool(permission="confirm")
def record_effect(tag: str) -> str:
    """Record a side effect (needs approval), then take a moment (a window to be killed in).

    Args:
        tag: What to record.
    """
    with open(os.environ["AF_JOURNAL"], "a", encoding="utf-8") as f:
        f.write(tag + "\\n")
    time.sleep(0.1)
    return "recorded " + tag
'''

# (event the CLI printed, seconds after it): the approval is accepted before the first.
KILL_POINTS = [
    ("permission_result", 0.0),
    ("permission_result", 0.005),
    ("permission_result", 0.02),
    ("permission_result", 0.05),
    ("tool_start", 0.0),
    ("tool_start", 0.03),
    ("tool_start", 0.06),
    ("tool_start", 0.09),
    ("tool_complete", 0.0),
    ("agent_start#2", 0.0),
]


def _route(request: dict[str, Any]) -> Any:
    messages = request.get("messages") or []
    task = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    if messages and messages[-1].get("role") == "tool":
        return Text("done")
    return ToolCalls([Call("record_effect", {"tag": task.split()[-1]})])


async def _run_and_kill(config: Path, data: Path, task: str, point: str, delay: float) -> set[str]:
    """Run the CLI until it printed `point` (its n-th, with `#n`), wait `delay`, SIGKILL it;
    the event types it printed."""
    proc = await fork_cli_async(
        ["--config-dir", str(config), "--data-dir", str(data), "run", task, "--yes", "--json"], CLI.env()
    )
    seen = await kill_at(proc, point, delay, 30)
    assert seen["permission_result"], f"killed at {point}: the CLI never approved"
    return set(seen)


async def test_kills_right_after_an_approval_never_ask_again(
    make_client: Any, tmp_path: Path, journal: Path, llm: Any
) -> None:
    llm.route(_route)
    config = make_config(
        tmp_path,
        lead_tools=["record_effect"],
        yaml_text="plugins: [effects]\n",
        plugin_files={"effects.py": PLUGIN},
    )
    data = tmp_path / "data"
    client = await make_client(config_dir=config, data_dir=data)
    store = client.admin.store
    asked_again: list[str] = []
    for n, (point, delay) in enumerate(KILL_POINTS):
        tag = f"k{n}"
        await _run_and_kill(config, data, f"task {tag}", point, delay)
        message_id = await store.fetch_value(
            sa.select(t.messages.c.id).where(t.messages.c.content == f"task {tag}")
        )
        assert message_id, f"{point}: no message"
        for _ in range(4):  # recover as a surviving process would, until the run ends
            message = await store.get_message(message_id)
            assert message is not None
            if message["status"] in ("completed", "failed", "cancelled"):
                break
            if message["status"] == "waiting":
                asked_again.append(f"{point}+{delay}")
            else:
                await store.update_message(message_id, lease_expires_at=0.0)  # its owner is dead
            await client.run(Resume(message_id, "approve"))
        assert message["status"] == "completed", (point, delay, message["status"], message["error"])
        events = await client.runs.events(message_id)
        kinds = [e.type for e in events]
        starts = Counter(e.data.tool_call_id for e in events if e.type == "tool_start")  # type: ignore[union-attr]
        assert kinds.count("permission_request") == 1, (point, delay, kinds)
        assert kinds.count("permission_result") == 1, (point, delay, kinds)
        assert list(starts.values()) == [1], (point, delay, kinds)
        # Exactly once, or (the kill landed after the ledger's "started" record, before the
        # tool's effect) not at all and said so: such a call is never run a second time.
        effects = journal.read_text(encoding="utf-8").splitlines().count(tag)
        interrupted = [e for e in events if e.type == "tool_complete" and e.data.outcome == "interrupted"]  # type: ignore[union-attr]
        assert effects == 1 or (effects == 0 and len(interrupted) == 1), (point, delay, effects, kinds)
    assert asked_again == []
