"""The memory tools in a real run: the scripted model over HTTP calls `memory_save` and
`memory_search`; what it saved survives a restart, is found by the facade, and is forgotten.
Also: the graph's `get_store()` is the memory store, and a save replayed saves once."""

from __future__ import annotations

import json

from conftest import make_config
from scripted_llm import Call, Text, ToolCalls

from artifactflow.memory import MemoryStore

TOOLS = ["memory_save", "memory_search"]


def tool_results(request: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_agent_saves_and_finds_a_memory_across_restart(make_client, llm, tmp_path):
    client = await make_client(lead_tools=TOOLS)
    llm.script(
        ToolCalls([Call("memory_save", {"text": "The user's dog is a golden retriever called Biscuit"})]),
        ToolCalls([Call("memory_save", {"text": "The user's dog is a golden retriever called Biscuit."})]),
        Text("noted"),
    )
    result = await client.run("remember my dog")
    assert result.status == "completed"
    saved, deduped = tool_results(llm.requests[1])[0], tool_results(llm.requests[2])[-1]
    assert saved["status"] == "saved" and saved["scope"] == "global"
    assert deduped["status"] == "deduped" and deduped["id"] == saved["id"]
    await client.aclose()

    again = await make_client(config_dir=tmp_path / "config")  # a new process on the same data
    found = await again.memories.search("what is my puppy's name", mode="hybrid", limit=3)
    assert found.mode == "hybrid" and found.hits[0].id == saved["id"]
    llm.script(ToolCalls([Call("memory_search", {"query": "pet puppy name"})]), Text("Biscuit"))
    await again.run("what is my dog called?")
    searched = tool_results(llm.requests[-1])[0]
    assert searched["mode"] == "hybrid" and searched["memories"][0]["text"].startswith("The user's dog")
    await again.memories.forget(saved["id"])
    assert (await again.memories.search("dog", limit=3)).hits == []


async def test_over_limit_text_is_a_tool_error_and_nothing_is_stored(make_client, llm, tmp_path):
    config = make_config(tmp_path, lead_tools=TOOLS, yaml_text="memory:\n  max_chars: 40\n")
    client = await make_client(config_dir=config)
    llm.script(ToolCalls([Call("memory_save", {"text": "x" * 41})]), Text("ok"))
    await client.run("save it")
    failed = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "at most 40 characters" in failed
    assert await client.memories.list() == []


async def test_conversation_scope_stays_in_its_conversation(make_client, llm):
    client = await make_client(lead_tools=TOOLS)
    llm.script(ToolCalls([Call("memory_save", {"text": "This chat's codename is Heron", "scope": "conversation"})]), Text("ok"))
    first = await client.run("remember the codename")
    llm.script(ToolCalls([Call("memory_search", {"query": "codename Heron"})]), Text("?"))
    await client.run("what's the codename?")  # another conversation
    assert tool_results(llm.requests[-1])[0]["memories"] == []
    llm.script(ToolCalls([Call("memory_search", {"query": "codename Heron"})]), Text("Heron"))
    from artifactflow import Task

    await client.run(Task("what's the codename?", conversation_id=first.conversation_id))
    assert tool_results(llm.requests[-1])[0]["memories"][0]["scope"] == "conversation"
    await client.conversations.delete(first.conversation_id)
    assert await client.memories.list() == []


async def test_graph_nodes_reach_the_store_with_get_store(make_client):
    client = await make_client()
    engine = client._engine
    assert isinstance(engine.graph.store, MemoryStore)
    assert engine.rt.graph.store is engine.services.extras["memory"].store is client.memories.store
