"""The small ones: a cancelled run leaves no empty or partial AI message and the thread
`interrupted` (as LangGraph's server reports it until the next run);
a new background run reports `pending` before it starts; `graph_id` aliases agree in
assistant and thread searches; cancelling an ended run is 404."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import NotFoundError

from .conftest import Server
from .helpers import human, messages_of, wait_for_status, wait_for_thread


async def test_cancel_leaves_no_ai_message(server: Server) -> None:
    client = server.client
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, server.assistant_id, input=human("hello"))
    before = messages_of((await client.threads.get_state(thread_id))["values"])
    run = await client.runs.create(thread_id, server.assistant_id, input=human("slow please"))
    await wait_for_status(client, thread_id, run["run_id"], {"running"})
    await client.runs.cancel(thread_id, run["run_id"], wait=True)
    thread = await wait_for_thread(client, thread_id, {"idle", "interrupted", "error"})
    assert thread["status"] == "interrupted"
    assert not any(thread["interrupts"].values())  # not a pause: nothing to answer
    after = messages_of((await client.threads.get_state(thread_id))["values"])
    added = after[len(before):]
    assert all(m["type"] != "ai" for m in added), added
    with pytest.raises(NotFoundError):  # an ended run: nothing to cancel
        await client.runs.cancel(thread_id, run["run_id"])


async def test_cancel_mid_answer_leaves_no_partial_ai_message(server: Server) -> None:
    """Cancelled once the answer is streaming (as a busy machine makes the plain cancel above):
    the partial answer, kept by our own API, is no AI message of the thread's state."""
    client = server.client
    thread_id = (await client.threads.create())["thread_id"]
    stream = client.runs.stream(
        thread_id, server.assistant_id, input=human("slow please"), stream_mode="messages-tuple"
    )
    run_id = None
    async for part in stream:
        if part.event == "metadata":
            run_id = part.data["run_id"]
        elif part.event == "messages" and part.data[0].get("content"):
            break  # the answer is streaming
    assert run_id is not None
    await client.runs.cancel(thread_id, run_id, wait=True)
    await stream.aclose()
    await wait_for_thread(client, thread_id, {"idle", "interrupted", "error"})
    added = messages_of((await client.threads.get_state(thread_id))["values"])
    assert [m["type"] for m in added] == ["human"], added
    history = await client.threads.get_history(thread_id)
    assert all(m["type"] != "ai" for h in history for m in messages_of(h["values"])), history


async def test_a_new_run_is_pending_then_runs(server: Server) -> None:
    thread_id = (await server.client.threads.create())["thread_id"]
    run = await server.client.runs.create(thread_id, server.assistant_id, input=human("hello"))
    assert run["status"] == "pending"
    done = await server.client.runs.join(thread_id, run["run_id"])
    assert done
    assert (await server.client.runs.get(thread_id, run["run_id"]))["status"] == "success"


async def test_graph_id_aliases_agree(server: Server) -> None:
    if not server.local:
        pytest.skip("'agent' is artifactflow's alias of its lead graph")
    client = server.client
    by_alias = await client.assistants.search(graph_id="agent")
    assert [a["assistant_id"] for a in by_alias] == [server.assistant_id]
    assert await client.assistants.count(graph_id="agent") == 1
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "agent", input=human("hello"))
    meta = (await client.threads.get(thread_id))["metadata"]
    assert meta["graph_id"] == by_alias[0]["graph_id"]
    for name in ("agent", by_alias[0]["graph_id"]):
        found = await client.threads.search(metadata={"graph_id": name})
        assert [t["thread_id"] for t in found] == [thread_id]


async def test_every_replayed_frame_has_an_id(server: Server) -> None:
    client = server.client
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(
        thread_id, server.assistant_id, input=human("hello"), stream_mode=["values", "updates"],
        stream_resumable=True,
    )
    await client.runs.join(thread_id, run["run_id"])
    replayed = [p async for p in client.runs.join_stream(thread_id, run["run_id"], last_event_id="-1")]
    assert replayed and all(p.id for p in replayed), [(p.event, p.id) for p in replayed]
