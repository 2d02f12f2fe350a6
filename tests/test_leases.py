"""Leases and the tool ledger, deterministically: the lease clock is moved, never slept past,
and a process that died mid-tool is simulated by the ledger row it leaves behind."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import make_config
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Resume, ResumeConflictError

PLUGIN = '''
import os
from artifactflow import tool

@tool(permission="confirm")
def append_line(text: str) -> str:
    """Append one line to the journal file."""
    with open(os.environ["AF_JOURNAL"], "a", encoding="utf-8") as f:
        f.write(text + "\\n")
    return "appended " + text
'''


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return make_config(
        tmp_path, lead_tools=["append_line"], yaml_text="plugins: [lease_tools]\n",
        plugin_files={"lease_tools.py": PLUGIN},
    )


async def paused_message(client, llm) -> str:  # type: ignore[no-untyped-def]
    llm.script(ToolCalls([Call("append_line", {"text": "once"}, id="c1")]))
    events = [e async for e in await client.runs.start("write")]
    assert events[-1].type == "permission_request"
    return events[-1].message_id


async def test_a_call_started_but_never_finished_is_reported_interrupted_not_rerun(
    make_client, config, llm, journal
):
    client = await make_client(config_dir=config)
    mid = await paused_message(client, llm)
    # What a process that died inside the tool leaves behind: the ledger's "started" row for
    # the lead's first round, call c1, and no "finished".
    assert await client.admin.store.ledger_start(mid, "lead/1/c1")
    llm.script(Text("noted"))
    events = [e async for e in await client.runs.start(Resume(mid, "approve"))]
    complete = next(e for e in events if e.type == "tool_complete")
    result = complete.data.result
    assert complete.data.success is False and result.metadata.get("interrupted") is True
    assert "interrupted" in (result.error or "")
    assert not journal.exists()  # not run a second time
    told = [m for m in llm.last_request["messages"] if m["role"] == "tool"]
    assert "interrupted" in told[-1]["content"]
    assert events[-1].type == "complete"


async def test_a_dead_owners_run_is_recovered_once_its_lease_has_expired_on_the_clock(
    make_client, config, llm, journal
):
    client = await make_client(config_dir=config)
    mid = await paused_message(client, llm)
    # Make it look like a process took the run and died: running, under a token nobody
    # here holds, with a lease that is still live by the real clock.
    message = await client.admin.store.get_message(mid)
    assert await client.admin.store.claim_message(
        mid, expected_status="waiting", expected_run_token=message["run_token"],
        run_token="dead-owner", lease_expires_at=time.time() + 30,
    )
    assert await client.admin.recover() == []  # the owner may be alive
    with pytest.raises(ResumeConflictError):
        await client.runs.start(Resume(mid, "approve"))
    client.admin.clock = lambda: time.time() + 31  # …and now its lease has run out
    assert await client.admin.recover() == [mid]
    events = [e async for e in await client.runs.get(mid, after_event_id=0)]
    assert events[-1].type == "permission_request"  # continued from its checkpoint: asks again
    assert any(e.type == "metadata" and e.data.recovered for e in events)
    assert (await client.admin.store.get_message(mid))["status"] == "waiting"
    assert await client.admin.recover() == []  # nothing left to recover
