"""Nodes, routing and state merging on the in-process model: no sockets, no HTTP server.

The compiled graph runs with LangGraph's `InMemorySaver` and `Services` built around a
`ScriptedModel` and a temporary SQLite app store, exactly as the controller would run it,
minus the controller: each test reads the node sequence (with the phase each node set), the
node events, the interrupts and the final state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END
from langgraph.types import Command

from artifactflow import (
    AgentSpec,
    ContextOverflowError,
    ContextWindowExceeded,
    ExecutionPhase,
    ModelRequest,
    Reply,
    RunContext,
    ScriptedModel,
    Services,
    ToolCall,
    create_initial_state,
    load_settings,
    merge_agent_response_to_state,
    tool,
)
from artifactflow.agents.model import ModelPicker, ModelRegistry
from artifactflow.core.engine import builtin_tools
from artifactflow.core.graph import build_graph, route
from artifactflow.core.state import LEAD
from artifactflow.core.store.repository import AppStore
from artifactflow.tools.registry import ToolRegistry

NOTES: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@tool(permission="confirm")
def write_note(text: str) -> str:
    """Write a note (a side effect that needs the user's approval)."""
    NOTES.append(text)
    return f"noted {text!r}"


@dataclass
class Run:
    nodes: list[tuple[str, str | None]]  # (node, phase it set)
    events: list[dict[str, Any]]
    interrupts: list[Any]
    state: dict[str, Any]

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type_]


class Harness:
    def __init__(self, services: Services, model: ScriptedModel) -> None:
        self.services = services
        self.model = model
        self.graph = build_graph(InMemorySaver())
        self.config = {"configurable": {"thread_id": "thread-1"}, "recursion_limit": 100}

    async def run(self, graph_input: Any) -> Run:
        nodes: list[tuple[str, str | None]] = []
        events: list[dict[str, Any]] = []
        interrupts: list[Any] = []
        context = RunContext(self.services, "conversation-1", "message-1")
        async for mode, chunk in self.graph.astream(
            graph_input, self.config, context=context,
            stream_mode=["custom", "updates"], durability="sync",
        ):
            if mode == "custom":
                events.append(chunk.dump())  # an Emitted: its plain form
                continue
            for node, update in chunk.items():
                if node == "__interrupt__":
                    interrupts.extend(update)
                else:
                    nodes.append((node, (update or {}).get("phase")))
        state = (await self.graph.aget_state(self.config)).values
        return Run(nodes, events, interrupts, state)

    async def start(self, task: str = "the task") -> Run:
        return await self.run(create_initial_state(task))

    async def resume(self, run: Run, decisions: dict[str, Any]) -> Run:
        return await self.run(Command(resume={run.interrupts[0].id: decisions}))

    def requests_of(self, agent: str) -> list[ModelRequest]:
        return [r for r in self.model.requests if r.agent == agent]


Factory = Callable[..., Any]


@pytest_asyncio.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Factory]:
    config = tmp_path / "config"
    config.mkdir()
    (config / "artifactflow.yaml").write_text("tools:\n  max_result_chars: 500\n")
    stores: list[AppStore] = []
    NOTES.clear()

    async def factory(
        *replies: Any,
        function: Any = None,
        lead_tools: tuple[str, ...] = ("call_subagent", "add", "echo", "write_note"),
        max_tool_rounds: int = 10,
        sub_rounds: int = 10,
    ) -> Harness:
        settings = load_settings(config, tmp_path / "data")
        registry = ToolRegistry([*builtin_tools(), add, echo, write_note])
        agents = {
            "lead_agent": AgentSpec(name="lead_agent", role="lead", tools=lead_tools,
                                    max_tool_rounds=max_tool_rounds, prompt="You lead."),
            "search_agent": AgentSpec(name="search_agent", description="searches",
                                      tools=("echo", "write_note"), max_tool_rounds=sub_rounds),
            "crawl_agent": AgentSpec(name="crawl_agent", description="crawls", tools=("add",)),
        }
        store = await AppStore.open(None, sqlite_path=tmp_path / f"app{len(stores)}.db")
        stores.append(store)
        model = ScriptedModel(*replies, function=function)
        services = Services(
            settings=settings,
            agents=agents,
            models=ModelRegistry(env={}, credentials_required=False),
            tools=registry,
            llm=ModelPicker(settings.llm, fixed=model),
            store=store,
        )
        return Harness(services, model)

    yield factory
    for store in stores:
        await store.close()


