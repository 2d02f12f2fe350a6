"""Conversations and the event log: branching, replay, attach, bounded storage, cancel, PG."""

from __future__ import annotations

import asyncio
import os
import textwrap
import time
from pathlib import Path

import pytest
from cli_fork import fork_python
from conftest import make_config
from pg import fresh_database
from sample_tools import echo, guarded, sleepy
from scripted_llm import Call, Delay, Text, ToolCalls
from waiting import ceiling

from artifactflow import Client, NotFoundError, Resume, Task, load_settings, tool

TOOLS = [echo, guarded, sleepy]
NAMES = ["echo", "guarded", "sleepy"]


async def test_branching_histories(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(Text("answer A"), Text("answer B"), Text("answer B2"))
    a = await client.run("question A")
    b = await client.run(Task("question B", a.conversation_id))
    fork = await client.run(Task("question B2", a.conversation_id, parent_message_id=a.message_id))
    # B's request saw A; the fork saw A only, not B
    assert [m["content"] for m in llm.requests[1]["messages"][1:]] == ["question A", "answer A", "question B"]
    assert [m["content"] for m in llm.requests[2]["messages"][1:]] == ["question A", "answer A", "question B2"]
    tree = await client.conversations.tree(a.conversation_id)
    node_a = next(m for m in tree["messages"] if m["id"] == a.message_id)
    assert set(node_a["children"]) == {b.message_id, fork.message_id}
    active = [m["id"] for m in tree["messages"] if m["active"]]
    assert active == [a.message_id, fork.message_id]
    # continuing without a parent follows the active branch (the fork)
    llm.script(Text("answer C"))
    c = await client.run(Task("question C", a.conversation_id))
    assert (await client.admin.store.get_message(c.message_id))["parent_id"] == fork.message_id
    # a fork may name only its parent; an unknown parent creates nothing
    llm.script(Text("answer D"))
    d = await client.run(Task("question D", parent_message_id=a.message_id))
    assert d.conversation_id == a.conversation_id
    with pytest.raises(NotFoundError):
        await client.run(Task("orphan", parent_message_id="no-such-message"))
    assert len(await client.admin.store.list_conversations()) == 1
    # explicit no parent: a new root with no history
    llm.script(Text("root answer"))
    r = await client.run(Task("fresh start", a.conversation_id, parent_message_id=None))
    assert (await client.admin.store.get_message(r.message_id))["parent_id"] is None
    assert [m["role"] for m in llm.requests[-1]["messages"]] == ["system", "user"]


async def test_replay_equals_live_stream_minus_chunks(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("echo", {"text": "hi"})]), Text("final words"))
    live = [e async for e in await client.runs.start("go")]
    replay = await client.runs.events(live[0].message_id)
    strip = [e.model_dump() for e in live if e.type != "llm_chunk"]
    assert [e.model_dump() for e in replay] == strip
    complete = next(e for e in replay if e.type == "tool_complete")
    assert complete.data.result.data == "hi"
    llm_done = next(e for e in replay if e.type == "llm_complete")
    assert llm_done.data.usage.prompt_tokens > 0


async def test_attach_mid_run_from_event_id_no_loss_no_duplicates(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(
        ToolCalls([Call("echo", {"text": "1"})]),
        ToolCalls([Call("sleepy", {"seconds": 0.5})]),
        Text("the end", chunk_delay=0.05),
    )
    run = await client.runs.start("long task")
    mid = run.message_id
    seen_first: list[int] = []
    async for event in run:
        if event.type != "llm_chunk":
            seen_first.append(event.event_id)
        if len(seen_first) == 6:
            break  # a reader drops mid-run
    cursor = seen_first[-1]
    rest = [e async for e in await client.runs.get(mid, after_event_id=cursor)]
    stored = [e.event_id for e in rest if e.type != "llm_chunk"]
    assert stored[0] == cursor + 1
    assert seen_first + stored == list(range(1, stored[-1] + 1))
    assert rest[-1].type == "complete"
    # a reader attaching after completion replays everything and stops
    again = [e async for e in await client.runs.get(mid, after_event_id=0)]
    assert [e.event_id for e in again] == list(range(1, stored[-1] + 1))


async def test_checkpoints_kept_while_paused_deleted_on_completion(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("guarded", {"text": "x"})]))
    paused = await client.run("needs approval")
    assert paused.status == "waiting"
    assert await client.admin.checkpoints.has_checkpoint(paused.thread_id)
    llm.script(Text("done"))
    done = await client.run(Resume(paused.message_id, "approve"))
    assert done.status == "completed"
    assert not await client.admin.checkpoints.has_checkpoint(paused.thread_id)
    message = await client.admin.store.get_message(paused.message_id)
    assert message["checkpoints_deleted"] is True


async def test_keep_completed_setting_and_gc(tmp_path: Path, make_client, llm):
    config = make_config(tmp_path, lead_tools=NAMES, yaml_text="checkpoints:\n  keep_completed: true\n")
    client = await make_client(config_dir=config, extra_tools=TOOLS)
    llm.script(Text("kept"), ToolCalls([Call("guarded", {"text": "x"})]))
    done = await client.run("a")
    paused = await client.run("b")
    assert await client.admin.checkpoints.has_checkpoint(done.thread_id)
    report = await client.admin.gc(retention_hours=1)
    assert report["finished"] == [done.message_id] and report["abandoned"] == []
    assert not await client.admin.checkpoints.has_checkpoint(done.thread_id)
    assert await client.admin.checkpoints.has_checkpoint(paused.thread_id)
    # with a zero retention window the idle paused message is abandoned
    client.admin.clock = lambda: time.time() + 1
    report = await client.admin.gc(retention_hours=0)
    assert report["abandoned"] == [paused.message_id]
    assert not await client.admin.checkpoints.has_checkpoint(paused.thread_id)
    assert (await client.admin.store.get_message(paused.message_id))["status"] == "failed"


