"""The Agent Protocol driven by the real `langgraph_sdk` client against a real uvicorn server
(SQLite, real checkpoints, the scripted model over real HTTP)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_helpers import serving
from langgraph_sdk import get_client
from scripted_llm import Call, Delay, Error, Text, ToolCalls
from waiting import wait_until

from artifactflow import tool
from artifactflow.api.app import create_app

DEPLOYS: list[str] = []


@tool(permission="confirm")
async def deploy(target: str) -> str:
    """Deploy the service (needs a person's approval).

    Args:
        target: Where to deploy.
    """
    DEPLOYS.append(target)
    return f"deployed to {target}"


@pytest.fixture
async def server(make_client: Any) -> AsyncIterator[tuple[Any, Any]]:
    DEPLOYS.clear()
    af = await make_client(extra_tools=[deploy], lead_tools=["deploy", "create_artifact"])
    async with serving(create_app(client=af)) as url:
        yield get_client(url=url, api_key=None), af


async def parts(stream: Any) -> list[Any]:
    return [part async for part in stream]


async def test_meta_assistants_threads(server: Any, llm: Any) -> None:
    sdk, _ = server
    assistants = await sdk.assistants.search()
    assert [a["graph_id"] for a in assistants][0] == "lead_agent"
    assert (await sdk.assistants.get("lead_agent"))["assistant_id"] == "lead_agent"
    with pytest.raises(httpx.HTTPStatusError) as missing:
        await sdk.assistants.get("nope")
    assert missing.value.response.status_code == 404
    assert "detail" in missing.value.response.json()

    thread = await sdk.threads.create(metadata={"owner": "me"})
    assert thread["status"] == "idle" and thread["metadata"] == {"owner": "me"}
    fixed = await sdk.threads.create(thread_id="t-fixed")
    assert fixed["thread_id"] == "t-fixed"
    again = await sdk.threads.create(thread_id="t-fixed", if_exists="do_nothing")
    assert again["thread_id"] == "t-fixed"
    with pytest.raises(httpx.HTTPStatusError) as conflict:
        await sdk.threads.create(thread_id="t-fixed")
    assert conflict.value.response.status_code == 409
    patched = await sdk.threads.update(thread["thread_id"], metadata={"tag": "x"})
    assert patched["metadata"] == {"owner": "me", "tag": "x"}
    found = await sdk.threads.search(metadata={"tag": "x"})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]

    llm.script(Text("hello there", chunk_size=3))
    result = await sdk.runs.wait(
        thread["thread_id"], "lead_agent", input={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert [m["type"] for m in result["messages"]] == ["human", "ai"]
    assert result["messages"][-1]["content"] == "hello there"
    got = await sdk.threads.get(thread["thread_id"])
    assert got["status"] == "idle"
    assert (
        got["metadata"]["graph_id"] == "lead_agent"
        and got["metadata"]["assistant_id"] == "lead_agent"
    )
    assert [m["content"] for m in got["values"]["messages"]] == ["hi", "hello there"]
    assert [
        t["thread_id"] for t in await sdk.threads.search(metadata={"graph_id": "lead_agent"})
    ] == [thread["thread_id"]]
    await sdk.threads.delete("t-fixed")
    with pytest.raises(httpx.HTTPStatusError):
        await sdk.threads.get("t-fixed")


async def test_stream_three_modes_chunks_add_up(server: Any, llm: Any) -> None:
    sdk, _ = server
    thread = await sdk.threads.create()
    answer = "The quick brown fox jumps over the lazy dog."
    llm.script(Text(answer, chunk_size=4))
    got = await parts(
        sdk.runs.stream(
            thread["thread_id"],
            "lead_agent",
            input={"messages": [{"type": "human", "content": "tell me"}]},
            stream_mode=["values", "updates", "messages-tuple"],
        )
    )
    assert got[0].event == "metadata" and set(got[0].data) == {"run_id", "attempt"}
    tokens = [p.data[0] for p in got if p.event == "messages"]
    assert all(t["type"] == "AIMessageChunk" for t in tokens)
    assert "".join(t["content"] for t in tokens) == answer
    values = [p.data for p in got if p.event == "values"]
    assert values[-1]["messages"][-1]["content"] == answer
    assert values[-1]["messages"][-1]["id"] == tokens[0]["id"]  # chunks merge into the message
    updates = [p.data for p in got if p.event == "updates"]
    assert updates and updates[0]["lead_agent"]["messages"][0]["content"] == answer
    run = (await sdk.runs.list(thread["thread_id"]))[0]
    assert run["run_id"] == got[0].data["run_id"] and run["status"] == "success"


async def test_confirm_interrupt_and_resume_exactly_once(server: Any, llm: Any) -> None:
    sdk, _ = server
    thread = await sdk.threads.create()
    tid = thread["thread_id"]
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]), Text("deployed."))
    got = await parts(
        sdk.runs.stream(
            tid,
            "lead_agent",
            input={"messages": [{"role": "user", "content": "ship"}]},
            stream_mode=["updates", "values"],
        )
    )
    interrupts = [
        p.data["__interrupt__"] for p in got if p.event == "updates" and "__interrupt__" in p.data
    ]
    assert len(interrupts) == 1
    value = interrupts[0][0]["value"]
    assert value["action_requests"][0]["name"] == "deploy"
    assert value["action_requests"][0]["args"] == {"target": "prod"}
    assert value["action_requests"][0]["tool_call_id"] == "c1"
    assert value["review_configs"] == [
        {"action_name": "deploy", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    run_id = got[0].data["run_id"]
    assert (await sdk.runs.get(tid, run_id))["status"] == "success"
    state = await sdk.threads.get(tid)
    assert (
        state["status"] == "interrupted"
        and list(state["interrupts"].values())[0][0]["value"] == value
    )
    assert DEPLOYS == []

    resumed = await sdk.runs.wait(
        tid, "lead_agent", command={"resume": {"decisions": [{"type": "approve"}]}}
    )
    assert resumed["messages"][-1]["content"] == "deployed."
    assert DEPLOYS == ["prod"]
    with pytest.raises(httpx.HTTPStatusError) as again:
        await sdk.runs.wait(
            tid, "lead_agent", command={"resume": {"decisions": [{"type": "approve"}]}}
        )
    assert again.value.response.status_code == 409
    assert DEPLOYS == ["prod"]
    assert (await sdk.threads.get(tid))["status"] == "idle"
    types = [m["type"] for m in resumed["messages"]]
    assert types == ["human", "ai", "tool", "ai"]


async def test_agent_chat_ui_edit_and_reject_shapes(server: Any, llm: Any) -> None:
    sdk, _ = server
    tid = (await sdk.threads.create())["thread_id"]
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]), Text("edited"))
    await sdk.runs.wait(tid, "lead_agent", input={"messages": [{"role": "user", "content": "go"}]})
    await sdk.runs.wait(
        tid,
        "lead_agent",
        command={
            "resume": [
                {"type": "edit", "args": {"action": "deploy", "args": {"target": "staging"}}}
            ]
        },
    )
    assert DEPLOYS == ["staging"]
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c2")]), Text("ok, not deployed"))
    await sdk.runs.wait(
        tid, "lead_agent", input={"messages": [{"role": "user", "content": "again"}]}
    )
    out = await sdk.runs.wait(
        tid, "lead_agent", command={"resume": {"decisions": [{"type": "reject", "message": "no"}]}}
    )
    assert DEPLOYS == ["staging"]
    assert out["messages"][-1]["content"] == "ok, not deployed"
    # new input while paused closes the pause (nothing runs) and starts the new message
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c3")]), Text("moved on"))
    await sdk.runs.wait(tid, "lead_agent", input={"messages": [{"role": "user", "content": "3"}]})
    assert (await sdk.threads.get(tid))["status"] == "interrupted"
    out = await sdk.runs.wait(
        tid, "lead_agent", input={"messages": [{"role": "user", "content": "4"}]}
    )
    assert out["messages"][-1]["content"] == "moved on" and DEPLOYS == ["staging"]
    assert (await sdk.threads.get(tid))["status"] == "idle"


async def test_state_history_and_fork(server: Any, llm: Any) -> None:
    sdk, _ = server
    tid = (await sdk.threads.create())["thread_id"]
    llm.script(Text("one"), Text("two"), Text("forked"))
    await sdk.runs.wait(
        tid, "lead_agent", input={"messages": [{"role": "user", "content": "first"}]}
    )
    await sdk.runs.wait(
        tid, "lead_agent", input={"messages": [{"role": "user", "content": "second"}]}
    )
    state = await sdk.threads.get_state(tid)
    assert [m["content"] for m in state["values"]["messages"]] == ["first", "one", "second", "two"]
    history = await sdk.threads.get_history(tid)
    # newest first, a state per super-step: each turn's input, then its model turn
    assert [len(h["values"].get("messages", [])) for h in history] == [4, 3, 2, 1, 0]
    assert [h["next"] for h in history] == [[], ["lead_agent"], [], ["lead_agent"], []]
    assert [h["parent_checkpoint"]["checkpoint_id"] for h in history[:-1]] == [
        h["checkpoint"]["checkpoint_id"] for h in history[1:]
    ]
    assert history[-1]["parent_checkpoint"] is None
    first_cp = history[2]["checkpoint"]["checkpoint_id"]
    old = await sdk.threads.get_state(tid, checkpoint_id=first_cp)
    assert [m["content"] for m in old["values"]["messages"]] == ["first", "one"]
    forked = await sdk.runs.wait(
        tid,
        "lead_agent",
        input={"messages": [{"role": "user", "content": "other"}]},
        checkpoint_id=first_cp,
    )
    assert [m["content"] for m in forked["messages"]] == ["first", "one", "other", "forked"]
    # time travel: move the head back and the state follows
    await sdk.threads.update_state(
        tid, None, checkpoint_id=history[0]["checkpoint"]["checkpoint_id"]
    )
    assert len((await sdk.threads.get_state(tid))["values"]["messages"]) == 4
    with pytest.raises(httpx.HTTPStatusError) as bad:
        await sdk.threads.get_state(tid, checkpoint_id="nope")
    assert bad.value.response.status_code == 404
    # a state update appends finished turns (nothing runs); the next run answers after them
    turn = [{"role": "user", "content": "added"}, {"type": "ai", "content": "by hand"}]
    updated = await sdk.threads.update_state(tid, {"messages": turn}, as_node="lead_agent")
    state = await sdk.threads.get_state(tid)
    assert state["checkpoint"]["checkpoint_id"] == updated["checkpoint"]["checkpoint_id"]
    assert [m["content"] for m in state["values"]["messages"][-2:]] == ["added", "by hand"]
    llm.script(Text("after the update"))
    out = await sdk.runs.wait(
        tid, "lead_agent", input={"messages": [{"role": "user", "content": "next"}]}
    )
    assert [m["content"] for m in out["messages"]][-4:] == [
        "added",
        "by hand",
        "next",
        "after the update",
    ]
    assert "by hand" in json.dumps(llm.requests[-1])  # the model saw the added turn
    with pytest.raises(httpx.HTTPStatusError) as bad:
        await sdk.threads.update_state(tid, {"messages": [{"role": "assistant", "content": "x"}]})
    assert bad.value.response.status_code == 422


async def test_background_join_and_join_stream_from_start_and_middle(server: Any, llm: Any) -> None:
    sdk, _ = server
    tid = (await sdk.threads.create())["thread_id"]
    llm.script(
        ToolCalls([Call("create_artifact", {"id": "a", "title": "A", "content": "x"})]),
        Text("done"),
    )
    run = await sdk.runs.create(
        tid,
        "lead_agent",
        input={"messages": [{"role": "user", "content": "go"}]},
        stream_mode=["updates"],
    )
    assert run["status"] == "pending"  # as LangGraph answers a new run
    joined = await sdk.runs.join(tid, run["run_id"])
    assert joined["messages"][-1]["content"] == "done"
    full = await parts(
        sdk.runs.join_stream(
            tid, run["run_id"], stream_mode=["values", "custom"], last_event_id="-1"
        )
    )
    # every frame but the first (metadata) has an id `E-k`: the k-th frame since our event E
    frames = [p for p in full if p.event != "metadata"]
    keys = [tuple(int(x) for x in p.id.split("-")) for p in frames]
    assert keys == sorted(keys) and len(set(keys)) == len(keys) and len(keys) >= 3
    custom = [p.data["type"] for p in full if p.event == "custom"]
    assert "artifact_created" in custom and "complete" in custom
    assert full[0].event == "metadata" and frames[0].event == "values"  # the state it started from
    # from a middle frame (inside an event's group, and at a group's end), and by a plain event id
    for middle in (len(frames) // 2, len(frames) // 2 + 1):
        rest = await parts(
            sdk.runs.join_stream(
                tid,
                run["run_id"],
                stream_mode=["values", "custom"],
                last_event_id=frames[middle].id,
            )
        )
        assert [(p.event, p.id, p.data) for p in rest[1:]] == [
            (p.event, p.id, p.data) for p in frames[middle + 1 :]
        ]
    event_id = keys[len(keys) // 2][0]
    rest = await parts(
        sdk.runs.join_stream(
            tid, run["run_id"], stream_mode=["values", "custom"], last_event_id=str(event_id)
        )
    )
    assert [p.id for p in rest[1:]] == [
        p.id for p, k in zip(frames, keys, strict=True) if k[0] > event_id
    ]
    # without stream_mode a join uses the run's own modes (the SDK's reconnect via Location)
    async with httpx.AsyncClient(base_url=str(sdk.http.client.base_url)) as raw:
        again = (await raw.get(f"/threads/{tid}/runs/{run['run_id']}/stream")).text
    assert {line for line in again.splitlines() if line.startswith("event:")} == {
        "event: metadata",
        "event: updates",
    }


async def test_cancel_and_multitask_strategies(server: Any, llm: Any) -> None:
    sdk, af = server
    tid = (await sdk.threads.create())["thread_id"]
    human = {"messages": [{"role": "user", "content": "slow"}]}
    llm.script(Delay(5.0, Text("never")))
    slow = await sdk.runs.create(tid, "lead_agent", input=human)
    await wait_until(lambda: llm.remaining == 0)  # the slow model call has begun
    assert (await sdk.threads.get(tid))["status"] == "busy"
    # reject
    with pytest.raises(httpx.HTTPStatusError) as rejected:
        await sdk.runs.create(tid, "lead_agent", input=human, multitask_strategy="reject")
    assert rejected.value.response.status_code == 409
    # enqueue: pending until the first ends
    llm.script(Text("queued answer"))
    queued = await sdk.runs.create(
        tid,
        "lead_agent",
        input={"messages": [{"role": "user", "content": "q"}]},
        multitask_strategy="enqueue",
    )
    assert queued["status"] == "pending"
    # cancel the slow one: the queued one starts
    cancelled = await sdk.runs.cancel(tid, slow["run_id"], wait=True)
    assert cancelled["status"] == "interrupted"
    out = await sdk.runs.join(tid, queued["run_id"])
    assert out["messages"][-1]["content"] == "queued answer"
    assert (await sdk.runs.get(tid, queued["run_id"]))["status"] == "success"
    # interrupt: the running one stops interrupted, the new one runs
    llm.script(Delay(5.0, Text("never")))
    first = await sdk.runs.create(tid, "lead_agent", input=human)
    await wait_until(lambda: llm.remaining == 0)  # its model call has begun (not only the run)
    llm.script(Text("after interrupt"))
    second = await sdk.runs.wait(
        tid,
        "lead_agent",
        input={"messages": [{"role": "user", "content": "now"}]},
        multitask_strategy="interrupt",
    )
    assert second["messages"][-1]["content"] == "after interrupt"
    assert (await sdk.runs.get(tid, first["run_id"]))["status"] == "interrupted"
    assert "slow" in [m["content"] for m in second["messages"]]  # kept on the branch
    # rollback: the running one is discarded
    llm.script(Delay(5.0, Text("never")))
    third = await sdk.runs.create(
        tid, "lead_agent", input={"messages": [{"role": "user", "content": "doomed"}]}
    )
    await wait_until(lambda: llm.remaining == 0)
    llm.script(Text("after rollback"))
    fourth = await sdk.runs.wait(
        tid,
        "lead_agent",
        input={"messages": [{"role": "user", "content": "instead"}]},
        multitask_strategy="rollback",
    )
    assert "doomed" not in [m["content"] for m in fourth["messages"]]
    assert fourth["messages"][-1]["content"] == "after rollback"
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await sdk.runs.get(tid, third["run_id"])
    assert gone.value.response.status_code == 404


async def test_auth_isolation_with_api_key_and_bearer(make_client: Any, llm: Any) -> None:
    af = await make_client(yaml_text="auth:\n  enabled: true\n")
    _, alice = await af.admin.store.create_token("alice")
    _, bob = await af.admin.store.create_token("bob")
    async with serving(create_app(client=af)) as url:
        as_alice = get_client(url=url, api_key=alice)
        as_bob = get_client(url=url, headers={"Authorization": f"Bearer {bob}"})
        nobody = get_client(url=url, api_key=None)
        with pytest.raises(httpx.HTTPStatusError) as unauthorized:
            await nobody.threads.search()
        assert unauthorized.value.response.status_code == 401
        llm.script(Text("secret"))
        tid = (await as_alice.threads.create(metadata={"k": "v"}))["thread_id"]
        run = await as_alice.runs.create(
            tid, "lead_agent", input={"messages": [{"role": "user", "content": "x"}]}
        )
        await as_alice.runs.join(tid, run["run_id"])
        assert await as_bob.threads.search() == []
        for call in (
            as_bob.threads.get(tid),
            as_bob.threads.get_state(tid),
            as_bob.runs.get(tid, run["run_id"]),
            as_bob.runs.list(tid),
            as_bob.runs.join(tid, run["run_id"]),
            as_bob.runs.wait(
                tid, "lead_agent", input={"messages": [{"role": "user", "content": "y"}]}
            ),
            as_bob.runs.create(tid, "lead_agent", command={"resume": "approve"}),
            as_bob.runs.cancel(tid, run["run_id"]),
            as_bob.threads.get_history(tid),
            as_bob.threads.update_state(tid, None, checkpoint_id="root"),
            as_bob.threads.update(tid, metadata={"k": "bob"}),
            as_bob.threads.delete(tid),
            parts(as_bob.runs.join_stream(tid, run["run_id"])),
        ):
            with pytest.raises(httpx.HTTPStatusError) as hidden:
                await call
            assert hidden.value.response.status_code == 404
        # thread ids are a space per user (docs/agent-protocol.md): bob's `if_not_exists=
        # "create"` on alice's id makes his own thread of that id, and his run answers there
        llm.script(Text("bob's own"))
        answer = await as_bob.runs.wait(
            tid,
            "lead_agent",
            if_not_exists="create",
            input={"messages": [{"role": "user", "content": "y"}]},
        )
        assert "bob's own" in str(answer["messages"][-1]["content"])  # type: ignore[index]
        assert [t["thread_id"] for t in await as_bob.threads.search()] == [tid]
        # each now holds a thread of that id: re-creating it is the same 409 for each
        answers = []
        for who in (as_bob, as_alice):
            with pytest.raises(httpx.HTTPStatusError) as clash:
                await who.threads.create(thread_id=tid, metadata={"k": "bob"})
            answers.append((clash.value.response.status_code, clash.value.response.json()))
        assert answers[0] == answers[1] and answers[0][0] == 409
        mine = await as_alice.threads.search()
        assert [t["thread_id"] for t in mine] == [tid] and mine[0]["metadata"]["k"] == "v"
        assert await as_alice.assistants.search()


async def test_remaining_modes_threadless_and_errors(server: Any, llm: Any) -> None:
    sdk, _ = server
    llm.script(
        ToolCalls([Call("create_artifact", {"id": "n", "title": "N", "content": "x"})]),
        Text("all modes", chunk_size=3),
    )
    got = await parts(
        sdk.runs.stream(
            None,
            "lead_agent",
            input={"messages": [{"role": "user", "content": "modes"}]},
            stream_mode=["messages", "events", "custom", "debug"],
        )
    )
    names = {p.event for p in got}
    assert {
        "metadata",
        "messages/metadata",
        "messages/partial",
        "messages/complete",
        "events",
        "custom",
        "debug",
    } <= names
    partial = [p.data[0]["content"] for p in got if p.event == "messages/partial"]
    assert partial[-1] == "all modes"
    complete = [p.data[0] for p in got if p.event == "messages/complete"]
    assert complete[-1]["content"] == "all modes"
    kinds = [p.data["event"] for p in got if p.event == "events"]
    assert {
        "on_chat_model_start",
        "on_chat_model_stream",
        "on_chat_model_end",
        "on_tool_start",
        "on_tool_end",
    } <= set(kinds)
    custom = [p.data["type"] for p in got if p.event == "custom"]
    assert custom[-1] == "complete" and "artifact_created" in custom
    assert {p.data["type"] for p in got if p.event == "debug"} == {"checkpoint", "task", "task_result"}

    # threadless wait: a thread is made for the run
    llm.script(Text("no thread given"))
    out = await sdk.runs.wait(
        None, "lead_agent", input={"messages": [{"role": "user", "content": "x"}]}
    )
    assert out["messages"][-1]["content"] == "no thread given"

    # if_not_exists=create makes the named thread
    llm.script(Text("made"))
    out = await sdk.runs.wait(
        "named-thread",
        "lead_agent",
        if_not_exists="create",
        input={"messages": [{"role": "user", "content": "x"}]},
    )
    assert (await sdk.threads.get("named-thread"))["values"]["messages"][-1]["content"] == "made"
    with pytest.raises(httpx.HTTPStatusError) as missing:
        await sdk.runs.wait(
            "no-such-thread", "lead_agent", input={"messages": [{"role": "user", "content": "x"}]}
        )
    assert missing.value.response.status_code == 404

    # a failing model: an error event, the run `error`, the thread `error`
    tid = (await sdk.threads.create())["thread_id"]
    llm.script(Error(400, "bad request from the model"))
    failed = await parts(
        sdk.runs.stream(tid, "lead_agent", input={"messages": [{"role": "user", "content": "x"}]})
    )
    assert failed[-1].event == "error" and failed[-1].data["message"]
    assert (await sdk.runs.list(tid))[0]["status"] == "error"
    assert (await sdk.threads.get(tid))["status"] == "error"
    assert [t["thread_id"] for t in await sdk.threads.search(status="error")] == [tid]

    # validation: unknown assistant, bad input, bad strategy
    for kwargs, status in (
        ({"assistant_id": "nope", "input": {"messages": []}}, 404),
        ({"assistant_id": "lead_agent", "input": {"messages": []}}, 422),
        (
            {
                "assistant_id": "lead_agent",
                "input": {"messages": [{"role": "user", "content": "x"}]},
                "multitask_strategy": "sometimes",
            },
            422,
        ),
    ):
        with pytest.raises(httpx.HTTPStatusError) as bad:
            await sdk.runs.create(tid, **kwargs)
        assert bad.value.response.status_code == status
        assert "detail" in bad.value.response.json()


async def test_hitl_edit_rollback_cancel_delayed_run_and_get_history(server: Any, llm: Any) -> None:
    sdk, af = server
    tid = (await sdk.threads.create())["thread_id"]
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]), Text("edited it"))
    await sdk.runs.wait(tid, "lead_agent", input={"messages": [{"role": "user", "content": "go"}]})
    interrupt = (await sdk.threads.get_state(tid))["interrupts"][0]
    out = await sdk.runs.wait(
        tid,
        "lead_agent",
        command={
            "resume": {
                interrupt["id"]: {
                    "decisions": [
                        {
                            "type": "edit",
                            "edited_action": {"name": "deploy", "args": {"target": "canary"}},
                        }
                    ]
                }
            }
        },
    )
    assert DEPLOYS == ["canary"] and out["messages"][-1]["content"] == "edited it"
    tool_message = [m for m in out["messages"] if m["type"] == "tool"][0]
    assert tool_message["tool_call_id"] == "c1" and "canary" in tool_message["content"]

    # cancel with action=rollback: the run is gone and the head is back where it was
    head = (await sdk.threads.get_state(tid))["checkpoint"]["checkpoint_id"]
    llm.script(Delay(5.0, Text("never")))
    doomed = await sdk.runs.create(
        tid, "lead_agent", input={"messages": [{"role": "user", "content": "doomed"}]}
    )
    await wait_until(lambda: llm.remaining == 0)  # its model call has begun (not only the run)
    await sdk.runs.cancel(tid, doomed["run_id"], wait=True, action="rollback")
    assert (await sdk.threads.get_state(tid))["checkpoint"]["checkpoint_id"] == head
    assert doomed["run_id"] not in [r["run_id"] for r in await sdk.runs.list(tid)]
    with pytest.raises(httpx.HTTPStatusError) as ended:
        await sdk.runs.cancel(tid, (await sdk.runs.list(tid))[0]["run_id"])
    assert ended.value.response.status_code == 404  # as LangGraph's server: no active run by that id

    # a delayed run is pending, then runs
    llm.script(Text("later"))
    delayed = await sdk.runs.create(
        tid,
        "lead_agent",
        after_seconds=0.2,
        input={"messages": [{"role": "user", "content": "soon"}]},
    )
    assert delayed["status"] == "pending"
    assert (await sdk.runs.join(tid, delayed["run_id"]))["messages"][-1]["content"] == "later"

    # the thread's own stream joins its latest run; GET history as agent-chat-ui's lib calls it
    joined = await parts(
        await sdk.threads.join_stream(tid, stream_mode="values", last_event_id="-1")
    )
    assert joined[-1].data["messages"][-1]["content"] == "later"
    async with httpx.AsyncClient(base_url=str(sdk.http.client.base_url)) as raw:
        got = (await raw.get(f"/threads/{tid}/history", params={"limit": 2})).json()
    assert len(got) == 2 and got[0]["values"]["messages"][-1]["content"] == "later"


async def test_heartbeats_and_on_disconnect_cancel(make_client: Any, llm: Any) -> None:
    af = await make_client(yaml_text="server:\n  heartbeat_seconds: 0.05\n")
    async with serving(create_app(client=af)) as url:
        sdk = get_client(url=url, api_key=None)
        tid = (await sdk.threads.create())["thread_id"]
        llm.script(Delay(0.5, Text("after a pause")))
        body = {
            "assistant_id": "lead_agent",
            "input": {"messages": [{"role": "user", "content": "x"}]},
        }
        async with httpx.AsyncClient(base_url=url, timeout=10) as raw:
            text = (await raw.post(f"/threads/{tid}/runs/stream", json=body)).text
            assert ": ping" in text and "after a pause" in text
            # the client leaves mid-run with on_disconnect=cancel: the run is cancelled
            llm.script(Delay(5.0, Text("never")))
            async with raw.stream(
                "POST", f"/threads/{tid}/runs/stream", json={**body, "on_disconnect": "cancel"}
            ) as response:
                location = response.headers["location"]
                async for line in response.aiter_lines():
                    if line.startswith("event: metadata"):
                        break
        run_id = location.split("/")[-2]

        async def interrupted() -> bool:
            return (await sdk.runs.get(tid, run_id))["status"] == "interrupted"

        await wait_until(interrupted)


async def test_a_workflow_is_an_assistant(make_client: Any, llm: Any, tmp_path: Any) -> None:
    from wf_helpers import ByAgent, as_json, workflow_config

    shipped = (Path(__file__).parents[1] / "config" / "workflows" / "triage.yaml").read_text()
    agents = {"classifier": [], "bug_triager": [], "billing_agent": [], "support_agent": []}
    config = workflow_config(tmp_path, {"triage": shipped}, agents=agents)
    af = await make_client(config_dir=config)
    async with serving(create_app(client=af)) as url:
        sdk = get_client(url=url, api_key=None)
        assistants = {a["assistant_id"]: a for a in await sdk.assistants.search()}
        assert assistants["workflow:triage"]["graph_id"] == "workflow:triage"
        ByAgent(
            llm,
            {
                "classifier": [Text(as_json({"category": "billing", "summary": "s"}))],
                "billing_agent": [Text("refunded")],
            },
        )
        out = await sdk.runs.wait(None, "workflow:triage", input={"ticket": "charged twice"})
        assert out["messages"][-1]["content"] == "refunded"
        assert (await sdk.threads.search(metadata={"graph_id": "workflow:triage"}))[0][
            "status"
        ] == "idle"


async def test_a_text_plain_body_is_read_as_json(server: Any, llm: Any) -> None:
    """agent-chat-ui's API passthrough forwards bodies as text/plain."""
    sdk, _ = server
    async with httpx.AsyncClient(base_url=str(sdk.http.client.base_url)) as raw:
        response = await raw.post(
            "/threads",
            content=json.dumps({"metadata": {"via": "proxy"}}),
            headers={"Content-Type": "text/plain;charset=UTF-8"},
        )
        assert response.status_code == 200 and response.json()["metadata"] == {"via": "proxy"}
        bad = await raw.post(
            "/threads/search", content="{not json", headers={"Content-Type": "text/plain"}
        )
        assert bad.status_code == 422 and "detail" in bad.json()
