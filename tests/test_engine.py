"""Core engine end to end: real HTTP to the scripted model, real SQLite, real checkpoints."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from conftest import make_config
from scripted_llm import Call, Error, Text, ToolCalls

from artifactflow import ToolResult, tool

CALLS: list[str] = []


@tool
async def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: What to echo.
    """
    return f"echo:{text}"


@tool
async def slow(label: str, seconds: float = 0.3) -> dict:
    """Sleep, then report when it started and ended (to prove concurrency)."""
    start = time.monotonic()
    await asyncio.sleep(seconds)
    return {"label": label, "start": start, "end": time.monotonic()}


@tool
def add(a: int, b: int) -> int:
    """Add two integers (a sync tool)."""
    return a + b


@tool(max_result_chars=200)
async def big() -> ToolResult:
    """Return a large result."""
    return ToolResult(success=True, data="x" * 5000)


TOOLS = [echo, slow, add, big]
ALL = ["echo", "slow", "add", "big"]


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def test_plain_answer_streams_and_completes(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(Text("Hello there, general.", chunk_size=4))
    events = [e async for e in await client.runs.start("Say hello")]
    types = [e.type for e in events]
    assert types[0] == "metadata"
    assert types[-1] == "complete"
    assert "agent_start" in types and "llm_complete" in types and "agent_complete" in types
    chunks = [e.data.delta for e in events if e.type == "llm_chunk"]
    assert len(chunks) > 1 and "".join(chunks) == "Hello there, general."
    final = events[-1]
    assert final.data.response == "Hello there, general."
    assert final.data.metrics["tokens"]["total"] > 0
    message = await client.admin.store.get_message(final.message_id)
    assert message["status"] == "completed" and message["response"] == "Hello there, general."
    # the request carried the system prompt and the task; streaming with usage
    request = llm.requests[0]
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert request["messages"][0]["role"] == "system"
    assert request["messages"][-1] == {"role": "user", "content": "Say hello"}


async def test_event_ids_monotonic_gap_free_and_persisted(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("echo", {"text": "a"})]), Text("done"))
    events = [e async for e in await client.runs.start("go")]
    stored = [e for e in events if e.type != "llm_chunk"]
    ids = [e.event_id for e in stored]
    assert ids == list(range(1, len(ids) + 1))
    assert all(e.conversation_id and e.thread_id and e.message_id for e in events)
    replay = await client.runs.events(events[0].message_id)
    assert [(e.event_id, e.type, e.data) for e in replay] == [
        (e.event_id, e.type, e.data) for e in stored
    ]
    order = [e.type for e in stored]
    assert order.index("tool_start") < order.index("tool_complete") < order.index("complete")