async def test_cancel_mid_llm_records_partial_response(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(Text("this answer streams very slowly indeed", chunk_size=4, chunk_delay=0.1))
    run = await client.runs.start("slow")
    chunks = []
    async for event in run:
        if event.type == "llm_chunk":
            chunks.append(event.data.delta)
            if len(chunks) == 3:
                assert await run.cancel() is True
        if event.type == "cancelled":
            final = event
            break
    assert final.data.partial_response.startswith("".join(chunks[:3]))
    message = await client.admin.store.get_message(run.message_id)
    assert message["status"] == "cancelled" and message["response"].startswith("this")
    assert not await client.admin.checkpoints.has_checkpoint(run.thread_id)


async def test_cancel_during_tool(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("sleepy", {"seconds": 5})]))
    run = await client.runs.start("sleep")
    async for event in run:
        if event.type == "tool_start":
            started = time.monotonic()
            await run.cancel()
        if event.type == "cancelled":
            break
    assert time.monotonic() - started < 2
    assert (await client.admin.store.get_message(run.message_id))["status"] == "cancelled"


async def test_cancel_lets_a_non_cancellable_tool_finish(tmp_path: Path, make_client, llm):
    marker = tmp_path / "finished.txt"

    @tool(cancellable=False)
    async def commit_work(seconds: float) -> str:
        """Must not be torn in half."""
        await asyncio.sleep(seconds)
        marker.write_text("done")
        return "committed"

    client = await make_client(lead_tools=["commit_work"], extra_tools=[commit_work])
    llm.script(ToolCalls([Call("commit_work", {"seconds": 0.5})]))
    run = await client.runs.start("commit")
    async for event in run:
        if event.type == "tool_start":
            await run.cancel()
        if event.type == "cancelled":
            break
    assert marker.read_text() == "done"  # finished before the run stopped
    assert (await client.admin.store.get_message(run.message_id))["status"] == "cancelled"


KILLER = textwrap.dedent(
    """
    import asyncio, os, sys
    from artifactflow import Client, load_settings

    async def main():
        client = await Client.open(load_settings(sys.argv[1], sys.argv[2]))
        async for event in await client.runs.start("long"):
            if event.type == "tool_complete":
                print(event.message_id, flush=True)
                os._exit(9)

    asyncio.run(main())
    """
)


async def test_process_killed_mid_run_leaves_consistent_log_and_recoverable(tmp_path: Path, make_client, llm):
    config = make_config(tmp_path, lead_tools=["slow_echo"], yaml_text="plugins: [tools_mod]\n", plugin_files={
        "tools_mod.py": '''
            from artifactflow import tool

            @tool
            def slow_echo(text: str) -> str:
                """Echo."""
                return text
        '''})
    data = tmp_path / "data"
    llm.script(ToolCalls([Call("slow_echo", {"text": "a"})]))
    # The run goes on while the reader exits: hold its next model call so nothing but that
    # step's start can land after the tool's result.
    llm.route(lambda request: Delay(30, Text("never")) if any(
        m["role"] == "tool" for m in request["messages"]) else None)
    env = dict(os.environ, ARTIFACTFLOW_RUN__LEASE_SECONDS="2")
    out = await asyncio.to_thread(  # a process of its own, forked (tests/cli_fork.py)
        fork_python, KILLER, [str(config), str(data)], env, ceiling(300)
    )
    assert out.returncode == 9, out.stderr
    mid = out.stdout.strip().splitlines()[-1]
    client = await make_client(config_dir=config, data_dir=data)
    events = await client.runs.events(mid)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert "tool_complete" in types
    assert set(types[types.index("tool_complete") + 1:]) <= {"agent_start"}, types
    message = await client.admin.store.get_message(mid)
    assert message["status"] == "running"
    client.admin.clock = lambda: time.time() + 3  # the dead owner's lease has expired
    llm.clear_routes()
    llm.script(Text("recovered answer"))
    resumed = [e async for e in await client.runs.start(Resume(mid, "approve"))]
    assert resumed[-1].type == "complete" and resumed[-1].data.response == "recovered answer"
    all_ids = [e.event_id for e in await client.runs.events(mid)]
    assert all_ids == list(range(1, len(all_ids) + 1))


async def test_postgres_backend_end_to_end(tmp_path: Path, make_client, llm):
    async with fresh_database() as url:
        config = make_config(tmp_path, lead_tools=NAMES)
        settings = load_settings(config, tmp_path / "data", database_url=url)
        client = await Client.open(settings, extra_tools=TOOLS)
        try:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            assert isinstance(client.admin.checkpoints.saver, AsyncPostgresSaver)
            assert client.admin.store.engine.dialect.name == "postgresql"
            llm.script(ToolCalls([Call("echo", {"text": "pg"})]), ToolCalls([Call("guarded", {"text": "y"})]))
            paused = await client.run("on postgres")
            assert paused.status == "waiting"
            assert await client.admin.checkpoints.has_checkpoint(paused.thread_id)
        finally:
            await client.aclose()
        # resume in a new client (as another process would)
        client = await Client.open(settings, extra_tools=TOOLS)
        try:
            llm.script(Text("pg done"))
            done = await client.run(Resume(paused.message_id, "approve"))
            assert done.status == "completed" and done.response == "pg done"
            assert not await client.admin.checkpoints.has_checkpoint(paused.thread_id)
            ids = [e.event_id for e in await client.runs.events(paused.message_id)]
            assert ids == list(range(1, len(ids) + 1))
        finally:
            await client.aclose()
        assert not (tmp_path / "data" / "checkpoints.db").exists()
