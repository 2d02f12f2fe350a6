"""Runs: streaming in three modes, wait, a human-in-the-loop interrupt and its resume,
state and history, join_stream with Last-Event-ID, cancel, and the four multitask strategies."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from .conftest import Server
from .helpers import (
    approve,
    collect,
    events,
    human,
    last_ai,
    messages_of,
    text_of,
    wait_for_status,
    wait_for_thread,
)
from .toy import NOTES


def _id_key(event_id: str) -> tuple[int, ...]:
    """An event id as numbers to compare: ours are integers, LangGraph's "<ms>-<seq>"."""
    return tuple(int(part) for part in event_id.split("-") if part.isdigit())


async def test_stream_values_updates_messages(server: Server) -> None:
    thread = await server.client.threads.create()
    parts = await collect(server.client.runs.stream(
        thread["thread_id"], server.assistant_id, input=human("hello there"),
        stream_mode=["values", "updates", "messages-tuple"],
    ))
    assert parts[0].event == "metadata"
    assert {"run_id", "attempt"} <= set(parts[0].data)
    names = {p.event for p in parts}
    assert {"values", "updates", "messages"} <= names, names
    assert "error" not in names

    values = events(parts, "values")
    assert all(isinstance(v, dict) for v in values)
    final = values[-1]
    answer = last_ai(final)
    assert messages_of(final)[0]["type"] == "human"
    assert text_of(messages_of(final)[0]) == "hello there"

    updates = events(parts, "updates")
    assert updates and all(isinstance(u, dict) and u for u in updates)

    tuples = events(parts, "messages")
    assert all(isinstance(t, list) and len(t) == 2 and isinstance(t[1], dict) for t in tuples)
    chunks = [t[0] for t in tuples if t[0].get("id") == answer["id"] or t[0].get("type") == "AIMessageChunk"]
    assert len(chunks) > 1, "the answer arrives in several token chunks"
    assert all(c["type"] == "AIMessageChunk" for c in chunks)
    assert "".join(text_of(c) for c in chunks) == text_of(answer)

    done = await server.client.threads.get(thread["thread_id"])
    assert done["status"] == "idle"
    assert text_of(last_ai(done["values"])) == text_of(answer)
    runs = await server.client.runs.list(thread["thread_id"])
    assert [r["run_id"] for r in runs] == [parts[0].data["run_id"]]
    assert runs[0]["status"] == "success"


async def test_input_as_langchain_type(server: Server) -> None:
    thread = await server.client.threads.create()
    result = await server.client.runs.wait(
        thread["thread_id"], server.assistant_id,
        input={"messages": [{"type": "human", "content": "hello again"}]},
    )
    assert isinstance(result, dict)
    assert text_of(messages_of(result)[0]) == "hello again"
    assert text_of(last_ai(result))


