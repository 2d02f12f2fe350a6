"""Delegation: the lead calls subagents (alone or in parallel); each runs its own tool rounds."""

from __future__ import annotations

import threading
import time

from scripted_llm import Call, Delay, Error, Text, ToolCalls

from artifactflow import Task, tool


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


SUBS = {"search_agent": ["lookup"], "crawl_agent": ["lookup"]}
LEAD_TOOLS = ["call_subagent", "lookup", "create_artifact"]


def agent_of(request: dict) -> str:
    system = request["messages"][0]["content"]
    for name in ("search_agent", "crawl_agent"):
        if system.startswith(f"You are {name}"):
            return name
    return "lead"


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def requests_of(llm, agent: str) -> list[dict]:
    return [r for r in llm.requests if agent_of(r) == agent]


def by_agent(llm, answers: dict[str, list]) -> None:
    """Answer each agent from its own queue (agents call concurrently)."""
    lock = threading.Lock()

    def route(request: dict):
        with lock:
            queue = answers.get(agent_of(request))
            return queue.pop(0) if queue else None

    llm.route(route)


async def test_delegation_round_trip(make_client, llm):
    client = await make_client(lead_tools=LEAD_TOOLS, subagents=SUBS, extra_tools=[lookup])
    by_agent(llm, {
        "lead": [
            ToolCalls([Call("call_subagent", {"agent_name": "search_agent", "instruction": "find cats"}, id="d1")]),
            Text("Cats are great."),
        ],
        "search_agent": [ToolCalls([Call("lookup", {"topic": "cats"})]), Text("Findings: cats purr [src]")],
    })
    result = await client.run("tell me about cats")
    assert result.status == "completed" and result.response == "Cats are great."
    sub_requests = requests_of(llm, "search_agent")
    assert sub_requests[0]["messages"][1] == {"role": "user", "content": "find cats"}
    assert tool_messages(sub_requests[1])[0]["content"] == "facts about cats"
    lead_last = requests_of(llm, "lead")[-1]
    assert tool_messages(lead_last) == [
        {"role": "tool", "tool_call_id": "d1", "content": "Findings: cats purr [src]"}
    ]
    types = [(e.type, e.agent) for e in result.events]
    assert ("subagent_start", "search_agent") in types and ("subagent_complete", "search_agent") in types
    sub_tools = [e for e in result.events if e.type == "tool_start" and e.agent == "search_agent"]
    assert sub_tools and sub_tools[0].data.invocation.startswith("search_agent:")
    # the lead's prompt lists the subagents from their descriptions
    assert "search_agent: search_agent does research" in requests_of(llm, "lead")[0]["messages"][0]["content"]


async def test_two_subagents_in_parallel_results_in_call_order(make_client, llm):
    client = await make_client(lead_tools=LEAD_TOOLS, subagents=SUBS, extra_tools=[lookup])
    arrivals: dict[str, float] = {}
    lock = threading.Lock()
    lead_answers = [
        ToolCalls([
            Call("call_subagent", {"agent_name": "search_agent", "instruction": "A"}, id="p1"),
            Call("call_subagent", {"agent_name": "crawl_agent", "instruction": "B"}, id="p2"),
        ]),
        Text("both done"),
    ]

    def route(request: dict):
        agent = agent_of(request)
        with lock:
            if agent == "lead":
                return lead_answers.pop(0)
            arrivals[agent] = time.monotonic()
        # search is slower, so a sequential run would return crawl first
        return Delay(0.6 if agent == "search_agent" else 0.2, Text(f"answer from {agent}"))

    llm.route(route)
    result = await client.run("parallel research")
    assert result.status == "completed"
    # Run one after the other, the second request would arrive >= 0.6 s after the first.
    assert abs(arrivals["search_agent"] - arrivals["crawl_agent"]) < 0.3  # both in flight together
    msgs = tool_messages(requests_of(llm, "lead")[-1])
    assert [m["tool_call_id"] for m in msgs] == ["p1", "p2"]
    assert [m["content"] for m in msgs] == ["answer from search_agent", "answer from crawl_agent"]
    invocations = {e.data.invocation for e in result.events if e.type == "subagent_start"}
    assert len(invocations) == 2


