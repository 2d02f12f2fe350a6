"""Compaction: when and where an agent's memory is cut, the summary call, the state writes.

Requests are built with the real prompt builders; the state writes go through the real
`AgentState` memory channel in a LangGraph graph checkpointed to SQLite.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from artifactflow import AgentSpec, AgentState, UserError
from artifactflow.agents.prompts import PLAN_ID, lead_messages, subagent_messages
from artifactflow.core.state import rounds_used
from artifactflow.core.window.compaction import (
    CompactionConfig,
    ContextWindowExceeded,
    fit_request,
    memory_writes,
    plan_compaction,
)
from artifactflow.core.window.rounds import check_pairs, is_summary, rounds_in, summary_text, units
from artifactflow.core.window.tokens import TokenCounter

LEAD = AgentSpec(name="lead_agent", role="lead", tools=("web_fetch",), prompt="You are the lead agent.")
TASK = "Compare the rainfall of every region and write a report."
PLAN = {"artifact_id": PLAN_ID, "version": 3, "title": "Plan", "content_type": "text/markdown",
        "content": "1. fetch regions  2. compare  3. write report (PLAN-MARKER)"}
TOOLS = [{"type": "function", "function": {"name": "web_fetch", "description": "Fetch a page",
          "parameters": {"type": "object", "properties": {"url": {"type": "string"}}}}}]


def page(n: int, size: int) -> str:
    text = f"RESULT-{n} " + " ".join(f"region{n} rain {i} mm" for i in range(size // 18 + 1))
    return text[:size]


def tool_round(n: int, size: int = 4000, calls: int = 1) -> list[dict[str, Any]]:
    ids = [f"call_{n}_{k}" for k in range(calls)]
    assistant = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "web_fetch",
                                                    "arguments": json.dumps({"url": f"https://r{n}.example"})}}
        for i in ids]}
    return [assistant, *({"role": "tool", "tool_call_id": i, "content": page(n, size)} for i in ids)]


def fixed_part() -> list[dict[str, Any]]:
    return lead_messages(LEAD, task=TASK, history=[["user", "earlier question"], ["assistant", "earlier answer"]],
                         memory=[], subagents=[], artifacts=[PLAN])


class Summarizer:
    def __init__(self, answer: str = "notes: regions 0..n fetched, rainfall figures noted") -> None:
        self.requests: list[list[dict[str, Any]]] = []
        self.answer = answer

    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.requests.append(messages)
        return self.answer


def config(window: int = 8192, **kw: Any) -> CompactionConfig:
    return CompactionConfig(window=window, agent="lead_agent", model_label="model profile 'small'", **kw)


async def test_nothing_happens_under_the_threshold():
    memory = tool_round(1) + tool_round(2)
    summarize = Summarizer()
    result = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                               summarize=summarize, counter=TokenCounter(), config=config())
    assert result is None and summarize.requests == []


async def test_oldest_rounds_summarized_newest_kept_plan_and_task_survive():
    memory = [m for n in range(1, 8) for m in tool_round(n)]
    counter, cfg, summarize = TokenCounter(), config(keep_recent_rounds=2), Summarizer()
    before = counter.estimate([*fixed_part(), *memory], TOOLS)
    assert before > cfg.threshold
    result = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                               summarize=summarize, counter=counter, config=cfg)
    assert result is not None and len(summarize.requests) == 1  # exactly one extra model call
    new = result.memory
    assert is_summary(new[0]) and summary_text(new[0]) == summarize.answer
    assert new[1:] == memory[-4:]  # the two newest rounds, verbatim
    assert rounds_in(new) == rounds_used(memory) == 7  # max_tool_rounds still counts them all
    assert result.rounds_summarized == 5 and result.tokens_before == before
    # the next request: prompt, plan, history and task untouched; it fits well under the threshold
    request = lead_messages(LEAD, task=TASK, history=[["user", "earlier question"], ["assistant", "earlier answer"]],
                            memory=new, subagents=[], artifacts=[PLAN])
    assert request[: len(fixed_part())] == fixed_part()
    assert "PLAN-MARKER" in request[0]["content"] and request[3] == {"role": "user", "content": TASK}
    assert result.tokens_after == counter.estimate(request, TOOLS) <= cfg.threshold * 0.5 + cfg.summary_tokens
    assert check_pairs(new) == []
    # the summary call saw the task and the cut rounds, and fits the window
    sent = summarize.requests[0]
    assert TASK in sent[1]["content"] and "RESULT-1" in sent[1]["content"] and "RESULT-7" not in sent[1]["content"]
    assert counter.estimate(sent) <= cfg.window * 0.75


async def test_second_compaction_folds_the_first_summary_in():
    memory = [m for n in range(1, 8) for m in tool_round(n)]
    counter, cfg = TokenCounter(), config(keep_recent_rounds=2)
    first = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                              summarize=Summarizer("FIRST NOTES"), counter=counter, config=cfg)
    assert first is not None
    memory = first.memory + [m for n in range(8, 14) for m in tool_round(n)]
    summarize = Summarizer("SECOND NOTES")
    second = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                               summarize=summarize, counter=counter, config=cfg)
    assert second is not None
    assert "Notes from even earlier work:\nFIRST NOTES" in summarize.requests[0][1]["content"]
    assert [is_summary(m) for m in second.memory].count(True) == 1
    assert rounds_in(second.memory) == 13


async def test_a_huge_newest_result_is_shortened_with_a_marker():
    memory = tool_round(1) + tool_round(2) + tool_round(3, size=200_000)
    counter, cfg, summarize = TokenCounter(), config(), Summarizer()
    result = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                               summarize=summarize, counter=counter, config=cfg)
    assert result is not None and result.shrunk == ["call_3_0"]
    newest = result.memory[-1]["content"]
    assert newest.startswith("RESULT-3") and "characters of this result were cut" in newest
    assert "200,000 characters" in newest and "event log" in newest
    assert result.tokens_after <= cfg.threshold
    assert check_pairs(result.memory) == []


async def test_aggressive_recovery_keeps_one_round_and_needs_no_summary_when_alone():
    # Our estimate says it fits; the provider (a denser tokenizer) says 7,100 tokens > 6,553.
    memory = tool_round(1, size=20_000)
    counter, summarize, cfg = TokenCounter(), Summarizer(), config()
    measured = counter.measure([*fixed_part(), *memory], TOOLS)
    assert measured.tokens < cfg.threshold
    counter.observe(measured.raw, 7_100)  # recalibrate from the provider's figure first
    result = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                               summarize=summarize, counter=counter, config=cfg, aggressive=True)
    assert result is not None and summarize.requests == [] and result.aggressive
    assert result.shrunk == ["call_1_0"] and result.tokens_after <= cfg.threshold * 0.35 + 10
    # with several rounds, only the newest stays and the rest is summarized in one call
    memory = [m for n in range(1, 4) for m in tool_round(n, size=1000)]
    result = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                               summarize=summarize, counter=TokenCounter(), config=cfg, aggressive=True)
    assert result is not None and result.memory[1:] == memory[-2:] and len(summarize.requests) == 1


async def test_clear_errors_name_the_setting_to_change():
    counter, summarize = TokenCounter(), Summarizer()
    huge_task = "x" * 40_000
    fixed = lead_messages(LEAD, task=huge_task, history=[], memory=[], subagents=[], artifacts=None)
    with pytest.raises(ContextWindowExceeded, match=r"context_window.*config/models\.yaml") as info:
        await fit_request(fixed=fixed, memory=tool_round(1), tools=TOOLS, task=huge_task,
                          summarize=summarize, counter=counter, config=config())
    assert isinstance(info.value, UserError) and info.value.setting == "context_window"
    assert "model profile 'small'" in str(info.value) and "lead_agent" in str(info.value)
    # a newest round whose call arguments alone are too big cannot be shortened
    big_call = tool_round(1)
    big_call[0]["tool_calls"][0]["function"]["arguments"] = json.dumps({"text": "y" * 60_000})
    with pytest.raises(ContextWindowExceeded, match="tools.max_result_chars") as info:
        await fit_request(fixed=fixed_part(), memory=big_call, tools=TOOLS, task=TASK,
                          summarize=summarize, counter=counter, config=config())
    assert info.value.setting == "tools.max_result_chars"
    # the provider keeps refusing but nothing is left to reduce
    with pytest.raises(ContextWindowExceeded, match="real window is probably smaller"):
        await fit_request(fixed=fixed_part(), memory=tool_round(1, size=500), tools=TOOLS, task=TASK,
                          summarize=summarize, counter=counter, config=config(), aggressive=True)
    assert summarize.requests == []


async def test_subagent_memory_compacts_with_its_plan_and_instruction_kept():
    spec = AgentSpec(name="search_agent", tools=("web_fetch",), prompt="You search.")
    fixed = subagent_messages(spec, instruction="Find rainfall data", plan=PLAN, memory=[])
    memory = [m for n in range(1, 9) for m in tool_round(n)]
    result = await fit_request(fixed=fixed, memory=memory, tools=TOOLS, task="Find rainfall data",
                               summarize=Summarizer(), counter=TokenCounter(), config=config())
    assert result is not None
    request = subagent_messages(spec, instruction="Find rainfall data", plan=PLAN, memory=result.memory)
    assert "PLAN-MARKER" in request[0]["content"] and request[1]["content"] == "Find rainfall data"


async def test_empty_summary_answer_falls_back_to_a_trace_of_the_calls():
    memory = [m for n in range(1, 9) for m in tool_round(n)]
    result = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                               summarize=Summarizer(""), counter=TokenCounter(), config=config())
    assert result is not None and "Agent called web_fetch" in summary_text(result.memory[0])


round_shapes = st.lists(
    st.tuples(st.integers(0, 3), st.integers(10, 9000)),  # calls in the round (0: text turn), result size
    min_size=1, max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(shapes=round_shapes, window=st.sampled_from([4096, 8192, 16_384]), keep=st.integers(1, 5),
       aggressive=st.booleans())
def test_cuts_fall_only_between_rounds(shapes, window, keep, aggressive):
    memory: list[dict[str, Any]] = []
    for n, (calls, size) in enumerate(shapes):
        memory += tool_round(n, size=size, calls=calls) if calls else [{"role": "assistant", "content": f"thinking {n}"}]
    cfg = config(window=window, keep_recent_rounds=keep)
    try:
        plan = plan_compaction(fixed=fixed_part(), memory=memory, tools=TOOLS, counter=TokenCounter(),
                               config=cfg, aggressive=aggressive)
    except ContextWindowExceeded:
        return  # a clear refusal is a valid outcome for a tiny window
    if plan is None:
        return
    starts = {start for start, _ in units(memory)}
    assert plan.cut == 0 or plan.cut in starts  # cut exactly at a unit boundary
    assert check_pairs(plan.kept) == []
    assert len(plan.kept) == len(memory) - plan.cut
    for old, new in zip(memory[plan.cut:], plan.kept, strict=True):
        assert new.get("role") == old.get("role") and new.get("tool_call_id") == old.get("tool_call_id")
        if new != old:  # only tool results of the newest round are ever shortened
            assert new["role"] == "tool" and new["tool_call_id"] in plan.shrunk
    assert plan.rounds_summarized + rounds_in(plan.kept) == rounds_in(memory)


async def test_state_write_replaces_the_memory_once_and_survives_a_reload(tmp_path: Path):
    """Reset + one append in the real `agent_memories` DeltaChannel, checkpointed to SQLite."""
    memory = [m for n in range(1, 8) for m in tool_round(n)]
    compacted = await fit_request(fixed=fixed_part(), memory=memory, tools=TOOLS, task=TASK,
                                  summarize=Summarizer(), counter=TokenCounter(), config=config())
    assert compacted is not None
    new_turn = {"role": "assistant", "content": "the answer"}

    async def grow(state: AgentState) -> dict[str, Any]:
        return {"agent_memories": {"lead": memory, "helper:1": [{"role": "assistant", "content": "h"}]}}

    async def step(state: AgentState) -> Command:
        update = {"agent_memories": {"lead": [new_turn], "helper:1": [{"role": "assistant", "content": "h2"}]},
                  "phase": "completed", "graph_response": "the answer"}
        writes = memory_writes(update, {"lead": [*compacted.memory, new_turn]})
        assert all("RESULT-1 " not in json.dumps(value) for _, value in writes)  # nothing cut is copied
        return Command(update=writes)

    builder = StateGraph(AgentState)
    builder.add_node("grow", grow)
    builder.add_node("step", step)
    builder.add_edge(START, "grow")
    builder.add_edge("grow", "step")
    builder.add_edge("step", END)
    path = tmp_path / "checkpoints.db"
    cfg = {"configurable": {"thread_id": "t"}}
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await builder.compile(checkpointer=saver).ainvoke({"agent_memories": {}}, cfg, durability="sync")
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:  # another process, later
        state = (await builder.compile(checkpointer=saver).aget_state(cfg)).values
    assert state["agent_memories"]["lead"] == [*compacted.memory, new_turn]
    assert [m["content"] for m in state["agent_memories"]["helper:1"]] == ["h", "h2"]
    assert state["phase"] == "completed" and state["graph_response"] == "the answer"
    assert os.path.getsize(path) > 0
