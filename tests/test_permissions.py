"""Permission interrupts and durable resume: a CONFIRM tool with a real side effect."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
import time
from pathlib import Path

import pytest
from cli_fork import fork_python, fork_python_async
from conftest import make_config
from scripted_llm import Call, Delay, Text, ToolCalls
from waiting import ceiling, wait_until

from artifactflow import (
    Client,
    InvalidResumeError,
    Resume,
    ResumeConflictError,
    Task,
    load_settings,
)
from artifactflow.core.permissions import decisions_from_body

PLUGIN = '''
import os
from pathlib import Path
from artifactflow import tool

@tool(permission="confirm")
def append_line(text: str) -> str:
    """Append one line to the journal file."""
    path = Path(os.environ["AF_JOURNAL"])
    with path.open("a", encoding="utf-8") as f:
        f.write(text + "\\n")
    return f"appended {text!r}"

@tool
def note(text: str) -> str:
    """An AUTO tool that also writes (to prove nothing runs before the decisions)."""
    path = Path(os.environ["AF_JOURNAL"] + ".auto")
    with path.open("a", encoding="utf-8") as f:
        f.write(text + "\\n")
    return "noted"
'''


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return make_config(
        tmp_path,
        lead_tools=["append_line", "note"],
        yaml_text="plugins: [journal_tools]\n",
        plugin_files={"journal_tools.py": PLUGIN},
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def pause(client: Client, llm, calls, conversation_id=None):
    llm.script(ToolCalls(calls))
    events = [e async for e in await client.runs.start(Task("write", conversation_id))]
    assert events[-1].type == "permission_request", [e.type for e in events]
    return events


async def test_deny_runs_nothing_and_model_sees_reason(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "x"}, id="c1")])
    request = events[-1]
    assert request.data.calls[0].tool == "append_line"
    assert request.data.calls[0].arguments == {"text": "x"}
    message = await client.admin.store.get_message(request.message_id)
    assert message["status"] == "waiting" and message["waiting_for"]["calls"][0]["tool_call_id"] == "c1"
    llm.script(Text("ok, not writing"))
    resumed = [
        e
        async for e in await client.runs.start(
            Resume(request.message_id, {"c1": {"action": "deny", "reason": "not today"}})
        )
    ]
    assert resumed[0].type == "permission_result"
    assert resumed[-1].type == "complete"
    assert lines(journal) == []
    seen = tool_messages(llm.requests[-1])[0]["content"]
    assert "denied" in seen and "not today" in seen


async def test_approve_runs_exactly_once(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "hello"}, id="c1")])
    llm.script(Text("done"))
    result = await client.run(Resume(events[-1].message_id, "approve"))
    assert result.status == "completed"
    assert lines(journal) == ["hello"]
    assert tool_messages(llm.requests[-1])[0]["content"] == "appended 'hello'"


async def test_edit_uses_new_arguments(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "draft"}, id="c1")])
    llm.script(Text("done"))
    decisions = {"c1": {"action": "edit", "arguments": {"text": "edited"}}}
    result = await client.run(Resume(events[-1].message_id, decisions))
    assert result.status == "completed"
    assert lines(journal) == ["edited"]


async def test_invalid_edit_rejected_nothing_runs_still_resumable(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "draft"}, id="c1")])
    mid = events[-1].message_id
    bad = [
        {"c1": {"action": "edit", "arguments": {"wrong": 1}}},
        {},
        {"c1": "approve", "zzz": "approve"},
        "maybe",
        {"nope": 1},
        {"c1": {"action": "launch"}},
    ]
    for decisions in bad:
        with pytest.raises(InvalidResumeError):
            await client.run(Resume(mid, decisions))
        message = await client.admin.store.get_message(mid)
        assert message["status"] == "waiting"
    # The HTTP/CLI body must wrap them: {"decisions": ...} and nothing else.
    for body in ({"nope": 1}, "approve", {"decisions": "approve", "extra": 1}):
        with pytest.raises(InvalidResumeError):
            decisions_from_body(body)
    assert lines(journal) == []
    llm.script(Text("done"))
    result = await client.run(Resume(mid, {"c1": "approve"}))
    assert result.status == "completed" and lines(journal) == ["draft"]


async def test_always_allow_remembered_for_conversation(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "one"}, id="c1")])
    llm.script(Text("done"))
    await client.run(Resume(events[-1].message_id, {"c1": {"action": "always"}}))
    conversation = events[-1].conversation_id
    # next message in the same conversation: runs without asking, even from a new client
    await client.aclose()
    second = await Client.open(load_settings(config, client.settings.data_dir))
    try:
        llm.script(ToolCalls([Call("append_line", {"text": "two"})]), Text("done again"))
        result = await second.run(Task("again", conversation))
        assert result.status == "completed"
        assert not any(e.type == "permission_request" for e in result.events)
        assert lines(journal) == ["one", "two"]
        # another conversation still asks
        llm.script(ToolCalls([Call("append_line", {"text": "three"})]))
        other = await second.run("elsewhere")
        assert other.status == "waiting"
    finally:
        await second.aclose()


async def test_one_pause_for_mixed_round_nothing_runs_before(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    calls = [
        Call("note", {"text": "auto"}, id="a1"),
        Call("append_line", {"text": "first"}, id="c1"),
        Call("append_line", {"text": "second"}, id="c2"),
    ]
    events = await pause(client, llm, calls)
    assert [e.type for e in events].count("permission_request") == 1
    pending = events[-1].data.calls
    assert [c.tool_call_id for c in pending] == ["c1", "c2"]
    assert not any(e.type == "tool_start" for e in events)
    assert lines(journal) == [] and not Path(str(journal) + ".auto").exists()
    llm.script(Text("done"))
    decisions = {"c1": "approve", "c2": {"action": "deny", "reason": "one is enough"}}
    result = await client.run(Resume(events[-1].message_id, decisions))
    assert result.status == "completed"
    assert lines(journal) == ["first"]
    assert lines(Path(str(journal) + ".auto")) == ["auto"]
    results = tool_messages(llm.requests[-1])
    assert [m["tool_call_id"] for m in results] == ["a1", "c1", "c2"]
    assert "one is enough" in results[2]["content"]


async def test_second_pause_later_in_same_run_and_ids_have_no_gaps(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "1"}, id="c1")])
    mid = events[-1].message_id
    llm.script(ToolCalls([Call("append_line", {"text": "2"}, id="c2")]))
    second = [e async for e in await client.runs.start(Resume(mid, "approve"))]
    assert second[-1].type == "permission_request"
    assert second[-1].data.calls[0].tool_call_id == "c2"
    llm.script(Text("all done"))
    third = [e async for e in await client.runs.start(Resume(mid, "approve"))]
    assert third[-1].type == "complete"
    assert lines(journal) == ["1", "2"]
    stored = [e.event_id for e in await client.runs.events(mid)]
    assert stored == list(range(1, len(stored) + 1))
    live = [e.event_id for e in events + second + third if e.type != "llm_chunk"]
    assert live == stored
    types = [e.type for e in await client.runs.events(mid)]
    assert types.count("permission_request") == 2 and types.count("permission_result") == 2
    assert types.count("tool_start") == 2


async def test_two_concurrent_resumes_one_runs_one_conflicts(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "once"}, id="c1")])
    mid = events[-1].message_id
    other = await Client.open(
        load_settings(client.settings.config_dir, client.settings.data_dir)
    )
    llm.script(Delay(0.3, Text("done")))
    try:
        outcomes = await asyncio.gather(
            client.run(Resume(mid, "approve")),
            other.run(Resume(mid, "approve")),
            return_exceptions=True,
        )
        conflicts = [o for o in outcomes if isinstance(o, ResumeConflictError)]
        done = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(conflicts) == 1 and len(done) == 1, outcomes
        assert done[0].status == "completed"
        assert lines(journal) == ["once"]
        with pytest.raises(ResumeConflictError):
            await client.run(Resume(mid, "approve"))
    finally:
        await other.aclose()


RESUMER = textwrap.dedent(
    """
    import asyncio, json, sys
    from artifactflow import Client, Resume, load_settings

    async def main():
        config, data, mid, mode = sys.argv[1:5]
        client = await Client.open(load_settings(config, data))
        try:
            if mode == "resume":
                result = await client.run(Resume(mid, "approve"))
            else:
                run = await client.runs.start(Resume(mid, "approve"))
                events = [e async for e in run]
                result = await run.result()
            print(json.dumps({"status": result.status, "response": result.response}))
        finally:
            await client.aclose()

    asyncio.run(main())
    """
)


def run_resumer(config: Path, data: Path, mid: str, mode: str = "resume") -> dict:
    out = fork_python(  # a process of its own, forked (tests/cli_fork.py)
        RESUMER, [str(config), str(data), mid, mode], dict(os.environ), ceiling(300)
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


async def test_resume_from_new_process(make_client, config, llm, journal, tmp_path):
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "remote"}, id="c1")])
    llm.script(Text("resumed elsewhere"))
    result = await asyncio.to_thread(
        run_resumer, config, client.settings.data_dir, events[-1].message_id
    )
    assert result == {"status": "completed", "response": "resumed elsewhere"}
    assert lines(journal) == ["remote"]


PAUSER = textwrap.dedent(
    """
    import asyncio, os, sys
    from artifactflow import Client, load_settings

    async def main():
        config, data = sys.argv[1:3]
        client = await Client.open(load_settings(config, data))
        async for event in await client.runs.start("write"):
            if event.type == "permission_request":
                print(event.message_id, flush=True)
                os._exit(9)  # die without any cleanup, as if killed

    asyncio.run(main())
    """
)


async def test_process_killed_after_pause_then_resumed(make_client, config, llm, journal, tmp_path):
    data = tmp_path / "data"
    llm.script(ToolCalls([Call("append_line", {"text": "survivor"}, id="c1")]))
    out = await asyncio.to_thread(  # a process of its own, forked (tests/cli_fork.py)
        fork_python, PAUSER, [str(config), str(data)], dict(os.environ), ceiling(300)
    )
    assert out.returncode == 9, out.stderr
    mid = out.stdout.strip().splitlines()[-1]
    client = await make_client(config_dir=config, data_dir=data)
    assert [m["id"] for m in await client.runs.pending()] == [mid]
    llm.script(Text("back"))
    result = await client.run(Resume(mid, "approve"))
    assert result.status == "completed" and result.response == "back"
    assert lines(journal) == ["survivor"]


async def test_process_dies_after_approval_tool_runs_once(make_client, config, llm, journal, tmp_path):
    """Approved, then the process is killed while the run is in flight (after the tool ran,
    before the next checkpoint's model answer): recovery continues without re-running it."""
    client = await make_client(config_dir=config)
    events = await pause(client, llm, [Call("append_line", {"text": "exactly-once"}, id="c1")])
    mid = events[-1].message_id
    data = client.settings.data_dir
    await client.aclose()
    llm.script(Delay(30, Text("never delivered")))
    env = dict(os.environ, ARTIFACTFLOW_RUN__LEASE_SECONDS="2")
    proc = await fork_python_async(RESUMER, [str(config), str(data), mid, "resume"], env)
    try:
        await wait_until(lambda: lines(journal), what="the journal line")
        assert lines(journal) == ["exactly-once"]
        # Kill only once the next model call has consumed the delayed reply: before that, the
        # reply would still be queued and answer the recovery below instead.
        await wait_until(lambda: llm.remaining == 0, what="the delayed reply consumed")
    finally:
        proc.kill()
        await proc.wait()
    second = await make_client(config_dir=config, data_dir=data)
    message = await second.admin.store.get_message(mid)
    assert message["status"] == "running"
    with pytest.raises(ResumeConflictError):  # lease still valid: the owner may be alive
        await second.run(Resume(mid, "approve"))
    second.admin.clock = lambda: time.time() + 3  # the dead owner's lease has expired
    llm.clear_routes()
    llm.script(Text("recovered"))
    result = await second.run(Resume(mid, "approve"))
    assert result.status == "completed" and result.response == "recovered"
    assert lines(journal) == ["exactly-once"]
