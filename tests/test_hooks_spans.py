"""Tracing on real runs: the GenAI span tree (lead → subagent → chat / execute_tool) and its
attributes from an in-memory exporter; a run paused in one client and resumed in a new
one continues the same trace; a resume in another process (console exporter, configured by
environment) too; a failing subagent model call marks its spans as errors."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from conftest import make_config
from hooks_recorder import SUB, by_agent, open_client
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from resume_helpers import resume_elsewhere
from scripted_llm import Call, Error, Text, ToolCalls

from artifactflow import Resume
from artifactflow.hooks.tracing import TracingHooks

TOOLS = '''
from artifactflow import tool

@tool(permission="confirm")
def approve_me(text: str) -> str:
    """Needs approval."""
    return f"approved {text}"

@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"
'''


def tracing() -> tuple[TracingHooks, InMemorySpanExporter]:
    """What one process has: its own provider and exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return TracingHooks(provider), exporter


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return make_config(
        tmp_path, lead_tools=["call_subagent", "lookup"], subagents={SUB: ["lookup", "approve_me"]},
        yaml_text="plugins: [span_tools]\n", plugin_files={"span_tools.py": TOOLS},
    )


def parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


def named(spans, name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_a_run_is_one_nested_trace_with_genai_attributes(config, tmp_path, llm_env):
    by_agent(llm_env, {
        "lead": [
            ToolCalls([Call("lookup", {"topic": "a"}, id="l1"),
                       Call("call_subagent", {"agent_name": SUB, "instruction": "dig"}, id="d1")]),
            Text("final"),
        ],
        SUB: [ToolCalls([Call("lookup", {"topic": "b"}, id="s1")]), Text("sub answer")],
    })
    hook, exporter = tracing()
    client = await open_client(config, tmp_path / "data", [hook])
    try:
        result = await client.run("research")
        model = client.admin.services.models.resolve(None).model
    finally:
        await client.aclose()
    assert result.status == "completed"
    spans = exporter.get_finished_spans()  # all ended before `complete` was emitted
    assert sorted(s.name for s in spans) == sorted([
        "invoke_agent lead_agent", f"chat {model}", f"chat {model}", "execute_tool lookup",
        f"invoke_agent {SUB}", f"chat {model}", f"chat {model}", "execute_tool lookup",
    ])
    (root,) = named(spans, "invoke_agent lead_agent")
    (sub,) = named(spans, f"invoke_agent {SUB}")
    assert root.parent is None and {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert parent(sub) == root.context.span_id
    chats = named(spans, f"chat {model}")
    assert sorted(parent(c) for c in chats) == sorted([root.context.span_id] * 2 + [sub.context.span_id] * 2)
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in named(spans, "execute_tool lookup")}
    assert parent(tools["l1"]) == root.context.span_id and parent(tools["s1"]) == sub.context.span_id
    conversation = {"gen_ai.conversation.id": result.conversation_id}
    assert dict(root.attributes).items() >= {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "lead_agent",
        "gen_ai.provider.name": "openai", "gen_ai.request.model": model,
        "artifactflow.message_id": result.message_id, "artifactflow.run.status": "completed",
        **conversation,
    }.items()
    assert dict(sub.attributes).items() >= {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": SUB,
        "artifactflow.tool_call_id": "d1", "artifactflow.outcome": "done", **conversation,
    }.items()
    for chat in chats:
        assert chat.kind == SpanKind.CLIENT
        assert dict(chat.attributes).items() >= {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model, "gen_ai.response.model": model, **conversation,
        }.items()
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0 and chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.input.messages" not in chat.attributes  # contents are opt-in
    assert dict(tools["s1"].attributes).items() >= {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "s1", "gen_ai.agent.name": SUB, **conversation,
    }.items()
    assert all(s.status.status_code != StatusCode.ERROR for s in spans)


def pause_in_subagent(llm) -> None:
    by_agent(llm, {
        "lead": [ToolCalls([Call("call_subagent", {"agent_name": SUB, "instruction": "dig"}, id="d1")]),
                 Text("final")],
        SUB: [ToolCalls([Call("approve_me", {"text": "x"}, id="s1")]), Text("sub answer")],
    })


async def test_a_resume_in_a_new_client_continues_the_trace(config, tmp_path, llm_env):
    pause_in_subagent(llm_env)
    data = tmp_path / "data"
    hook_a, exported_a = tracing()
    first = await open_client(config, data, [hook_a])
    try:
        paused = await first.run("research")
        waiting = (await first.conversations.message(paused.message_id))["waiting_for"]
    finally:
        await first.aclose()
    assert paused.status == "waiting"
    assert "trace" not in paused.events[-1].data  # stored with the message, not in the event
    assert waiting["trace"]["traceparent"].startswith("00-")
    a = exported_a.get_finished_spans()
    (root_a,) = named(a, "invoke_agent lead_agent")
    (sub_a,) = named(a, f"invoke_agent {SUB}")
    assert root_a.attributes["artifactflow.paused"] is True

    hook_b, exported_b = tracing()  # a new client: a new provider, nothing in memory
    second = await open_client(config, data, [hook_b])
    try:
        result = await second.run(Resume(paused.message_id, "approve"))
    finally:
        await second.aclose()
    assert result.status == "completed"
    b = exported_b.get_finished_spans()
    assert {s.context.trace_id for s in b} == {root_a.context.trace_id}
    (root_b,) = named(b, "invoke_agent lead_agent")
    (sub_b,) = named(b, f"invoke_agent {SUB}")
    assert parent(root_b) == root_a.context.span_id  # the resumed segment continues the story
    assert parent(sub_b) == sub_a.context.span_id and sub_b.attributes["artifactflow.continued"] is True
    assert root_b.attributes["artifactflow.run.segment"] == "resumed"
    (tool,) = named(b, "execute_tool approve_me")
    assert parent(tool) == sub_b.context.span_id
    assert [e.name for e in root_b.events] == ["permission_result"]


def console_spans(text: str) -> list[dict]:
    """Spans the console exporter printed (JSON objects), among other stderr lines."""
    decoder, spans, index = json.JSONDecoder(), [], 0
    while (index := text.find("{", index)) != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            index += 1
            continue
        if isinstance(value, dict) and "context" in value:
            spans.append(value)
        index = end
    return spans


async def test_a_resume_in_another_process_continues_the_trace(config, tmp_path, llm_env):
    pause_in_subagent(llm_env)
    data = tmp_path / "data"
    hook, exported = tracing()
    first = await open_client(config, data, [hook])
    try:
        paused = await first.run("research")
    finally:
        await first.aclose()
    (root,) = named(exported.get_finished_spans(), "invoke_agent lead_agent")
    env = dict(os.environ, ARTIFACTFLOW_TELEMETRY__EXPORTER="console", OTEL_SERVICE_NAME="resumer")
    resumed = await asyncio.to_thread(resume_elsewhere, config, data, paused.message_id, env)
    assert resumed["status"] == "completed", resumed["stderr"]
    spans = console_spans(resumed["stderr"])
    names = sorted(s["name"] for s in spans)
    assert "invoke_agent lead_agent" in names and f"invoke_agent {SUB}" in names
    assert "execute_tool approve_me" in names
    assert {s["context"]["trace_id"] for s in spans} == {f"0x{root.context.trace_id:032x}"}
    (root_b,) = [s for s in spans if s["name"] == "invoke_agent lead_agent"]
    assert root_b["parent_id"] == f"0x{root.context.span_id:016x}"
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"resumer"}


