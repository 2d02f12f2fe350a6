"""The model seam: the chat-completions model over real HTTP, error classes, the retry policy,
the scripted model, and picking an implementation by a profile's `api`."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from conftest import make_config
from scripted_llm import Call, Error, ScriptedLLM, Text, ToolCalls

from artifactflow import (
    Client,
    ConfigError,
    ContextOverflowError,
    FatalLLMError,
    LLMError,
    ModelRequest,
    ModelResponse,
    Reply,
    RetryableLLMError,
    ScriptedModel,
    ToolCall,
    Usage,
    load_settings,
)
from artifactflow.agents.model import (
    ModelPicker,
    ModelRegistry,
    OpenAIChatModel,
    ResolvedModel,
    is_context_overflow,
    model_api_names,
    register_model_api,
)
from artifactflow.agents.model.openai_chat import retry_after
from artifactflow.agents.model.openai_http import env_proxy
from artifactflow.agents.model.registry import _APIS
from artifactflow.agents.model.retry import Attempt, Failure, with_retries
from artifactflow.settings import LLMSettings

POLICY = LLMSettings(max_retries=2, backoff_base=0.01, backoff_max=0.05)
MESSAGES = [{"role": "user", "content": "hello there"}]


class Sleeps:
    """Records the backoff delays instead of waiting them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest_asyncio.fixture
async def chat(llm: ScriptedLLM) -> AsyncIterator[tuple[OpenAIChatModel, Sleeps, ModelRequest]]:
    sleeps = Sleeps()
    model = OpenAIChatModel(POLICY, sleep=sleeps)
    target = ResolvedModel(None, "m", llm.base_url, "test-key")
    yield model, sleeps, ModelRequest(target, MESSAGES, agent="lead_agent")
    await model.aclose()


async def test_streams_text_and_reports_usage_and_finish_reason(chat, llm):
    model, _, request = chat
    llm.script(Text("a streamed answer", chunk_size=4))
    deltas: list[str] = []
    response = await model.complete(request, deltas.append)
    assert deltas == ["a st", "ream", "ed a", "nswe", "r"]
    assert response.content == "a streamed answer"
    assert response.finish_reason == "stop"
    assert response.usage == Usage(len("hello there") // 4, len("a streamed answer") // 4)
    assert response.attempts == 1


async def test_tool_calls_are_reassembled_with_raw_arguments(chat, llm):
    model, _, request = chat
    llm.script(ToolCalls([Call("add", {"a": 1, "b": 2}, id="c1"), Call("echo", '{"bad')]))
    response = await model.complete(request)
    assert response.finish_reason == "tool_calls"
    assert [(c["id"], c["name"], c["arguments"]) for c in response.tool_calls] == [
        ("c1", "add", '{"a": 1, "b": 2}'),
        (response.tool_calls[1]["id"], "echo", '{"bad'),
    ]


async def test_retry_after_is_capped_at_backoff_max(chat, llm):
    model, sleeps, request = chat
    llm.script(Error(429, "slow down", retry_after=30), Error(503, retry_after=0.02), Text("ok"))
    response = await model.complete(request)
    assert response.content == "ok" and response.attempts == 3
    assert sleeps.delays == [POLICY.backoff_max, 0.02]
    assert llm.request_count == 3


async def test_retryable_errors_exhaust_into_retryable_llm_error(chat, llm):
    model, sleeps, request = chat
    llm.script(Error(500, "boom"), Error(502), Error(429, "still busy", retry_after=1))
    with pytest.raises(RetryableLLMError) as info:
        await model.complete(request)
    assert "after 3 attempts: HTTP 429" in str(info.value) and "still busy" in str(info.value)
    assert info.value.retryable and info.value.agent == "lead_agent"
    assert info.value.retry_after == 1.0
    assert len(sleeps.delays) == 2 and all(0 < d <= POLICY.backoff_max for d in sleeps.delays)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (Error(400, "x", code="context_length_exceeded"), ContextOverflowError),
        (
            Error(400, "This model's maximum context length is 8192 tokens. However, you "
                       "requested 9000 tokens. Please reduce the length of the messages."),
            ContextOverflowError,
        ),
        (Error(400, "the request exceeds the available context size, try increasing it"),
         ContextOverflowError),
        (Error(413, "prompt is too long: 210000 tokens > 200000 maximum"), ContextOverflowError),
        (Error(401, "bad key"), FatalLLMError),
        (Error(404, "model not found"), FatalLLMError),
        (Error(400, "bad request: unknown parameter"), FatalLLMError),
    ],
)
async def test_errors_are_classified_and_not_retried(chat, llm, error, kind):
    model, sleeps, request = chat
    llm.script(error)
    with pytest.raises(kind) as info:
        await model.complete(request)
    assert type(info.value) is kind and not info.value.retryable
    assert f"HTTP {error.status}" in str(info.value)
    assert llm.request_count == 1 and sleeps.delays == []


