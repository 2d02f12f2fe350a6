"""Prove that ScriptedLLM speaks the protocol the real ``openai.AsyncOpenAI`` client expects."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scripted_llm import (  # noqa: E402
    NO_RESPONSE_MESSAGE,
    Call,
    Delay,
    Error,
    Hang,
    ScriptedLLM,
    Text,
    ToolCalls,
    scripted_llm,
)
from waiting import ceiling, wait_until  # noqa: E402

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are agent A."},
    {"role": "user", "content": "Say something nice please."},
]
PROMPT_TOKENS = (len("You are agent A.") + len("Say something nice please.")) // 4


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest_asyncio.fixture
async def client(llm: ScriptedLLM) -> AsyncIterator[openai.AsyncOpenAI]:
    c = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0, timeout=10)
    try:
        yield c
    finally:
        await c.close()


async def _stream(client: openai.AsyncOpenAI, **kwargs: Any) -> list[Any]:
    stream = await client.chat.completions.create(
        model="test-model",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )
    return [chunk async for chunk in stream]


@pytest.mark.asyncio
async def test_streamed_text_reassembles_and_usage_in_final_chunk(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    content = "Hello there, this is a streamed answer with ünïcödé ✓."
    llm.script(Text(content, chunk_size=5))

    chunks = await _stream(client)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == content
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 5
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    assert all(f is None for f in finishes[:-1])
    # usage arrives only on the last chunk, which has no choices
    assert chunks[-1].choices == []
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.prompt_tokens == PROMPT_TOKENS
    assert usage.completion_tokens == len(content) // 4
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])

    assert llm.request_count == 1
    req = llm.last_request
    assert req is not None
    assert req["model"] == "test-model"
    assert req["messages"] == MESSAGES
    assert req["stream"] is True
    assert llm.request_headers[0]["authorization"] == "Bearer test"
    assert not llm.unexpected


@pytest.mark.asyncio
async def test_no_usage_chunk_without_include_usage(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    llm.script(Text("abc"))
    stream = await client.chat.completions.create(
        model="m",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
    )
    chunks = [c async for c in stream]
    assert all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)


@pytest.mark.asyncio
async def test_streamed_two_tool_calls_reassemble(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    args_a = {"path": "notes/today.md", "content": "x" * 40}
    args_b = {"query": "weather in Paris", "limit": 3}
    llm.script(
        ToolCalls(
            [Call("write_file", args_a, id="call_abc"), Call("search", args_b)],
            chunk_size=7,
        )
    )

    chunks = await _stream(client, tools=[])

    # Reassemble the way an agent loop does it: by index.
    calls: dict[int, dict[str, str]] = {}
    fragments_per_index: dict[int, int] = {}
    for chunk in chunks:
        if not chunk.choices:
            continue
        for tc in chunk.choices[0].delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            if tc.id:
                slot["id"] = tc.id
            if tc.function and tc.function.name:
                slot["name"] = tc.function.name
            if tc.function and tc.function.arguments:
                slot["arguments"] += tc.function.arguments
                fragments_per_index[tc.index] = fragments_per_index.get(tc.index, 0) + 1

    assert sorted(calls) == [0, 1]
    assert calls[0]["id"] == "call_abc"
    assert calls[0]["name"] == "write_file"
    assert json.loads(calls[0]["arguments"]) == args_a
    assert calls[1]["id"].startswith("call_") and calls[1]["id"] != "call_abc"
    assert calls[1]["name"] == "search"
    assert json.loads(calls[1]["arguments"]) == args_b
    assert fragments_per_index[0] > 1 and fragments_per_index[1] > 1  # really split up

    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"
    usage = chunks[-1].usage
    assert usage is not None
    expected = (len(json.dumps(args_a)) + len(json.dumps(args_b))) // 4
    assert usage.completion_tokens == expected


@pytest.mark.asyncio
async def test_tool_calls_via_client_stream_helper(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    """The SDK's own accumulator (``chat.completions.stream``) reassembles our chunks."""
    llm.script(
        ToolCalls(
            [Call("a", {"x": 1}), Call("b", {"y": [1, 2, 3]})],
            content="Let me check.",
            chunk_size=3,
        )
    )
    async with client.chat.completions.stream(
        model="m",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    ) as stream:
        async for _event in stream:
            pass
        final = await stream.get_final_completion()

    msg = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Let me check."
    assert msg.tool_calls is not None
    got = [(tc.id, tc.function.name, json.loads(tc.function.arguments)) for tc in msg.tool_calls]  # type: ignore[union-attr]
    assert [g[1:] for g in got] == [("a", {"x": 1}), ("b", {"y": [1, 2, 3]})]
    assert len({g[0] for g in got}) == 2
    assert final.usage is not None and final.usage.prompt_tokens == PROMPT_TOKENS