def tool_messages(request: ModelRequest) -> list[dict[str, Any]]:
    return [m for m in request.messages if m["role"] == "tool"]


def delegate(agent: str, instruction: str, call_id: str) -> ToolCall:
    return ToolCall("call_subagent", {"agent_name": agent, "instruction": instruction}, id=call_id)


def by_agent(answers: dict[str, list[Any]]) -> Callable[[ModelRequest], Any]:
    """Each agent answers from its own queue (subagents step concurrently)."""

    def answer(request: ModelRequest) -> Any:
        queue = answers.get(request.agent or "")
        return queue.pop(0) if queue else None

    return answer


# --- the lead alone -------------------------------------------------------------------------


async def test_lead_answers_directly(harness):
    h = await harness(Reply("The answer is 42.", usage=None))
    run = await h.start("what is it?")
    assert run.nodes == [("lead_agent", "completed")]
    assert run.state["phase"] == ExecutionPhase.COMPLETED
    assert run.state["graph_response"] == "The answer is 42."
    assert run.state["outcome"] == "completed"
    assert [e["type"] for e in run.events] == (
        ["agent_start"] + ["llm_chunk"] * 3 + ["llm_complete", "agent_complete"]
    )
    assert "".join(e["data"]["delta"] for e in run.of("llm_chunk")) == "The answer is 42."
    complete = run.of("llm_complete")[0]["data"]
    # the model sent no usage: counted offline and marked so (issue 38), never a made-up 0
    assert complete["usage_estimated"] is True
    assert complete["usage"]["prompt_tokens"] > 0 and complete["usage"]["completion_tokens"] >= 4
    assert complete["model"] == "scripted" and complete["attempts"] == 1
    (request,) = h.model.requests
    assert request.agent == "lead_agent" and request.target.api == "chat_completions"
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert request.messages[-1]["content"] == "what is it?"
    assert "search_agent: searches" in request.messages[0]["content"]
    assert [t["function"]["name"] for t in request.tools or []] == [
        "call_subagent", "add", "echo", "write_note",
    ]


async def test_lead_calls_tools_and_gets_results_in_call_order(harness):
    h = await harness(
        Reply(tool_calls=[
            ToolCall("echo", {"text": "first"}, id="c1"),
            ToolCall("add", {"a": 2, "b": 3}, id="c2"),
            ToolCall("add", {"a": "many"}, id="c3"),
            ToolCall("echo", {"text": "x" * 900}, id="c4"),
        ]),
        Reply("done"),
    )
    run = await h.start()
    assert run.nodes == [
        ("lead_agent", "tool_executing"),
        ("tool_execution", "lead_executing"),
        ("lead_agent", "completed"),
    ]
    results = tool_messages(h.model.requests[1])
    assert [m["tool_call_id"] for m in results] == ["c1", "c2", "c3", "c4"]
    assert results[0]["content"] == "first" and results[1]["content"] == "5"
    assert results[2]["content"].startswith("ERROR") and "invalid arguments for 'add'" in results[2]["content"]
    assert results[3]["content"].startswith("x" * 500) and "truncated: showing 500 of 900" in results[3]["content"]
    memory = run.state["agent_memories"][LEAD]
    assert [m["role"] for m in memory] == ["assistant", "tool", "tool", "tool", "tool", "assistant"]
    assert memory[1:5] == results  # each result is stored once, in the lead's memory
    # calls run concurrently: events come in completion order, results in call order
    assert sorted(e["data"]["tool_call_id"] for e in run.of("tool_complete")) == ["c1", "c2", "c3", "c4"]
    assert run.state["graph_response"] == "done" and not run.state.get("pending_tool_calls")


async def test_duplicate_call_ids_from_the_provider_are_made_unique(harness):
    h = await harness(
        Reply(tool_calls=[ToolCall("echo", {"text": "a"}, id="call_0"),
                          ToolCall("echo", {"text": "b"}, id="call_0")]),
        Reply("ok"),
    )
    await h.start()
    assert [m["tool_call_id"] for m in tool_messages(h.model.requests[1])] == ["call_0", "call_0_dup"]