async def test_wait_and_join(server: Server) -> None:
    thread = await server.client.threads.create()
    run = await server.client.runs.create(thread["thread_id"], server.assistant_id, input=human("hello"))
    assert run["status"] in {"pending", "running", "success"}
    joined = await server.client.runs.join(thread["thread_id"], run["run_id"])
    assert text_of(last_ai(joined))
    assert (await server.client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"
    with pytest.raises(NotFoundError):
        await server.client.runs.get(thread["thread_id"], "1f000000-0000-6000-8000-000000000000")


async def test_interrupt_and_resume(server: Server) -> None:
    thread_id = (await server.client.threads.create())["thread_id"]
    parts = await collect(server.client.runs.stream(
        thread_id, server.assistant_id, input=human("write a note: buy milk"),
        stream_mode=["updates", "values"],
    ))
    run_id = parts[0].data["run_id"]
    interrupts = [u["__interrupt__"] for u in events(parts, "updates") if "__interrupt__" in u]
    assert len(interrupts) == 1 and len(interrupts[0]) == 1
    interrupt = interrupts[0][0]
    assert interrupt["id"]
    request = interrupt["value"]
    assert [a["name"] for a in request["action_requests"]] == ["write_note"]
    assert request["action_requests"][0]["args"] == {"text": "buy milk"}
    assert "description" in request["action_requests"][0]
    assert request["review_configs"][0]["action_name"] == "write_note"
    assert "approve" in request["review_configs"][0]["allowed_decisions"]

    assert (await server.client.runs.get(thread_id, run_id))["status"] == "success"
    thread = await server.client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    pending = [i for task in thread["interrupts"].values() for i in task]
    assert [i["id"] for i in pending] == [interrupt["id"]]
    state = await server.client.threads.get_state(thread_id)
    assert state["next"]
    assert [i["id"] for t in state["tasks"] for i in t["interrupts"]] == [interrupt["id"]]
    if server.local:
        assert NOTES == []  # nothing ran before the approval

    resumed = await collect(server.client.runs.stream(
        thread_id, server.assistant_id, command=approve(), stream_mode="values",
    ))
    assert resumed[0].event == "metadata" and "error" not in {p.event for p in resumed}
    final = await server.client.threads.get(thread_id)
    assert final["status"] == "idle" and not any(final["interrupts"].values())
    tools = [m for m in messages_of(final["values"]) if m["type"] == "tool"]
    assert len(tools) == 1 and "buy milk" in text_of(tools[0])
    assert text_of(last_ai(final["values"]))
    if server.local:
        assert NOTES == ["buy milk"]  # exactly one effect


async def test_state_and_history(server: Server) -> None:
    thread_id = (await server.client.threads.create())["thread_id"]
    await server.client.runs.wait(thread_id, server.assistant_id, input=human("hello one"))
    await server.client.runs.wait(thread_id, server.assistant_id, input=human("hello two"))
    state = await server.client.threads.get_state(thread_id)
    assert state["next"] == [] and state["checkpoint"]["checkpoint_id"]
    assert [text_of(m) for m in messages_of(state["values"]) if m["type"] == "human"] == [
        "hello one", "hello two"
    ]
    history = await server.client.threads.get_history(thread_id, limit=50)
    assert history and history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert all("values" in h and "next" in h and h["checkpoint"]["checkpoint_id"] for h in history)
    sizes = [len(messages_of(h["values"])) for h in history]
    assert sizes == sorted(sizes, reverse=True), "newest first"
    older = next(h for h in history if len(messages_of(h["values"])) == 2)
    at = await server.client.threads.get_state(thread_id, checkpoint_id=older["checkpoint"]["checkpoint_id"])
    assert len(messages_of(at["values"])) == 2


async def test_join_stream_from_start_and_middle(server: Server) -> None:
    thread_id = (await server.client.threads.create())["thread_id"]
    run = await server.client.runs.create(
        thread_id, server.assistant_id, input=human("hello"),
        stream_mode=["values", "updates", "messages-tuple"], stream_resumable=True,
    )
    # no stream_mode: the run's own modes, as useStream's joinStream asks
    everything = await collect(server.client.runs.join_stream(
        thread_id, run["run_id"], last_event_id="-1"
    ))
    ids = [p.id for p in everything if p.event != "metadata"]
    assert ids and all(ids), [(p.event, p.id) for p in everything]
    keys = [_id_key(i) for i in ids]
    assert keys == sorted(keys), "ids increase"
    if server.local:
        # LangGraph's in-memory dev server gives two events of one millisecond the same id
        # ("<ms>-0"), so a reconnect after the first would lose the second; ours are unique.
        assert len(set(ids)) == len(ids)
    assert {"values", "updates"} <= {p.event for p in everything}, [(p.event, p.id) for p in everything]
    middle = next(
        i for i in range(len(everything) // 2, len(everything))
        if everything[i].id and ids.count(everything[i].id) == 1
    )
    tail = await collect(server.client.runs.join_stream(
        thread_id, run["run_id"], last_event_id=everything[middle].id
    ))
    # artifactflow streams token chunks live only (they are never stored, docs/agent-protocol.md):
    # a join that comes after them gets every other frame again, and the whole message follows
    # in `values`/`updates`. The reference server keeps its token frames for a resumable run.
    def frames(parts: list[Any]) -> list[tuple[str, str]]:
        return [
            (p.event, p.id) for p in parts
            if p.event != "metadata" and not (server.local and p.event == "messages")
        ]

    assert frames(tail) == frames(everything[middle + 1:])


async def test_cancel_a_running_run(server: Server) -> None:
    thread_id = (await server.client.threads.create())["thread_id"]
    run = await server.client.runs.create(thread_id, server.assistant_id, input=human("slow please"))
    await wait_for_status(server.client, thread_id, run["run_id"], {"running"})
    await server.client.runs.cancel(thread_id, run["run_id"], wait=True)
    cancelled = await server.client.runs.get(thread_id, run["run_id"])
    assert cancelled["status"] == "interrupted"
    thread = await wait_for_thread(server.client, thread_id, {"idle", "interrupted", "error"})
    assert thread["status"] != "busy"


async def _busy_thread(server: Server) -> tuple[str, str]:
    thread_id = (await server.client.threads.create())["thread_id"]
    first = await server.client.runs.create(thread_id, server.assistant_id, input=human("slow first"))
    await wait_for_status(server.client, thread_id, first["run_id"], {"running"})
    return thread_id, first["run_id"]


async def test_multitask_reject(server: Server) -> None:
    thread_id, first = await _busy_thread(server)
    with pytest.raises(ConflictError):
        await server.client.runs.create(
            thread_id, server.assistant_id, input=human("hello"), multitask_strategy="reject"
        )
    await server.client.runs.join(thread_id, first)
    assert (await server.client.runs.get(thread_id, first))["status"] == "success"


async def test_multitask_enqueue(server: Server) -> None:
    thread_id, first = await _busy_thread(server)
    second = await server.client.runs.create(
        thread_id, server.assistant_id, input=human("hello after"), multitask_strategy="enqueue"
    )
    assert second["status"] == "pending"
    await server.client.runs.join(thread_id, second["run_id"])
    statuses = [(await server.client.runs.get(thread_id, r))["status"] for r in (first, second["run_id"])]
    assert statuses == ["success", "success"]
    values = (await server.client.threads.get_state(thread_id))["values"]
    humans = [text_of(m) for m in messages_of(values) if m["type"] == "human"]
    assert humans == ["slow first", "hello after"]


async def test_multitask_interrupt(server: Server) -> None:
    thread_id, first = await _busy_thread(server)
    second = await server.client.runs.create(
        thread_id, server.assistant_id, input=human("hello instead"), multitask_strategy="interrupt"
    )
    await server.client.runs.join(thread_id, second["run_id"])
    assert (await server.client.runs.get(thread_id, first))["status"] == "interrupted"
    assert (await server.client.runs.get(thread_id, second["run_id"]))["status"] == "success"
    humans = [
        text_of(m) for m in messages_of((await server.client.threads.get_state(thread_id))["values"])
        if m["type"] == "human"
    ]
    assert humans[-1] == "hello instead" and "slow first" in humans  # its checkpoints kept


async def test_multitask_rollback(server: Server) -> None:
    thread_id, first = await _busy_thread(server)
    second = await server.client.runs.create(
        thread_id, server.assistant_id, input=human("hello instead"), multitask_strategy="rollback"
    )
    await server.client.runs.join(thread_id, second["run_id"])
    try:
        status = (await server.client.runs.get(thread_id, first))["status"]
    except NotFoundError:
        status = "deleted"
    assert status in {"deleted", "interrupted"}
    assert (await server.client.runs.get(thread_id, second["run_id"]))["status"] == "success"
    humans = [
        text_of(m) for m in messages_of((await server.client.threads.get_state(thread_id))["values"])
        if m["type"] == "human"
    ]
    assert humans == ["hello instead"]  # the rolled-back run's state is gone


async def test_stream_after_thread_deleted_is_404(server: Server) -> None:
    thread_id = (await server.client.threads.create())["thread_id"]
    await server.client.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        await collect(server.client.runs.stream(thread_id, server.assistant_id, input=human("hello")))
    await asyncio.sleep(0)
