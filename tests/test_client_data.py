"""The client's data nouns, which the HTTP and CLI layers use instead of the store:
deleting a conversation (runs, checkpoints, rows), ownership, tokens, listings, artifacts."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from sample_tools import guarded, sleepy
from scripted_llm import Call, Text, ToolCalls

from artifactflow import NotFoundError, Task

TOOLS = [guarded, sleepy]
NAMES = ["guarded", "sleepy", "create_artifact", "update_artifact"]
SRC = Path(__file__).resolve().parent.parent / "src"


def checkpoint_rows(client, thread_id: str) -> int:
    """Rows for `thread_id` in the checkpoint file, counted on a separate connection."""
    with sqlite3.connect(client.settings.checkpoint_db_path) as conn:
        return sum(
            conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = ?", (thread_id,)).fetchone()[0]
            for table in ("checkpoints", "writes")
        )


async def test_delete_conversation_with_paused_message_drops_checkpoints_and_rows(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(Text("first answer"), ToolCalls([Call("guarded", {"text": "x"})]))
    done = await client.run("first")
    paused = await client.run(Task("second", done.conversation_id))
    assert paused.status == "waiting"
    assert checkpoint_rows(client, paused.thread_id) > 0
    assert [m["id"] for m in await client.runs.pending()] == [paused.message_id]

    await client.conversations.delete(done.conversation_id)

    assert checkpoint_rows(client, paused.thread_id) == 0
    assert checkpoint_rows(client, done.thread_id) == 0
    for message_id in (done.message_id, paused.message_id):
        with pytest.raises(NotFoundError):
            await client.conversations.message(message_id)
        with pytest.raises(NotFoundError):
            await client.runs.events(message_id)
        assert await client.runs.last_event_id(message_id) == 0  # its event rows are gone too
    with pytest.raises(NotFoundError):
        await client.conversations.get(done.conversation_id)
    assert await client.conversations.list() == []
    assert await client.conversations.count() == 0
    assert await client.runs.pending() == []
    with pytest.raises(NotFoundError):
        await client.conversations.delete(done.conversation_id)


async def test_delete_conversation_cancels_its_running_message(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("sleepy", {"seconds": 30})]), Text("never"))
    run = await client.runs.start("take your time")
    async for event in run:
        if event.type == "tool_start":
            break
    assert client.admin.active_run_count() == 1

    await client.conversations.delete(run.conversation_id)

    assert client.admin.active_run_count() == 0
    assert checkpoint_rows(client, run.thread_id) == 0
    with pytest.raises(NotFoundError):
        await client.conversations.message(run.message_id)
    assert await client.conversations.count() == 0


async def test_ownership_tokens_listing_and_history(make_client, llm):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    alice, alice_token = await client.admin.create_token("alice")
    bob, bob_token = await client.admin.create_token("bob")
    assert await client.admin.user_for_token(alice_token) == alice
    assert await client.admin.user_for_token(bob_token) == bob
    assert await client.admin.user_for_token("af_not-a-token") is None
    assert (await client.admin.create_token("alice"))[0] == alice  # the user is reused

    llm.script(Text("one"), Text("two"), Text("other"))
    a = await client.run("first", user_id=alice)
    b = await client.run(Task("second", a.conversation_id), user_id=alice)
    await client.run("bob's", user_id=bob)

    assert await client.conversations.count() == 2
    assert await client.conversations.count(user_id=alice) == 1
    assert [c["id"] for c in await client.conversations.list(user_id=alice)] == [a.conversation_id]
    assert len(await client.conversations.list(limit=1, offset=1)) == 1
    # another user's resources answer exactly like missing ones
    with pytest.raises(NotFoundError):
        await client.conversations.get(a.conversation_id, user_id=bob)
    with pytest.raises(NotFoundError):
        await client.conversations.message(a.message_id, user_id=bob)
    with pytest.raises(NotFoundError):
        await client.conversations.tree(a.conversation_id, user_id=bob)
    with pytest.raises(NotFoundError):
        await client.conversations.delete(a.conversation_id, user_id=bob)
    assert (await client.conversations.message(a.message_id, user_id=alice))["response"] == "one"

    messages = await client.conversations.messages(a.conversation_id, user_id=alice)
    assert [m["id"] for m in messages] == [a.message_id, b.message_id]
    tree = await client.conversations.tree(a.conversation_id)
    assert tree["roots"] == [a.message_id]
    assert [m["id"] for m in tree["messages"] if m["active"]] == [a.message_id, b.message_id]
    events = await client.runs.events(b.message_id)
    assert await client.runs.last_event_id(b.message_id) == events[-1].event_id > 0


async def test_artifact_reads(make_client, llm, tmp_path: Path):
    client = await make_client(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(
        ToolCalls([Call("create_artifact", {"id": "notes", "title": "Notes", "content": "alpha\n"})]),
        ToolCalls([Call("update_artifact", {"id": "notes", "old_str": "alpha", "new_str": "beta"})]),
        Text("written"),
    )
    result = await client.run("write notes")
    cid = result.conversation_id
    assert [a["artifact_id"] for a in await client.artifacts.list(cid)] == ["notes"]
    current = await client.artifacts.get(cid, "notes")
    assert (current["version"], current["content"]) == (2, "beta\n")
    assert (await client.artifacts.get(cid, "notes", 1))["content"] == "alpha\n"
    assert [v["version"] for v in await client.artifacts.versions(cid, "notes")] == [1, 2]
    diff = await client.artifacts.diff(cid, "notes", 1)
    assert "-alpha" in diff and "+beta" in diff
    assert (await client.artifacts.export(cid, "notes")).startswith("# Notes\n")
    path = await client.artifacts.export_to(tmp_path / "out" / "notes.md", cid, "notes", 1)
    assert "alpha" in path.read_text(encoding="utf-8")
    with pytest.raises(NotFoundError, match="notes"):
        await client.artifacts.get(cid, "missing")


def test_interfaces_never_reach_into_the_store_or_checkpointer():
    pattern = re.compile(r"\.store\b|\.checkpoints\b|services\.store")
    offenders = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for folder in ("api", "cli")
        for path in sorted((SRC / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
