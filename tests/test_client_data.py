"""The controller's data methods, which the HTTP and CLI layers use instead of the store:
deleting a conversation (runs, checkpoints, rows), ownership, tokens, listings, artifacts."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path

import pytest
from scripted_llm import Call, Text, ToolCalls

from artifactflow import NotFoundError, tool


@tool(permission="confirm")
async def guarded(text: str) -> str:
    """Needs approval."""
    return text


@tool
async def sleepy(seconds: float) -> str:
    """Sleep a while."""
    await asyncio.sleep(seconds)
    return "slept"


TOOLS = [guarded, sleepy]
NAMES = ["guarded", "sleepy", "create_artifact", "update_artifact"]
SRC = Path(__file__).resolve().parent.parent / "src"


def checkpoint_rows(controller, thread_id: str) -> int:
    """Rows for `thread_id` in the checkpoint file, counted on a separate connection."""
    with sqlite3.connect(controller.settings.checkpoint_db_path) as conn:
        return sum(
            conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = ?", (thread_id,)).fetchone()[0]
            for table in ("checkpoints", "writes")
        )


async def test_delete_conversation_with_paused_message_drops_checkpoints_and_rows(make_controller, llm):
    controller = await make_controller(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(Text("first answer"), ToolCalls([Call("guarded", {"text": "x"})]))
    done = await controller.execute("first")
    paused = await controller.execute("second", done.conversation_id)
    assert paused.status == "waiting"
    assert checkpoint_rows(controller, paused.thread_id) > 0
    assert [m["id"] for m in await controller.pending()] == [paused.message_id]

    await controller.delete_conversation(done.conversation_id)

    assert checkpoint_rows(controller, paused.thread_id) == 0
    assert checkpoint_rows(controller, done.thread_id) == 0
    for message_id in (done.message_id, paused.message_id):
        with pytest.raises(NotFoundError):
            await controller.get_message(message_id)
        with pytest.raises(NotFoundError):
            await controller.events(message_id)
        assert await controller.last_event_id(message_id) == 0  # its event rows are gone too
    with pytest.raises(NotFoundError):
        await controller.get_conversation(done.conversation_id)
    assert await controller.list_conversations() == []
    assert await controller.count_conversations() == 0
    assert await controller.pending() == []
    with pytest.raises(NotFoundError):
        await controller.delete_conversation(done.conversation_id)


async def test_delete_conversation_cancels_its_running_message(make_controller, llm):
    controller = await make_controller(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("sleepy", {"seconds": 30})]), Text("never"))
    ids = await controller.start("take your time")
    async for event in controller.follow(ids["message_id"], from_start=True):
        if event.type == "tool_start":
            break
    assert controller.active_run_count() == 1

    await controller.delete_conversation(ids["conversation_id"])

    assert controller.active_run_count() == 0
    assert checkpoint_rows(controller, ids["thread_id"]) == 0
    with pytest.raises(NotFoundError):
        await controller.get_message(ids["message_id"])
    assert await controller.count_conversations() == 0


async def test_ownership_tokens_listing_and_history(make_controller, llm):
    controller = await make_controller(lead_tools=NAMES, extra_tools=TOOLS)
    alice, alice_token = await controller.create_token("alice")
    bob, bob_token = await controller.create_token("bob")
    assert await controller.user_for_token(alice_token) == alice
    assert await controller.user_for_token(bob_token) == bob
    assert await controller.user_for_token("af_not-a-token") is None
    assert (await controller.create_token("alice"))[0] == alice  # the user is reused

    llm.script(Text("one"), Text("two"), Text("other"))
    a = await controller.execute("first", user_id=alice)
    b = await controller.execute("second", a.conversation_id, user_id=alice)
    await controller.execute("bob's", user_id=bob)

    assert await controller.count_conversations() == 2
    assert await controller.count_conversations(user_id=alice) == 1
    assert [c["id"] for c in await controller.list_conversations(user_id=alice)] == [a.conversation_id]
    assert len(await controller.list_conversations(limit=1, offset=1)) == 1
    # another user's resources answer exactly like missing ones
    with pytest.raises(NotFoundError):
        await controller.get_conversation(a.conversation_id, user_id=bob)
    with pytest.raises(NotFoundError):
        await controller.get_message(a.message_id, user_id=bob)
    with pytest.raises(NotFoundError):
        await controller.conversation_tree(a.conversation_id, user_id=bob)
    with pytest.raises(NotFoundError):
        await controller.delete_conversation(a.conversation_id, user_id=bob)
    assert (await controller.get_message(a.message_id, user_id=alice))["response"] == "one"

    messages = await controller.list_messages(a.conversation_id, user_id=alice)
    assert [m["id"] for m in messages] == [a.message_id, b.message_id]
    tree = await controller.conversation_tree(a.conversation_id)
    assert tree["roots"] == [a.message_id]
    assert [m["id"] for m in tree["messages"] if m["active"]] == [a.message_id, b.message_id]
    events = await controller.events(b.message_id)
    assert await controller.last_event_id(b.message_id) == events[-1].event_id > 0


async def test_artifact_reads(make_controller, llm, tmp_path: Path):
    controller = await make_controller(lead_tools=NAMES, extra_tools=TOOLS)
    llm.script(
        ToolCalls([Call("create_artifact", {"id": "notes", "title": "Notes", "content": "alpha\n"})]),
        ToolCalls([Call("update_artifact", {"id": "notes", "old_str": "alpha", "new_str": "beta"})]),
        Text("written"),
    )
    result = await controller.execute("write notes")
    cid = result.conversation_id
    assert [a["artifact_id"] for a in await controller.list_artifacts(cid)] == ["notes"]
    current = await controller.get_artifact(cid, "notes")
    assert (current["version"], current["content"]) == (2, "beta\n")
    assert (await controller.get_artifact(cid, "notes", 1))["content"] == "alpha\n"
    assert [v["version"] for v in await controller.artifact_versions(cid, "notes")] == [1, 2]
    diff = await controller.artifact_diff(cid, "notes", 1)
    assert "-alpha" in diff and "+beta" in diff
    assert (await controller.export_artifact(cid, "notes")).startswith("# Notes\n")
    path = await controller.export_artifact_to(tmp_path / "out" / "notes.md", cid, "notes", 1)
    assert "alpha" in path.read_text(encoding="utf-8")
    with pytest.raises(NotFoundError, match="notes"):
        await controller.get_artifact(cid, "missing")


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
