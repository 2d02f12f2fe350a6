"""One decision per pending call (LangChain v1's human-in-the-loop shape): a pause with two
tool calls takes exactly two decisions, in order, or a mapping naming each call. A count that
differs is refused before anything runs (artifactflow: 422; LangGraph's middleware fails the
run instead); approve + reject runs exactly one call."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .conftest import Server
from .helpers import human, messages_of
from .toy import NOTES


async def _paused_on_two(server: Server) -> tuple[str, dict[str, Any]]:
    thread_id = (await server.client.threads.create())["thread_id"]
    await server.client.runs.wait(thread_id, server.assistant_id, input=human("write notes: a; b"))
    state = await server.client.threads.get_state(thread_id)
    interrupts = [i for task in state["tasks"] for i in task["interrupts"]]
    assert len(interrupts) == 1
    requests = interrupts[0]["value"]["action_requests"]
    assert [r["args"]["text"] for r in requests] == ["a", "b"]
    return thread_id, interrupts[0]


async def test_one_decision_for_two_calls_is_refused(server: Server) -> None:
    if not server.local:
        pytest.skip("the reference refuses inside the run (its middleware raises), not with a 422")
    thread_id, _ = await _paused_on_two(server)
    runs_before = await server.client.runs.list(thread_id)
    for resume in (
        {"decisions": [{"type": "approve"}]},
        {"decisions": [{"type": "approve"}] * 3},
        "approve",
        [{"type": "accept"}],
    ):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await server.client.runs.wait(thread_id, server.assistant_id, command={"resume": resume})
        assert refused.value.response.status_code == 422
        assert "2 action request" in refused.value.response.json()["detail"]
    assert NOTES == []  # nothing ran
    assert (await server.client.threads.get(thread_id))["status"] == "interrupted"
    assert await server.client.runs.list(thread_id) == runs_before


async def test_approve_and_reject_runs_exactly_one(server: Server) -> None:
    thread_id, _ = await _paused_on_two(server)
    out = await server.client.runs.wait(
        thread_id, server.assistant_id,
        command={"resume": {"decisions": [{"type": "approve"}, {"type": "reject", "message": "no"}]}},
    )
    tools = [m for m in messages_of(out) if m["type"] == "tool"]
    assert len(tools) == 2
    assert "'a'" in str(tools[0]["content"]) and "b" not in str(tools[0]["content"])
    if server.local:
        assert NOTES == ["a"]


async def test_decisions_keyed_by_tool_call_id(server: Server) -> None:
    if not server.local:
        pytest.skip("a mapping keyed by tool-call id is artifactflow's extension")
    thread_id, interrupt = await _paused_on_two(server)
    first, second = (r["tool_call_id"] for r in interrupt["value"]["action_requests"])
    await server.client.runs.wait(  # input {} beside the command, as agent-chat-ui resumes
        thread_id, server.assistant_id, input={},
        command={"resume": {second: {"type": "approve"}, first: {"type": "reject"}}},
    )
    assert NOTES == ["b"]