@pytest.mark.asyncio
async def test_malformed_arguments_pass_through_verbatim(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    bad = '{"path": "a.txt", "content": "unterminated'
    llm.script(ToolCalls([Call("write_file", bad)]), ToolCalls([Call("write_file", bad)]))

    chunks = await _stream(client)
    args = "".join(
        tc.function.arguments or ""
        for c in chunks
        if c.choices
        for tc in c.choices[0].delta.tool_calls or []
        if tc.function
    )
    assert args == bad

    resp = await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    tool_calls = resp.choices[0].message.tool_calls
    assert tool_calls is not None
    assert tool_calls[0].function.arguments == bad  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_error_429_raises_rate_limit_error(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    llm.script(Error(429, "slow down", retry_after=1.5))
    with pytest.raises(openai.RateLimitError) as info:
        await _stream(client)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "1.5"
    assert isinstance(info.value.body, dict)
    assert info.value.body["message"] == "slow down"
    assert info.value.code == "rate_limit_exceeded"
    assert "slow down" in str(info.value)


@pytest.mark.asyncio
async def test_error_500_raises_internal_server_error(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    llm.script(Error(500, "boom"), Error(401))
    with pytest.raises(openai.InternalServerError) as info:
        await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert info.value.status_code == 500
    assert "retry-after" not in info.value.response.headers
    with pytest.raises(openai.AuthenticationError):
        await _stream(client)
    assert not llm.unexpected


@pytest.mark.asyncio
async def test_retry_after_is_honoured_by_client_retries(llm: ScriptedLLM) -> None:
    llm.script(Error(429, retry_after=0.01), Text("ok"))
    c = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=1)
    try:
        resp = await c.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    finally:
        await c.close()
    assert resp.choices[0].message.content == "ok"
    assert llm.request_count == 2


@pytest.mark.asyncio
async def test_non_stream_mode(llm: ScriptedLLM, client: openai.AsyncOpenAI) -> None:
    llm.script(Text("plain answer"), ToolCalls([Call("f", {"k": "v"})]))

    resp = await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert resp.object == "chat.completion"
    assert resp.model == "m"
    assert resp.choices[0].message.content == "plain answer"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None
    assert resp.usage.prompt_tokens == PROMPT_TOKENS
    assert resp.usage.completion_tokens == max(1, len("plain answer") // 4)

    resp2 = await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert resp2.choices[0].finish_reason == "tool_calls"
    calls = resp2.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1
    assert calls[0].id.startswith("call_")
    assert calls[0].function.name == "f"  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments) == {"k": "v"}  # type: ignore[union-attr]
    assert [r.get("stream") for r in llm.requests] == [None, None]


@pytest.mark.asyncio
async def test_models_endpoint(client: openai.AsyncOpenAI) -> None:
    models = await client.models.list()
    assert [m.id for m in models.data] == ["scripted-model"]


@pytest.mark.asyncio
async def test_route_takes_precedence_over_queue(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    def by_agent(req: dict[str, Any]) -> Text | None:
        system = req["messages"][0]["content"]
        if "agent B" in system:
            return Text("I am B")
        return None

    llm.route(by_agent)
    llm.script(Text("from queue"))

    async def ask(system: str) -> str:
        resp = await client.chat.completions.create(
            model="m",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        )
        return resp.choices[0].message.content or ""

    b1, a, b2 = await asyncio.gather(
        ask("You are agent B."), ask("You are agent A."), ask("You are agent B.")
    )
    assert (b1, a, b2) == ("I am B", "from queue", "I am B")
    assert llm.remaining == 0
    assert llm.request_count == 3
    assert not llm.unexpected


@pytest.mark.asyncio
async def test_empty_queue_answers_500_and_is_recorded(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        await _stream(client)
    assert NO_RESPONSE_MESSAGE in str(info.value)
    assert len(llm.unexpected) == 1
    assert llm.unexpected[0].reason == NO_RESPONSE_MESSAGE
    assert llm.unexpected[0].request == llm.last_request


@pytest.mark.asyncio
async def test_delay_then_text_and_client_timeout(llm: ScriptedLLM) -> None:
    llm.script(Delay(0.2, Text("late")), Delay(5, Text("too late")))
    c = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0, timeout=3)
    try:
        t0 = time.monotonic()
        resp = await c.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
        assert time.monotonic() - t0 >= 0.2
        assert resp.choices[0].message.content == "late"
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model="m", messages=MESSAGES, timeout=0.3)  # type: ignore[arg-type]
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_chunk_delay_allows_cancelling_mid_stream(
    llm: ScriptedLLM, client: openai.AsyncOpenAI
) -> None:
    llm.script(Text("x" * 200, chunk_size=2, chunk_delay=0.02))
    received: list[str] = []

    async def consume() -> None:
        stream = await client.chat.completions.create(
            model="m",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)

    task = asyncio.create_task(consume())
    await wait_until(lambda: received, what="the first streamed chunk")
    assert 0 < len(received) < 100  # mid-stream
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    got = len(received)
    await asyncio.sleep(0.1)
    assert len(received) == got


@pytest.mark.asyncio
async def test_hang_then_close_returns_promptly() -> None:
    llm = ScriptedLLM(Hang()).start()
    c = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0, timeout=10)
    try:
        task = asyncio.create_task(
            c.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
        )
        await wait_until(lambda: llm.request_count, what="the request in the server")
        assert llm.request_count == 1
        assert not task.done()

        t0 = time.monotonic()
        await asyncio.to_thread(llm.close)
        assert time.monotonic() - t0 < ceiling(1.0)
        # The hung request is dropped: the client sees a connection error, not a hang.
        with pytest.raises(openai.APIConnectionError):
            await asyncio.wait_for(task, ceiling(3))
    finally:
        llm.close()
        await c.close()
    assert llm.closed


def test_sync_context_manager_alias() -> None:
    with scripted_llm(Text("hi")) as llm:
        assert llm.base_url.startswith("http://127.0.0.1:")
        assert llm.base_url.endswith("/v1")
        sync = openai.OpenAI(base_url=llm.base_url, api_key="test", max_retries=0)
        try:
            resp = sync.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
        finally:
            sync.close()
        assert resp.choices[0].message.content == "hi"
    assert llm.closed