async def test_several_tool_rounds_results_return_to_model(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(
        ToolCalls([Call("echo", {"text": "one"})]),
        ToolCalls([Call("add", {"a": 2, "b": 3})]),
        Text("finished"),
    )
    result = await client.run("do two rounds")
    assert result.status == "completed" and result.response == "finished"
    assert tool_messages(llm.requests[1])[0]["content"] == "echo:one"
    assert tool_messages(llm.requests[2])[-1]["content"] == "5"
    assert result.metrics["tool_calls"] == 2 and result.metrics["llm_calls"] == 3


async def test_two_tool_calls_run_concurrently_results_in_call_order(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(
        ToolCalls([Call("slow", {"label": "first", "seconds": 0.4}, id="c1"),
                   Call("slow", {"label": "second", "seconds": 0.1}, id="c2")]),
        Text("ok"),
    )
    result = await client.run("parallel")
    assert result.status == "completed"
    msgs = tool_messages(llm.requests[1])
    assert [m["tool_call_id"] for m in msgs] == ["c1", "c2"]
    first, second = (json.loads(m["content"]) for m in msgs)
    assert first["label"] == "first" and second["label"] == "second"
    assert second["start"] < first["end"]  # overlapped in time


async def test_malformed_arguments_become_a_tool_error_the_model_corrects(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(
        ToolCalls([Call("echo", '{"text": "unterminated')]),
        ToolCalls([Call("echo", {"text": "fixed"})]),
        Text("recovered"),
    )
    result = await client.run("x")
    assert result.status == "completed" and result.response == "recovered"
    error = tool_messages(llm.requests[1])[0]["content"]
    assert error.startswith("ERROR:") and "not valid JSON" in error
    assert tool_messages(llm.requests[2])[-1]["content"] == "echo:fixed"


async def test_unknown_tool_and_invalid_arguments_are_tool_errors(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(
        ToolCalls([Call("does_not_exist", {}), Call("add", {"a": "many", "b": 1})]),
        Text("ok"),
    )
    result = await client.run("x")
    assert result.status == "completed"
    unknown, invalid = (m["content"] for m in tool_messages(llm.requests[1]))
    assert "unknown tool 'does_not_exist'" in unknown and "echo" in unknown
    assert "invalid arguments for 'add'" in invalid and "a:" in invalid


async def test_500_then_success_is_retried(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(Error(500), Error(429, retry_after=0.01), Text("after retries"))
    result = await client.run("x")
    assert result.status == "completed" and result.response == "after retries"
    assert llm.request_count == 3
    assert result.metrics["calls"][0]["attempts"] == 3


async def test_provider_that_keeps_failing_gives_error_event(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(Error(503), Error(503), Error(503))
    events = [e async for e in await client.runs.start("x")]
    assert events[-1].type == "error"
    assert "HTTP 503" in events[-1].data.message and "3 attempts" in events[-1].data.message
    message = await client.admin.store.get_message(events[-1].message_id)
    assert message["status"] == "failed"


async def test_non_retryable_error_fails_at_once(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(Error(400, "bad request: model not found"))
    events = [e async for e in await client.runs.start("x")]
    assert events[-1].type == "error" and "model not found" in events[-1].data.message
    assert llm.request_count == 1


async def test_max_tool_rounds_ends_with_explicit_outcome(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS, max_tool_rounds=2)
    llm.script(*(ToolCalls([Call("echo", {"text": str(i)})]) for i in range(3)))
    result = await client.run("loop forever")
    assert result.status == "completed"
    assert result.outcome == "max_tool_rounds"
    assert "max_tool_rounds" in result.response
    assert llm.request_count == 3
    assert result.events[-1].data.outcome == "max_tool_rounds"


async def test_result_size_cap_truncates_for_model_keeps_full_in_event(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("big", {})]), Text("ok"))
    result = await client.run("big")
    seen = tool_messages(llm.requests[1])[0]["content"]
    assert seen.startswith("x" * 200) and "truncated: showing 200 of 5000" in seen
    complete = next(e for e in result.events if e.type == "tool_complete")
    assert complete.data.result.data == "x" * 5000


async def test_metrics_per_call(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("echo", {"text": "a"})]), Text("done"))
    result = await client.run("m")
    metrics = result.metrics
    assert metrics["llm_calls"] == 2 and metrics["tool_success"] == 1
    llm_records = [c for c in metrics["calls"] if c["kind"] == "llm"]
    assert all(r["prompt_tokens"] > 0 and r["duration_ms"] > 0 for r in llm_records)
    assert metrics["by_agent"]["lead_agent"]
    stored = await client.admin.store.get_message(result.message_id)
    assert stored["metrics"]["tokens"] == metrics["tokens"]


async def test_plugin_tool_loaded_from_config_folder(tmp_path: Path, make_client, llm):
    config = make_config(
        tmp_path,
        lead_tools=["shout"],
        yaml_text="plugins: [my_tools]\n",
        plugin_files={
            "my_tools.py": '''
                from artifactflow import tool

                @tool
                def shout(text: str) -> str:
                    """Upper-case the text."""
                    return text.upper()
            '''
        },
    )
    client = await make_client(config_dir=config)
    assert "shout" in client.admin.services.tools
    llm.script(ToolCalls([Call("shout", {"text": "hi"})]), Text("ok"))
    result = await client.run("shout")
    assert tool_messages(llm.requests[1])[0]["content"] == "HI"
    assert result.status == "completed"
    spec = next(t for t in llm.requests[0]["tools"] if t["function"]["name"] == "shout")
    assert spec["function"]["parameters"]["properties"]["text"]["type"] == "string"


async def test_checkpoints_deleted_on_completion(make_client, llm):
    client = await make_client(lead_tools=ALL, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("echo", {"text": "a"})]), Text("done"))
    result = await client.run("x")
    assert not await client.admin.checkpoints.has_checkpoint(result.thread_id)