async def test_max_tool_rounds_stops_the_lead_with_an_outcome(harness):
    h = await harness(function=lambda request: Reply(
        "still going", tool_calls=[ToolCall("echo", {"text": "again"})]
    ), max_tool_rounds=2)
    run = await h.start()
    assert run.nodes == [
        ("lead_agent", "tool_executing"), ("tool_execution", "lead_executing"),
        ("lead_agent", "tool_executing"), ("tool_execution", "lead_executing"),
        ("lead_agent", "completed"),
    ]
    assert run.state["outcome"] == "max_tool_rounds"
    assert run.state["graph_response"] == "still going"
    last = run.state["agent_memories"][LEAD][-1]
    assert last == {"role": "assistant", "content": "still going"}  # unanswered calls dropped
    assert run.of("agent_complete")[-1]["data"]["outcome"] == "max_tool_rounds"
    assert len(h.model.requests) == 3


async def test_a_model_error_in_the_lead_fails_the_run_with_its_class(harness):
    h = await harness(ContextOverflowError("prompt is too long"))
    # an overflow with nothing to compact names the setting to change; the model's error is its cause
    with pytest.raises(ContextWindowExceeded, match="context_window") as info:
        await h.start()
    assert isinstance(info.value.__cause__, ContextOverflowError)


# --- delegation -----------------------------------------------------------------------------


async def test_subagent_delegation_routes_to_subagents_and_back(harness):
    h = await harness(function=by_agent({
        "lead_agent": [
            Reply(tool_calls=[delegate("search_agent", "find cats", "d1"),
                              ToolCall("add", {"a": 1, "b": 1}, id="c2")]),
            Reply("Cats purr."),
        ],
        "search_agent": [
            Reply(tool_calls=[ToolCall("echo", {"text": "cat facts"}, id="s1")]),
            Reply("Findings: cats purr"),
        ],
    }))
    run = await h.start()
    assert run.nodes == [
        ("lead_agent", "tool_executing"),
        ("tool_execution", "subagent_executing"),  # the lead's add result is held
        ("subagents", "tool_executing"),
        ("tool_execution", "subagent_executing"),
        ("subagents", "lead_executing"),  # every invocation answered
        ("lead_agent", "completed"),
    ]
    first, second = h.requests_of("search_agent")
    assert first.messages[1] == {"role": "user", "content": "find cats"}
    assert [m["content"] for m in tool_messages(second)] == ["cat facts"]
    lead_results = tool_messages(h.requests_of("lead_agent")[1])
    assert [(m["tool_call_id"], m["content"]) for m in lead_results] == [
        ("d1", "Findings: cats purr"), ("c2", "2"),
    ]
    assert run.state["graph_response"] == "Cats purr."
    assert not run.state.get("subagent_invocations")  # the round was closed
    assert not run.state.get("held_tool_results")  # the held result went into the lead's memory
    starts = run.of("subagent_start")
    assert [(e["agent"], e["data"]["tool_call_id"]) for e in starts] == [("search_agent", "d1")]
    assert run.of("subagent_complete")[0]["data"]["status"] == "done"


async def test_parallel_subagents_one_with_tools_one_done(harness):
    h = await harness(function=by_agent({
        "lead_agent": [
            Reply(tool_calls=[delegate("search_agent", "a", "d1"), delegate("crawl_agent", "b", "d2")]),
            Reply("merged"),
        ],
        "search_agent": [Reply(tool_calls=[ToolCall("echo", {"text": "t"})]), Reply("search done")],
        "crawl_agent": [Reply("crawl done")],
    }))
    run = await h.start()
    assert [n for n in run.nodes] == [
        ("lead_agent", "tool_executing"),
        ("tool_execution", "subagent_executing"),
        ("subagents", "tool_executing"),  # crawl answered, search wants a tool
        ("tool_execution", "subagent_executing"),
        ("subagents", "lead_executing"),
        ("lead_agent", "completed"),
    ]
    assert len(h.requests_of("crawl_agent")) == 1 and len(h.requests_of("search_agent")) == 2
    results = tool_messages(h.requests_of("lead_agent")[1])
    assert [(m["tool_call_id"], m["content"]) for m in results] == [
        ("d1", "search done"), ("d2", "crawl done"),
    ]


