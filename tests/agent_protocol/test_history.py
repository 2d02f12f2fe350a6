"""A checkpoint per super-step: a turn with a tool call has its input, the model turn that
asked for the tool, the tool round and the answer, each with its parent; Regenerate
(`runs.create(checkpoint_id=<before the answer>, input=None)`) and Edit (a new input from the
checkpoint before a question) answer from that step, and the old branch stays reachable."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.errors import NotFoundError

from .conftest import Server
from .helpers import approve, human, messages_of, text_of
from .toy import ANSWER


def _chain(history: list[dict[str, Any]]) -> None:
    """Newest first: each state's parent is the state after it, steps count down by one."""
    ids = [h["checkpoint"]["checkpoint_id"] for h in history]
    assert len(set(ids)) == len(ids)
    for newer, older in zip(history, history[1:], strict=False):
        assert newer["parent_checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]
        assert newer["metadata"]["step"] == older["metadata"]["step"] + 1


async def test_a_tool_turn_has_a_checkpoint_per_step(server: Server) -> None:
    client = server.client
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, server.assistant_id, input=human("write a note: milk"))
    paused = await client.threads.get_history(thread_id, limit=100)
    _chain(paused)
    assert paused[0]["next"] and paused[0]["tasks"][0]["interrupts"]
    await client.runs.wait(thread_id, server.assistant_id, command=approve())
    history = await client.threads.get_history(thread_id, limit=100)
    _chain(history)
    with_messages = [h for h in history if messages_of(h["values"])]
    assert len(with_messages) >= 4, [len(messages_of(h["values"])) for h in history]
    kinds = [[m["type"] for m in messages_of(h["values"])] for h in reversed(with_messages)]
    assert kinds[-1] == ["human", "ai", "tool", "ai"]
    assert ["human", "ai"] in kinds and ["human", "ai", "tool"] in kinds
    assert history[0]["next"] == []
    asked = next(h for h in history if [m["type"] for m in messages_of(h["values"])] == ["human", "ai"])
    assert asked["next"], "after the model asked for a tool, the tool node runs next"
    assert messages_of(asked["values"])[-1]["tool_calls"]
    inputs = await client.threads.get_history(thread_id, limit=100, metadata={"source": "input"})
    assert inputs and all(h["metadata"]["source"] == "input" for h in inputs)
    assert len(inputs) < len(history)
    if server.local:  # LangGraph 1.x no longer fills metadata.writes; we still do
        writes = asked["metadata"]["writes"]
        assert any(messages_of(w)[-1].get("tool_calls") for w in writes.values())
        assert [h["next"] for h in with_messages] == [
            [], ["lead_agent"], ["tool_execution"], ["lead_agent"]
        ]
        assert [h["metadata"]["source"] for h in with_messages] == ["loop", "loop", "loop", "input"]
        # each step's state reads back by its id
        for h in with_messages:
            again = await client.threads.get_state(thread_id, checkpoint_id=h["checkpoint"]["checkpoint_id"])
            assert again["values"] == h["values"]


async def test_regenerate_and_edit_answer_from_that_step(server: Server, llm_env: Any) -> None:
    client = server.client
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, server.assistant_id, input=human("hello there"))
    history = await client.threads.get_history(thread_id, limit=100)
    answered = history[0]
    first_answer = messages_of(answered["values"])[-1]
    # agent-chat-ui's Regenerate: the checkpoint before the answer's first state, no input
    before_answer = answered["parent_checkpoint"]["checkpoint_id"]
    calls = len(llm_env.requests) if server.local else 0
    regenerated = await client.runs.wait(
        thread_id, server.assistant_id, input=None, checkpoint_id=before_answer
    )
    assert [m["type"] for m in messages_of(regenerated)] == ["human", "ai"]
    assert text_of(messages_of(regenerated)[0]) == "hello there"
    assert text_of(messages_of(regenerated)[-1]) == ANSWER
    if server.local:
        assert len(llm_env.requests) == calls + 1  # the model answered again
        assert messages_of(regenerated)[-1]["id"] != first_answer["id"]
    state = await client.threads.get_state(thread_id)
    assert [m["type"] for m in messages_of(state["values"])] == ["human", "ai"]

    # agent-chat-ui's Edit: a new question from the checkpoint before the old one
    question = next(h for h in history if [m["type"] for m in messages_of(h["values"])] == ["human"])
    before_question = question["parent_checkpoint"]["checkpoint_id"]
    edited = await client.runs.wait(
        thread_id, server.assistant_id, input=human("hello edited"), checkpoint_id=before_question
    )
    assert [text_of(m) for m in messages_of(edited) if m["type"] == "human"] == ["hello edited"]

    # the first branch is still there: its history and its state by checkpoint
    old = await client.threads.get_history(
        thread_id, checkpoint={"checkpoint_id": answered["checkpoint"]["checkpoint_id"]}, limit=100
    )
    assert old[0]["checkpoint"]["checkpoint_id"] == answered["checkpoint"]["checkpoint_id"]
    assert messages_of(old[0]["values"])[-1]["id"] == first_answer["id"]
    # without `checkpoint`, every branch's states, newest first (useStream's branch switcher)
    everything = await client.threads.get_history(thread_id, limit=100)
    assert text_of(messages_of(everything[0]["values"])[0]) == "hello edited"
    ids = {h["checkpoint"]["checkpoint_id"] for h in everything}
    assert answered["checkpoint"]["checkpoint_id"] in ids  # the first answer's branch
    assert before_answer in ids

    # retention: the states live as long as the thread; deleted, its checkpoints are 404
    await client.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        await client.threads.get_state(thread_id, checkpoint_id=before_answer)
    _chain([h for h in everything if h["checkpoint"]["checkpoint_id"] in {
        h2["checkpoint"]["checkpoint_id"] for h2 in old}])


async def test_ended_messages_are_built_once_and_reads_stay_current(server: Server) -> None:
    """An ended message's steps are kept between reads (protocol/renderings.py): a second
    read builds none again, says exactly what a build from the events says, and a message
    that was waiting shows its new steps once it ends."""
    client = server.client
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, server.assistant_id, input=human("write a note: milk"))
    paused = await client.threads.get_state(thread_id)
    assert paused["tasks"][0]["interrupts"]
    await client.runs.wait(thread_id, server.assistant_id, command=approve())
    ended = await client.threads.get_state(thread_id)
    assert [m["type"] for m in messages_of(ended["values"])] == ["human", "ai", "tool", "ai"]
    await client.runs.wait(thread_id, server.assistant_id, input=human("hello again"))
    history = await client.threads.get_history(thread_id, limit=100)
    for h in history:  # each state read alone (history.state_at) is the one history lists
        alone = await client.threads.get_state(thread_id, checkpoint_id=h["checkpoint"]["checkpoint_id"])
        assert alone == h
    if not server.local:
        return
    from artifactflow.protocol.renderings import CACHES

    first_id = ended["checkpoint"]["checkpoint_id"]
    cache = next(c for c in list(CACHES.values()) if any(k[0] == first_id for k in c.entries))
    hits, misses, loaded = cache.hits, cache.misses, cache.loaded
    again = await client.threads.get_history(thread_id, limit=100)
    assert cache.misses == misses and cache.hits >= hits + 2  # both messages, none built again
    assert again == history
    cache.clear()  # read from their stored renderings (ap_renderings): the same states
    assert await client.threads.get_history(thread_id, limit=100) == history
    assert cache.misses == misses and cache.loaded == loaded + 2