async def test_connection_failure_is_retryable(llm):
    sleeps = Sleeps()
    model = OpenAIChatModel(POLICY, sleep=sleeps)
    port = llm.port
    llm.close()  # nothing listens any more
    target = ResolvedModel(None, "m", f"http://127.0.0.1:{port}/v1", "k")
    try:
        with pytest.raises(RetryableLLMError, match="connection failed"):
            await model.complete(ModelRequest(target, MESSAGES))
    finally:
        await model.aclose()
    assert len(sleeps.delays) == POLICY.max_retries


def test_is_context_overflow_wordings():
    assert is_context_overflow(None, "", "context_length_exceeded")
    assert is_context_overflow(400, "Input is too long: too many tokens")
    assert is_context_overflow(400, "exceeds the model's context window")
    assert not is_context_overflow(500, "maximum context length exceeded")
    assert not is_context_overflow(400, "temperature must be at most 2")


def test_retry_after_header_forms():
    assert retry_after({"retry-after": "30"}) == 30.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "30"}) == 0.25
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    assert 100 < (retry_after({"retry-after": later}) or 0) <= 121


async def test_no_retry_once_output_was_seen():
    calls: list[int] = []

    async def run(attempt: Attempt) -> ModelResponse:
        calls.append(attempt.number)
        attempt.output_seen = True
        raise TimeoutError("dropped mid-stream")

    def classify(exc: Exception) -> Failure:
        return Failure(RetryableLLMError, f"stream broke: {exc}")

    sleeps = Sleeps()
    with pytest.raises(RetryableLLMError, match="model call failed: stream broke"):
        await with_retries(run, classify, POLICY, sleep=sleeps)
    assert calls == [1] and sleeps.delays == []


# --- the scripted model ---------------------------------------------------------------------


def _request(agent: str = "a") -> ModelRequest:
    return ModelRequest(ResolvedModel(None, "m", None, ""), MESSAGES, agent=agent)


async def test_scripted_model_queue_function_usage_and_errors():
    def by_agent(request: ModelRequest) -> Reply | None:
        return Reply("from the function") if request.agent == "special" else None

    model = ScriptedModel(
        "plain text",
        Reply(tool_calls=[ToolCall("add", {"a": 1}), ToolCall("echo", "{bad", id="mine")]),
        Reply("no usage", usage=None, finish_reason="length"),
        ContextOverflowError("too long"),
        function=by_agent,
        chunk_size=3,
    )
    deltas: list[str] = []
    first = await model.complete(_request(), deltas.append)
    assert deltas == ["pla", "in ", "tex", "t"] and first.finish_reason == "stop"
    assert first.usage == Usage(len("hello there") // 4, len("plain text") // 4)
    special = await model.complete(_request("special"))
    assert special.content == "from the function" and model.remaining == 3
    calls = await model.complete(_request())
    assert calls.finish_reason == "tool_calls"
    assert calls.tool_calls == [
        {"id": "call_0", "name": "add", "arguments": '{"a": 1}'},
        {"id": "mine", "name": "echo", "arguments": "{bad"},
    ]
    unreported = await model.complete(_request())
    assert unreported.usage is None and unreported.finish_reason == "length"
    with pytest.raises(ContextOverflowError):
        await model.complete(_request())
    with pytest.raises(FatalLLMError, match="no reply left for request 6"):
        await model.complete(_request())
    assert [r.agent for r in model.requests] == ["a", "special", "a", "a", "a", "a"]


async def test_scripted_model_async_function_and_exception_classes():
    async def answer(request: ModelRequest) -> Any:
        return RetryableLLMError if request.agent == "flaky" else "ok"

    model = ScriptedModel(function=answer)
    assert (await model.complete(_request())).content == "ok"
    with pytest.raises(RetryableLLMError):
        await model.complete(_request("flaky"))


# --- picking a model by the profile's api ---------------------------------------------------


def test_unknown_api_in_profile_is_a_config_error(tmp_path: Path):
    path = tmp_path / "models.yaml"
    path.write_text("profiles:\n  fast:\n    model: m\n    api: telepathy\n")
    with pytest.raises(ConfigError) as info:
        ModelRegistry.from_file(path)
    message = str(info.value)
    assert "profile 'fast'" in message and "field 'api'" in message
    assert "telepathy" in message and "chat_completions" in message


async def test_profile_api_selects_a_registered_implementation(tmp_path: Path):
    scripted = ScriptedModel("from another API")
    register_model_api("test_other_api", lambda settings: scripted)
    try:
        path = tmp_path / "models.yaml"
        path.write_text(
            "profiles:\n  other:\n    model: m2\n    api: test_other_api\n    api_key_env: K\n"
        )
        registry = ModelRegistry.from_file(path, env={"K": "secret", "OPENAI_API_KEY": "k"})
        picker = ModelPicker(POLICY)
        target = registry.resolve("other")
        assert target.api == "test_other_api" and target.model == "m2"
        assert picker.for_target(target) is scripted
        assert isinstance(picker.for_target(registry.resolve("gpt-x")), OpenAIChatModel)
        assert picker.for_target(registry.resolve(None)) is picker.for_target(registry.resolve("y"))
        with pytest.raises(ConfigError, match="already registered"):
            register_model_api("test_other_api", lambda settings: scripted)
        await picker.aclose()
    finally:
        _APIS.pop("test_other_api", None)
    assert "test_other_api" not in model_api_names()


async def test_client_with_scripted_model_needs_no_key(tmp_path: Path, llm_env, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    settings = load_settings(make_config(tmp_path), tmp_path / "data")
    async with await Client.open(settings, model=ScriptedModel("answered in process")) as client:
        result = await client.run("hi")
    assert result.status == "completed" and result.response == "answered in process"


async def test_overflow_from_the_server_is_an_llm_error_event(make_client, llm):
    client = await make_client()
    llm.script(Error(400, "maximum context length is 10 tokens", code="context_length_exceeded"))
    events = [e async for e in await client.runs.start("x")]
    # A fresh run's memory is empty: nothing to compact, so no retry, and the message names
    # the setting to change.
    assert events[-1].type == "error" and events[-1].data.kind == "ContextWindowExceeded"
    assert "request is too long" in events[-1].data.message
    assert "`context_window`" in events[-1].data.message
    assert llm.request_count == 1
    assert issubclass(ContextOverflowError, LLMError)


class KeepAliveChat(asyncio.Protocol):
    """A keep-alive HTTP/1.1 chat server (the scripted one is HTTP/1.0, a connection per
    request): each request, once whole, gets a streamed answer "answer N"; bodies are kept."""

    bodies: list[bytes] = []
    heads: list[bytes] = []
    connections = 0

    def connection_made(self, transport: Any) -> None:
        self.transport, self.buffer = transport, b""
        KeepAliveChat.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, rest = self.buffer.split(b"\r\n\r\n", 1)
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            if len(rest) < length:
                return
            self.bodies.append(rest[:length])
            self.heads.append(head)
            self.buffer = rest[length:]
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                     "choices": [{"index": 0, "delta": {"content": f"answer {len(self.bodies)}"},
                                  "finish_reason": "stop"}]}
            body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + f"content-length: {len(body)}\r\n\r\n".encode() + body
            )


