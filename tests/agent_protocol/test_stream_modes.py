"""Every stream mode as the reference emits it, on a turn that pauses for a tool and resumes:
no duplicate final `values`, `updates` per node, messages-tuple with the tool-calling AI message
and the tool message, `events` with chain start/end, `debug` with checkpoint/task/task_result,
`tasks` and `checkpoints`; an unknown mode is 422."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .conftest import Server
from .helpers import approve, collect, events, human

MODES = ["values", "updates", "messages-tuple", "events", "debug", "tasks", "checkpoints"]


def _no_repeated_values(parts: list[Any]) -> None:
    values = events(parts, "values")
    assert values
    assert all(a != b for a, b in zip(values, values[1:], strict=False)), "a values frame repeated"


async def test_all_modes_on_a_tool_turn(server: Server) -> None:
    client = server.client
    thread_id = (await client.threads.create())["thread_id"]
    asked = await collect(client.runs.stream(
        thread_id, server.assistant_id, input=human("write a note: milk"), stream_mode=MODES,
    ))
    resumed = await collect(client.runs.stream(
        thread_id, server.assistant_id, command=approve(), stream_mode=MODES,
    ))
    for parts in (asked, resumed):
        assert "error" not in {p.event for p in parts}
        assert all(p.id for p in parts if p.event != "metadata") or not server.local
        _no_repeated_values(parts)
        for update in events(parts, "updates"):
            assert isinstance(update, dict) and len(update) == 1

    # messages-tuple: the tool-calling AI message, with its calls as tool_call_chunks
    calling = [m for m, meta in events(asked, "messages") if m.get("tool_call_chunks")]
    assert calling, [m for m, _ in events(asked, "messages")]
    assert calling[-1]["tool_call_chunks"][0]["name"] == "write_note"
    tools = [(m, meta) for m, meta in events(resumed, "messages") if m.get("type") == "tool"]
    assert len(tools) == 1 and "milk" in str(tools[0][0]["content"])
    for _, meta in events(asked, "messages") + events(resumed, "messages"):
        assert {"langgraph_node", "langgraph_step"} <= set(meta)
    if server.local:
        assert all({"run_id", "thread_id"} <= set(meta) for _, meta in events(resumed, "messages"))

    # updates per node: the model turn that asked, then the tool round, then the answer
    asked_updates = [u for u in events(asked, "updates") if "__interrupt__" not in u]
    assert any(m.get("tool_calls") for u in asked_updates for w in u.values() for m in w["messages"])
    assert any("__interrupt__" in u for u in events(asked, "updates"))
    resumed_nodes = [next(iter(u)) for u in events(resumed, "updates")]
    assert len(resumed_nodes) >= 2 and resumed_nodes[0] != resumed_nodes[-1]

    # events: chain start/end besides the model's and the tool's
    kinds = {e["event"] for e in events(resumed, "events")}
    # (token chunks are live only: on a loaded machine a stream attached late may miss them,
    # so `on_chat_model_stream` is not required here; the model's end always comes)
    assert {"on_chain_start", "on_chain_end", "on_chat_model_end"} <= kinds, kinds
    assert {"on_chain_start", "on_chain_end"} <= {e["event"] for e in events(asked, "events")}

    # debug, tasks, checkpoints
    debug = {d["type"] for d in events(resumed, "debug")}
    assert {"checkpoint", "task", "task_result"} <= debug, debug
    tasks = events(resumed, "tasks")
    assert any("triggers" in t for t in tasks) and any("result" in t for t in tasks)
    checkpoints = events(resumed, "checkpoints")
    assert checkpoints and all(c["config"]["configurable"]["checkpoint_id"] for c in checkpoints)
    assert all("next" in c and "values" in c for c in checkpoints)
    if server.local:  # each streamed checkpoint reads back as the thread's state at that step
        last = checkpoints[-1]
        state = await client.threads.get_state(
            thread_id, checkpoint_id=last["config"]["configurable"]["checkpoint_id"]
        )
        assert state["values"] == last["values"]


async def test_an_unknown_stream_mode_is_422(server: Server) -> None:
    thread_id = (await server.client.threads.create())["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await collect(server.client.runs.stream(
            thread_id, server.assistant_id, input=human("hello"), stream_mode=["values", "nope"],
        ))
    assert refused.value.response.status_code == 422
    assert await server.client.runs.list(thread_id) == []