async def test_unknown_subagent_is_a_tool_error_listing_valid_names(make_client, llm):
    client = await make_client(lead_tools=LEAD_TOOLS, subagents=SUBS, extra_tools=[lookup])
    llm.script(
        ToolCalls([Call("call_subagent", {"agent_name": "wizard", "instruction": "magic"})]),
        Text("ok"),
    )
    result = await client.run("x")
    error = tool_messages(llm.requests[-1])[0]["content"]
    assert "unknown subagent 'wizard'" in error
    assert "search_agent" in error and "crawl_agent" in error
    assert result.status == "completed"


async def test_each_invocation_starts_with_clean_memory(make_client, llm):
    client = await make_client(lead_tools=LEAD_TOOLS, subagents=SUBS, extra_tools=[lookup])
    by_agent(llm, {
        "lead": [
            ToolCalls([Call("call_subagent", {"agent_name": "search_agent", "instruction": "first"})]),
            ToolCalls([Call("call_subagent", {"agent_name": "search_agent", "instruction": "second"})]),
            Text("done"),
        ],
        "search_agent": [
            ToolCalls([Call("lookup", {"topic": "one"})]),
            Text("first answer"),
            Text("second answer"),
        ],
    })
    result = await client.run("twice")
    assert result.status == "completed"
    second_call = requests_of(llm, "search_agent")[-1]
    assert [m["role"] for m in second_call["messages"]] == ["system", "user"]
    assert second_call["messages"][1]["content"] == "second"


async def test_failing_subagent_gives_error_result_others_still_answer(make_client, llm):
    client = await make_client(lead_tools=LEAD_TOOLS, subagents=SUBS, extra_tools=[lookup])
    by_agent(llm, {
        "lead": [
            ToolCalls([
                Call("call_subagent", {"agent_name": "search_agent", "instruction": "A"}, id="f1"),
                Call("call_subagent", {"agent_name": "crawl_agent", "instruction": "B"}, id="f2"),
            ]),
            Text("partial results"),
        ],
        "search_agent": [Error(400, "model refused")],
        "crawl_agent": [Text("crawl worked")],
    })
    result = await client.run("x")
    assert result.status == "completed"
    first, second = tool_messages(requests_of(llm, "lead")[-1])
    assert first["tool_call_id"] == "f1" and "failed" in first["content"] and "model refused" in first["content"]
    assert second == {"role": "tool", "tool_call_id": "f2", "content": "crawl worked"}


async def test_subagent_sees_instruction_and_plan_not_history(make_client, llm):
    client = await make_client(lead_tools=LEAD_TOOLS, subagents=SUBS, extra_tools=[lookup])
    llm.script(Text("first answer"))
    first = await client.run("secret earlier question")
    await client.admin.store.create_artifact(
        first.conversation_id, "task_plan", title="Plan", content="- [ ] step one", content_type="text/markdown"
    )
    by_agent(llm, {
        "lead": [
            ToolCalls([Call("call_subagent", {"agent_name": "search_agent", "instruction": "do step one"})]),
            Text("done"),
        ],
        "search_agent": [Text("step one done")],
    })
    await client.run(Task("follow-up", first.conversation_id))
    sub = requests_of(llm, "search_agent")[0]
    text = str(sub["messages"])
    assert "secret earlier question" not in text
    assert "- [ ] step one" in sub["messages"][0]["content"]
    lead = requests_of(llm, "lead")[-1]
    assert any(m.get("content") == "secret earlier question" for m in lead["messages"])
    assert "step one" in lead["messages"][0]["content"]  # plan in the inventory


async def test_mixed_round_regular_tool_and_subagent_results_in_order(make_client, llm):
    client = await make_client(lead_tools=LEAD_TOOLS, subagents=SUBS, extra_tools=[lookup])
    by_agent(llm, {
        "lead": [
            ToolCalls([
                Call("call_subagent", {"agent_name": "search_agent", "instruction": "A"}, id="m1"),
                Call("lookup", {"topic": "dogs"}, id="m2"),
            ]),
            Text("done"),
        ],
        "search_agent": [Text("sub answer")],
    })
    result = await client.run("mixed")
    assert result.status == "completed"
    msgs = tool_messages(requests_of(llm, "lead")[-1])
    assert [(m["tool_call_id"], m["content"]) for m in msgs] == [
        ("m1", "sub answer"),
        ("m2", "facts about dogs"),
    ]