async def test_calls_reuse_one_kept_alive_connection_and_arrive_whole():
    """One session per endpoint: three calls go over one connection (no per-call client or
    connection), each request body arrives whole and each answer is read to its end."""
    KeepAliveChat.bodies, KeepAliveChat.connections = [], 0
    server = await asyncio.get_running_loop().create_server(KeepAliveChat, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    model = OpenAIChatModel(POLICY)
    request = ModelRequest(
        ResolvedModel(None, "m", f"http://127.0.0.1:{port}/v1", "k"), MESSAGES, agent="lead_agent"
    )
    try:
        for n in range(1, 4):
            assert (await model.complete(request)).content == f"answer {n}"
        assert KeepAliveChat.connections == 1
        assert [json.loads(b)["messages"] for b in KeepAliveChat.bodies] == [MESSAGES] * 3
    finally:
        await model.aclose()
        server.close()


async def test_a_proxy_from_the_environment_is_used_read_once(monkeypatch):
    """`HTTP_PROXY` (with credentials) routes model calls through the proxy, as the SDK's
    client did; `NO_PROXY` exempts a host. The environment is read when the endpoint is made,
    not before every request."""
    KeepAliveChat.bodies, KeepAliveChat.heads, KeepAliveChat.connections = [], [], 0
    server = await asyncio.get_running_loop().create_server(KeepAliveChat, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    for name in ("http_proxy", "no_proxy", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)  # lower case wins in urllib: none here
    monkeypatch.setenv("HTTP_PROXY", f"http://user:p%40ss@127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "exempt.example")
    model = OpenAIChatModel(POLICY)
    target = ResolvedModel(None, "m", "http://model.example:8080/v1", "k")  # not resolvable
    try:
        request = ModelRequest(target, MESSAGES, agent="lead_agent")
        assert (await model.complete(request)).content == "answer 1"
        head = KeepAliveChat.heads[0].decode()
        assert head.startswith("POST http://model.example:8080/v1/chat/completions HTTP/1.1")
        assert "Proxy-Authorization: Basic dXNlcjpwQHNz" in head  # user:p@ss
        assert "Authorization: Bearer k" in head
        assert env_proxy("http://exempt.example/v1/chat/completions") == (None, None)
        monkeypatch.delenv("HTTP_PROXY")  # read once: the endpoint keeps its proxy
        assert (await model.complete(request)).content == "answer 2"
    finally:
        await model.aclose()
        server.close()


async def test_a_server_that_never_answers_times_out_per_read():
    """`llm.timeout` bounds each read on the aiohttp wire too: a silent server is a
    retryable "request timed out", not a hang until the call deadline."""
    server = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    model = OpenAIChatModel(LLMSettings(max_retries=0, timeout=0.5, call_deadline=600))
    request = ModelRequest(
        ResolvedModel(None, "m", f"http://127.0.0.1:{port}/v1", "k"), MESSAGES, agent="lead_agent"
    )
    try:
        with pytest.raises(RetryableLLMError, match="request timed out"):
            await model.complete(request)
    finally:
        await model.aclose()
        server.close()