async def test_failing_and_over_limit_subagents_become_error_results(harness):
    h = await harness(function=by_agent({
        "lead_agent": [
            Reply(tool_calls=[delegate("search_agent", "loop", "d1"), delegate("crawl_agent", "x", "d2"),
                              delegate("nobody", "x", "d3")]),
            Reply("reported"),
        ],
        "search_agent": [Reply("partial", tool_calls=[ToolCall("echo", {"text": "1"})]),
                         Reply("more", tool_calls=[ToolCall("echo", {"text": "2"})])],
        "crawl_agent": [ContextOverflowError("context window exceeded")],
    }), sub_rounds=1)
    run = await h.start()
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(h.requests_of("lead_agent")[1])}
    assert "search_agent reached max_tool_rounds (1)" in results["d1"]
    assert "Partial answer: more" in results["d1"]
    assert results["d2"].startswith(
        "ERROR: subagent 'crawl_agent' failed: crawl_agent: the provider says the request is too long")
    assert "set `context_window`" in results["d2"]
    assert "unknown subagent 'nobody'" in results["d3"] and "search_agent, crawl_agent" in results["d3"]
    assert run.state["graph_response"] == "reported"
    statuses = sorted(e["data"]["status"] for e in run.of("subagent_complete"))
    assert statuses == ["failed", "failed"]


# --- permissions ----------------------------------------------------------------------------


async def test_confirm_call_interrupts_before_anything_runs_then_resumes(harness):
    h = await harness(
        Reply(tool_calls=[ToolCall("echo", {"text": "auto"}, id="c1"),
                          ToolCall("write_note", {"text": "hello"}, id="c2")]),
        Reply("written"),
    )
    paused = await h.start()
    assert paused.nodes == [("lead_agent", "tool_executing")]
    assert len(paused.interrupts) == 1
    assert paused.interrupts[0].value == {
        "kind": "permission",
        "calls": [{"tool_call_id": "c2", "tool": "write_note", "arguments": {"text": "hello"},
                   "agent": "lead_agent", "invocation": "lead"}],
    }
    assert paused.state["phase"] == ExecutionPhase.TOOL_EXECUTING
    assert [c["needs_approval"] for c in paused.state["pending_tool_calls"]] == [False, True]
    assert NOTES == [] and paused.of("tool_start") == []  # not even the AUTO call ran

    done = await h.resume(paused, {"c2": {"action": "approve"}})
    assert done.nodes == [("tool_execution", "lead_executing"), ("lead_agent", "completed")]
    assert NOTES == ["hello"]
    assert [m["content"] for m in tool_messages(h.model.requests[1])] == ["auto", "noted 'hello'"]
    assert done.state["graph_response"] == "written"


async def test_denied_and_undecided_calls_fail_closed(harness):
    h = await harness(
        Reply(tool_calls=[ToolCall("write_note", {"text": "a"}, id="c1"),
                          ToolCall("write_note", {"text": "b"}, id="c2")]),
        Reply("ok"),
    )
    paused = await h.start()
    await h.resume(paused, {"c1": {"action": "deny", "reason": "not now"}, "c2": {"action": "maybe"}})
    assert NOTES == []
    denied, undecided = (m["content"] for m in tool_messages(h.model.requests[1]))
    assert "the user denied this tool call: not now" in denied
    assert "no valid decision was given" in undecided


async def test_subagent_confirm_call_pauses_the_round(harness):
    h = await harness(function=by_agent({
        "lead_agent": [Reply(tool_calls=[delegate("search_agent", "note it", "d1")]), Reply("fine")],
        "search_agent": [Reply(tool_calls=[ToolCall("write_note", {"text": "sub"}, id="s1")]),
                         Reply("noted")],
    }))
    paused = await h.start()
    assert paused.nodes[-1] == ("subagents", "tool_executing")
    (call,) = paused.interrupts[0].value["calls"]
    assert call["agent"] == "search_agent" and call["invocation"].startswith("search_agent:")
    done = await h.resume(paused, {"s1": {"action": "edit", "arguments": {"text": "edited"}}})
    assert NOTES == ["edited"]
    assert done.nodes[-1] == ("lead_agent", "completed")


