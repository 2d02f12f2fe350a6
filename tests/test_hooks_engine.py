"""Hooks in real runs: every point fires once per step, in order, with typed objects; and
what an interceptor changes is what the model, the tools and the event log see."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import make_config
from hooks_recorder import SUB, Recorder, by_agent, lookup, open_client
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Resume, tool
from artifactflow.hooks import (
    AgentStep,
    AgentStepEnd,
    Hooks,
    ModelRequest,
    ModelResponse,
    Refuse,
    RunEnd,
    RunInfo,
    ToolCall,
    ToolOutcome,
    ToolRound,
)
from artifactflow.tools.base import ToolResult

MODEL = ("before_model_request", "on_model_start", "after_model_request", "on_model_end")


def model_points(agent: str, round_: int) -> list[tuple]:
    return [(p, agent, round_) for p in MODEL]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return make_config(tmp_path, lead_tools=["call_subagent", "lookup"], subagents={SUB: ["lookup"]})


async def test_every_point_fires_once_per_step_in_order_with_typed_objects(config, tmp_path, llm_env):
    llm = llm_env
    by_agent(llm, {
        "lead": [
            ToolCalls([Call("lookup", {"topic": "a"}, id="l1")]),
            ToolCalls([  # a parallel round: two tools and a subagent
                Call("lookup", {"topic": "b"}, id="l2"),
                Call("lookup", {"topic": "c"}, id="l3"),
                Call("call_subagent", {"agent_name": SUB, "instruction": "dig"}, id="d1"),
            ]),
            Text("final answer"),
        ],
        SUB: [ToolCalls([Call("lookup", {"topic": "d"}, id="s1")]), Text("sub answer")],
    })
    recorder = Recorder()
    client = await open_client(config, tmp_path / "data", [recorder])
    try:
        result = await client.run("research cats")
    finally:
        await client.aclose()
    assert result.status == "completed" and result.response == "final answer"
    seen = recorder.seen()

    # the parallel round's calls run concurrently: check each call's own order, then
    # compare the rest of the sequence with that block in call order
    start = seen.index(("on_tool_round_start", "lead", 2, ("l2", "l3", "d1")))
    end = seen.index(("after_tool_round", "lead", 2, ("l2", "l3")))
    block = seen[start + 1:end]
    for call_id in ("l2", "l3"):
        mine = [p for p in block if p[1] == call_id]
        assert mine == [("on_tool_start", call_id), ("after_tool_call", call_id), ("on_tool_end", call_id)]
    assert len(block) == 6
    seen[start + 1:end] = [(p, c) for c in ("l2", "l3") for p in ("on_tool_start", "after_tool_call", "on_tool_end")]

    assert seen == [
        ("before_run", "research cats"),
        ("on_run_start", "new"),
        ("on_agent_start", "lead", 1), *model_points("lead", 1), ("before_tool_call", "l1"),
        ("on_agent_end", "lead", 1, None),
        ("on_tool_round_start", "lead", 1, ("l1",)),
        ("on_tool_start", "l1"), ("after_tool_call", "l1"), ("on_tool_end", "l1"),
        ("after_tool_round", "lead", 1, ("l1",)),
        ("on_agent_start", "lead", 2), *model_points("lead", 2),
        ("before_tool_call", "l2"), ("before_tool_call", "l3"), ("before_tool_call", "d1"),
        ("on_agent_end", "lead", 2, None),
        ("on_tool_round_start", "lead", 2, ("l2", "l3", "d1")),
        ("on_tool_start", "l2"), ("after_tool_call", "l2"), ("on_tool_end", "l2"),
        ("on_tool_start", "l3"), ("after_tool_call", "l3"), ("on_tool_end", "l3"),
        ("after_tool_round", "lead", 2, ("l2", "l3")),  # the subagent's answer comes later
        ("on_agent_start", SUB, 1), *model_points(SUB, 1), ("before_tool_call", "s1"),
        ("on_agent_end", SUB, 1, None),
        ("on_tool_round_start", SUB, 1, ("s1",)),
        ("on_tool_start", "s1"), ("after_tool_call", "s1"), ("on_tool_end", "s1"),
        ("after_tool_round", SUB, 1, ("s1",)),
        ("on_agent_start", SUB, 2), *model_points(SUB, 2), ("on_agent_end", SUB, 2, "done"),
        ("after_tool_call", "d1"), ("on_tool_end", "d1"),  # the lead's round closes
        ("on_agent_start", "lead", 3), *model_points("lead", 3), ("on_agent_end", "lead", 3, "completed"),
        ("on_run_end", "completed"),
    ]

    # typed objects, with the run's ids everywhere
    runs = {args[0] for _, args in recorder.calls}
    assert all(isinstance(r, RunInfo) for r in runs)
    assert {(r.message_id, r.conversation_id, r.thread_id) for r in runs} == {
        (result.message_id, result.conversation_id, result.thread_id)
    }
    assert {r.content for r in runs} == {"research cats"} and {r.lead_agent for r in runs} == {"lead_agent"}
    for _, agent in recorder.args("on_agent_start"):
        assert isinstance(agent, AgentStep) and agent.model
    sub_steps = [a for _, a in recorder.args("on_agent_start") if a.name == SUB]
    assert {(a.instruction, a.tool_call_id) for a in sub_steps} == {("dig", "d1")}
    assert sub_steps[0].invocation.startswith(f"{SUB}:") and not sub_steps[0].is_lead
    _, agent, request = recorder.args("before_model_request")[0]
    assert isinstance(request, ModelRequest) and request.messages[0]["role"] == "system"
    assert request.messages[-1] == {"role": "user", "content": "research cats"}
    assert {t["function"]["name"] for t in request.tools} == {"call_subagent", "lookup"}
    _, agent, request, response = recorder.args("after_model_request")[0]
    assert isinstance(response, ModelResponse) and response.input_tokens > 0 and response.output_tokens > 0
    assert response.tool_calls == [{"id": "l1", "name": "lookup", "arguments": '{"topic": "a"}'}]
    calls = {c.id: c for _, c in recorder.args("before_tool_call")}
    assert all(isinstance(c, ToolCall) for c in calls.values())
    assert calls["l2"].arguments == {"topic": "b"} and calls["l2"].key == "lead/2/l2"
    assert calls["s1"].invocation == sub_steps[0].invocation and calls["s1"].agent == SUB
    results = {c.id: r for _, c, r in recorder.args("after_tool_call")}
    assert all(isinstance(r, ToolResult) for r in results.values())
    assert results["l3"].data == "facts about c" and results["d1"].data == "sub answer"
    ends = [o for (_, o) in recorder.args("on_tool_end")]
    assert all(isinstance(o, ToolOutcome) and o.result.success for o in ends)
    rounds = [r for (_, r) in recorder.args("after_tool_round")]
    assert all(isinstance(r, ToolRound) for r in rounds)
    assert [o.result.data for o in rounds[0].outcomes] == ["facts about a"]
    last_end = recorder.args("on_agent_end")[-1]
    assert isinstance(last_end[2], AgentStepEnd) and last_end[2].content == "final answer"
    (_, end), = recorder.args("on_run_end")
    assert end == RunEnd("completed", "final answer", "completed")


# --- mutation: what an interceptor changes is what everyone downstream sees ---------------------


@tool
def reveal(topic: str) -> str:
    """Returns a page with a secret in it."""
    return f"page on {topic}: key sk-ABCDEFGHIJKLMNOPQRSTUV and more"


ran: list[dict] = []


@tool
def shell(command: str) -> str:
    """Runs a command (never reached: policy refuses it)."""
    ran.append({"command": command})
    return "ran"


class Rewriter(Hooks):
    """Changes something at every mutable point."""

    async def before_model_request(self, run, agent, request):
        tools = [t for t in request.tools if t["function"]["name"] != "reveal"] if agent.round > 1 else request.tools
        return dataclasses.replace(request, tools=tools)

    async def after_model_request(self, run, agent, request, response):
        if response.content:
            return dataclasses.replace(response, content=response.content.upper())
        return None

    async def before_tool_call(self, run, call):
        if call.name == "lookup":
            return call.with_arguments({"topic": call.arguments["topic"] + " (checked)"})
        return None

    async def after_tool_call(self, run, call, result):
        if call.name == "lookup" and result.success:
            return dataclasses.replace(result, data=result.data + " [verified]")
        return None

    async def after_tool_round(self, run, round):
        return f"Round {round.round} done: {len(round.outcomes)} results."


async def test_mutations_reach_the_model_the_tools_and_the_log(tmp_path, llm_env):
    llm = llm_env
    config = make_config(
        tmp_path, lead_tools=["lookup", "reveal", "shell"],
        yaml_text="""
        hooks:
          tool_policy: {deny_tools: [shell]}
          redaction: {patterns: ['sk-[A-Za-z0-9]{20,}']}
        """,
    )
    ran.clear()
    llm.script(
        ToolCalls([
            Call("lookup", {"topic": "cats"}, id="c1"),
            Call("reveal", {"topic": "dogs"}, id="c2"),
            Call("shell", {"command": "rm -rf /"}, id="c3"),
        ]),
        Text("all done, see sk-ABCDEFGHIJKLMNOPQRSTUV"),
    )
    client = await open_client(config, tmp_path / "data", [Rewriter()], extra_tools=[lookup, reveal, shell])
    try:
        streamed = [e async for e in await client.runs.start("my key is sk-0123456789abcdefghijkl, look up cats")]
        stored = await client.conversations.message(streamed[0].message_id)
        history = await client.runs.events(stored["id"])
    finally:
        await client.aclose()
    assert streamed[-1].type == "complete"
    logged = json.dumps([e.model_dump(mode="json") for e in history])
    first, second = llm.requests
    # before_run (redaction): the original never reaches the model, the message or the log
    assert first["messages"][-1]["content"] == "my key is [REDACTED], look up cats"
    assert stored["content"] == "my key is [REDACTED], look up cats"
    assert "sk-0123456789" not in logged
    # before_tool_call: the tool received the rewritten arguments; the event says so
    tool_msgs = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert tool_msgs["c1"] == "facts about cats (checked) [verified]"  # after_tool_call too
    starts = {e.data.tool_call_id: e.data for e in history if e.type == "tool_start"}
    assert starts["c1"].arguments == {"topic": "cats (checked)"}
    # the assistant turn the model reads back carries the rewritten call too
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert '"cats (checked)"' in assistant["tool_calls"][0]["function"]["arguments"]
    # after_tool_call (redaction): the secret in a tool result never reaches the model or the log
    assert tool_msgs["c2"] == "page on dogs: key [REDACTED] and more"
    completes = {e.data.tool_call_id: e.data for e in history if e.type == "tool_complete"}
    assert "sk-ABCD" not in str(completes["c2"]) and completes["c2"].result.metadata["redacted"]
    # a refused call never runs, nobody is asked, and the model reads the reason
    assert ran == [] and "c3" not in starts
    assert tool_msgs["c3"].startswith("ERROR: refused: the tool 'shell' is not allowed by policy")
    assert completes["c3"].refused is True and completes["c3"].result.metadata["refused_by"] == "tool_policy"
    assert not [e for e in history if e.type == "permission_request"]
    # after_tool_round: the added message follows the round's tool results
    assert second["messages"][-1] == {"role": "user", "content": "Round 1 done: 3 results."}
    assert [m["role"] for m in second["messages"][-4:]] == ["tool", "tool", "tool", "user"]
    # before_model_request: the tool list sent was changed on the second call
    assert {t["function"]["name"] for t in first["tools"]} == {"lookup", "reveal", "shell"}
    assert {t["function"]["name"] for t in second["tools"]} == {"lookup", "shell"}
    # after_model_request: the answer redacted then rewritten is what is recorded, and no
    # delta of the original text was streamed
    assert streamed[-1].data.response == stored["response"] == "ALL DONE, SEE [REDACTED]"
    assert [e.data.content for e in history if e.type == "llm_complete"][-1] == "ALL DONE, SEE [REDACTED]"
    assert not [e for e in streamed if e.type == "llm_chunk"]
    assert "sk-ABCD" not in logged and "SK-ABCD" not in logged


class Confirmed(Hooks):
    async def before_tool_call(self, run, call):
        if call.name == "write_note":
            return call.with_arguments({"text": call.arguments["text"].replace("password", "p***")})
        return None


notes: list[str] = []


@tool(permission="confirm")
def write_note(text: str) -> str:
    """Writes a note (needs approval)."""
    notes.append(text)
    return "written"


async def test_the_rewrite_is_what_the_prompt_and_ledger_record_and_edits_meet_the_policy(tmp_path, llm_env):
    llm = llm_env
    config = make_config(
        tmp_path, lead_tools=["write_note"],
        yaml_text="""
        hooks:
          tool_policy:
            rules: [{tool: write_note, argument: text, deny: ['forbidden']}]
        """,
    )
    notes.clear()
    llm.script(
        ToolCalls([Call("write_note", {"text": "my password is x"}, id="w1"),
                   Call("write_note", {"text": "second"}, id="w2")]),
        Text("ok"),
    )
    recorder = Recorder()
    client = await open_client(config, tmp_path / "data", [Confirmed(), recorder], extra_tools=[write_note])
    try:
        paused = await client.run("write notes", user_id="u-1")
        assert paused.status == "waiting"
        assert [c["arguments"] for c in paused.pending_calls] == [{"text": "my p*** is x"}, {"text": "second"}]
        result = await client.run(Resume(paused.message_id, {
            "w1": "approve",
            "w2": {"action": "edit", "arguments": {"text": "something forbidden"}},
        }))
    finally:
        await client.aclose()
    assert result.status == "completed"
    assert notes == ["my p*** is x"]  # the edit was refused by policy: it never ran
    tool_msgs = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_msgs[0]["content"] == "written"
    assert tool_msgs[1]["content"].startswith("ERROR: refused: text 'something forbidden' matches a denied pattern")
    completes = {e.data.tool_call_id: e.data for e in result.events if e.type == "tool_complete"}
    assert completes["w2"].refused is True and "refused" not in completes["w1"].model_fields_set
    segments = [(run.segment, run.user_id) for (run,) in recorder.args("on_run_start")]
    assert segments == [("new", "u-1"), ("resumed", "u-1")]
    (_, request), = recorder.args("on_permission_request")
    assert [(c.id, c.arguments, c.needs_approval, c.key) for c in request.calls] == [
        ("w1", {"text": "my p*** is x"}, True, "lead/1/w1"), ("w2", {"text": "second"}, True, "lead/1/w2"),
    ]
    (_, answer), = recorder.args("on_permission_result")
    assert [(d.tool_call_id, d.action, d.arguments) for d in answer.decisions] == [
        ("w1", "approve", None), ("w2", "edit", {"text": "something forbidden"}),
    ]


async def test_refusal_reaches_a_subagent_and_a_policy_on_web_fetch(tmp_path, llm_env):
    """The documented example: web_fetch outside the listed domains is refused; inside, it
    would run (here: no network, so only the refusal is exercised on a subagent's call)."""
    llm = llm_env
    config = make_config(
        tmp_path, lead_tools=["call_subagent"], subagents={SUB: ["web_fetch"]},
        yaml_text="""
        hooks:
          tool_policy:
            rules: [{tool: web_fetch, argument: url_list, domains: [python.org]}]
        """,
    )
    by_agent(llm, {
        "lead": [ToolCalls([Call("call_subagent", {"agent_name": SUB, "instruction": "fetch"}, id="d1")]), Text("done")],
        SUB: [ToolCalls([Call("web_fetch", {"url_list": ["https://evil.example/x"]}, id="f1")]), Text("could not fetch")],
    })
    client = await open_client(config, tmp_path / "data")
    try:
        result = await client.run("go")
    finally:
        await client.aclose()
    assert result.status == "completed"
    sub_last = [r for r in llm.requests if r["messages"][0]["content"].startswith(f"You are {SUB}")][-1]
    (tool_msg,) = [m for m in sub_last["messages"] if m["role"] == "tool"]
    assert "refused" in tool_msg["content"] and "outside python.org" in tool_msg["content"]
    assert not [e for e in result.events if e.type == "tool_start"]


class Never(Hooks):
    async def before_tool_call(self, run, call):
        return Refuse("not today")


async def test_a_refused_delegation_starts_no_subagent(tmp_path, llm_env):
    llm = llm_env
    config = make_config(tmp_path, lead_tools=["call_subagent"], subagents={SUB: []})
    llm.script(ToolCalls([Call("call_subagent", {"agent_name": SUB, "instruction": "x"}, id="d1")]), Text("fine"))
    client = await open_client(config, tmp_path / "data", [Never()])
    try:
        result = await client.run("go")
    finally:
        await client.aclose()
    assert result.status == "completed" and len(llm.requests) == 2
    assert not [e for e in result.events if e.type == "subagent_start"]
    tool_msg = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"][0]
    assert tool_msg["content"] == "ERROR: refused: not today"


class AnswerAfterTools(Hooks):
    """Force the tool first, then let the model answer (a weak model forced to a tool would
    call it again forever): what docs/local-models.md does for a 270M model."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    async def before_model_request(self, run, agent, request):
        self.seen.append(request.tool_choice)
        if request.messages[-1].get("role") == "tool":
            return dataclasses.replace(request, tool_choice="none")
        return None


async def test_a_hook_reads_and_changes_tool_choice(tmp_path, llm_env):
    from conftest import write_agent

    llm = llm_env
    config = make_config(tmp_path)
    forced = '{"type": "function", "function": {"name": "lookup"}}'
    write_agent(config / "agents", "lead_agent", role="lead", tools=["lookup"], prompt="You are the lead agent.",
                extra=f"tool_choice: {forced}\n")
    llm.script(ToolCalls([Call("lookup", {"topic": "cats"})]), Text("cats are fine"))
    hook = AnswerAfterTools()
    client = await open_client(config, tmp_path / "data", [hook])
    try:
        result = await client.run("tell me about cats")
    finally:
        await client.aclose()
    assert result.response == "cats are fine"
    first, second = llm.requests
    assert first["tool_choice"] == json.loads(forced) and second["tool_choice"] == "none"
    assert hook.seen == [json.loads(forced), json.loads(forced)]  # the agent's choice, as sent