async def test_a_failing_subagent_model_call_marks_its_spans(config, tmp_path, llm_env):
    by_agent(llm_env, {
        "lead": [ToolCalls([Call("call_subagent", {"agent_name": SUB, "instruction": "dig"}, id="d1")]),
                 Text("the subagent failed")],
        SUB: [Error(400, "bad request")],
    })
    hook, exporter = tracing()
    client = await open_client(config, tmp_path / "data", [hook])
    try:
        result = await client.run("research")
    finally:
        await client.aclose()
    assert result.status == "completed"
    spans = exporter.get_finished_spans()
    (sub,) = named(spans, f"invoke_agent {SUB}")
    sub_chats = [s for s in spans if s.name.startswith("chat ") and parent(s) == sub.context.span_id]
    assert len(sub_chats) == 1 and sub_chats[0].status.status_code == StatusCode.ERROR
    assert sub_chats[0].attributes["error.type"] == "llm"
    assert sub.status.status_code == StatusCode.ERROR
    failed_call = named(spans, "execute_tool call_subagent")  # its result is the failure
    assert len(failed_call) == 1 and failed_call[0].status.status_code == StatusCode.ERROR
    (root,) = named(spans, "invoke_agent lead_agent")
    assert root.status.status_code != StatusCode.ERROR  # the run itself went on