# --- merging and routing (pure functions) ---------------------------------------------------


CALL = {"id": "c1", "name": "echo", "arguments": '{"text": "x"}'}


def test_merge_lead_answer_completes():
    update = merge_agent_response_to_state(agent="lead_agent", invocation=LEAD, content="hi", tool_calls=[])
    assert update == {
        "agent_memories": {LEAD: [{"role": "assistant", "content": "hi"}]},
        "phase": "completed", "graph_response": "hi", "outcome": "completed",
    }


def test_merge_lead_tool_calls_go_to_the_tool_node():
    update = merge_agent_response_to_state(
        agent="lead_agent", invocation=LEAD, content="", tool_calls=[CALL],
        needs_approval={"c1": True}, rounds_used=2, max_tool_rounds=5,
    )
    assert update["phase"] == "tool_executing"
    assert update["pending_tool_calls"] == [{**CALL, "agent": "lead_agent", "invocation": LEAD,
                                             "needs_approval": True, "round": 3}]
    (message,) = update["agent_memories"][LEAD]
    assert message["content"] == ""  # never null: llama-cpp-python refuses it
    assert message["tool_calls"] == [{"id": "c1", "type": "function",
                                      "function": {"name": "echo", "arguments": '{"text": "x"}'}}]
    assert "subagent_invocations" not in update and "graph_response" not in update


def test_merge_subagent_tool_calls_and_answer():
    calls = merge_agent_response_to_state(
        agent="search_agent", invocation="search_agent:1", content="", tool_calls=[CALL], rounds_used=0,
    )
    assert calls["phase"] == "tool_executing"
    assert calls["subagent_invocations"] == {"search_agent:1": {"rounds": 1, "status": "tools"}}
    answer = merge_agent_response_to_state(
        agent="search_agent", invocation="search_agent:1", content="found", tool_calls=[],
    )
    assert answer["phase"] == "lead_executing"
    assert answer["subagent_invocations"] == {"search_agent:1": {"status": "done", "result": "found"}}
    assert "graph_response" not in answer


def test_merge_over_the_round_limit():
    lead = merge_agent_response_to_state(
        agent="lead_agent", invocation=LEAD, content="", tool_calls=[CALL], rounds_used=3, max_tool_rounds=3,
    )
    assert lead["phase"] == "completed" and lead["outcome"] == "max_tool_rounds"
    assert lead["graph_response"] == "lead_agent reached max_tool_rounds (3) without a final answer"
    assert lead["agent_memories"] == {LEAD: [{"role": "assistant", "content": ""}]}
    assert "pending_tool_calls" not in lead
    sub = merge_agent_response_to_state(
        agent="search_agent", invocation="s:1", content="part", tool_calls=[CALL], rounds_used=1,
        max_tool_rounds=1,
    )
    assert sub["phase"] == "lead_executing"
    assert sub["subagent_invocations"]["s:1"]["status"] == "failed"
    assert sub["subagent_invocations"]["s:1"]["result"] == "part"


@pytest.mark.parametrize(
    ("phase", "target"),
    [
        (ExecutionPhase.LEAD_EXECUTING, "lead_agent"),
        (ExecutionPhase.TOOL_EXECUTING, "tool_execution"),
        (ExecutionPhase.SUBAGENT_EXECUTING, "subagents"),
        (ExecutionPhase.COMPLETED, END),
    ],
)
def test_route_reads_the_phase_only(phase, target):
    # The pending lists disagree with the phase on purpose: the phase decides.
    state = {"phase": phase.value, "pending_tool_calls": [CALL],
             "subagent_invocations": {"x": {"status": "running"}}}
    assert route(state) == target  # type: ignore[arg-type]


def test_route_refuses_an_unknown_phase():
    with pytest.raises(RuntimeError, match="unknown phase 'waiting_permission'"):
        route({"phase": "waiting_permission"})  # type: ignore[typeddict-item]


def test_initial_state_holds_no_ids():
    state = create_initial_state("task", conversation_history=[{"role": "user", "content": "before"}])
    assert state["phase"] == "lead_executing"
    assert state["conversation_history"] == [["user", "before"]]
    assert not {"session_id", "thread_id", "user_message_id", "compression_level"} & set(state)
