"""What each model request carries and how long it may take: the output bound (`max_tokens`),
`tool_choice`, unstreamed tool turns (`stream_tools: false`) and the whole-call deadline; and
the body going through the SDK's low-level `post` with its auth and error types intact."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from conftest import make_config, write_agent
from scripted_llm import Call, Error, Hang, ScriptedLLM, Text, ToolCalls

from artifactflow import FatalLLMError, ModelRequest, RetryableLLMError, tool
from artifactflow.agents.model import ModelRegistry, OpenAIChatModel, ResolvedModel
from artifactflow.agents.model.openai_wire import request_body
from artifactflow.settings import LLMSettings

POLICY = LLMSettings(max_retries=1, backoff_base=0.0, backoff_max=0.0)
MESSAGES = [{"role": "user", "content": "go"}]
TOOLS = [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}]


@tool
async def look(what: str) -> str:
    """Look at something.

    Args:
        what: What to look at.
    """
    return f"saw {what}"


def target(**fields: object) -> ResolvedModel:
    return ResolvedModel("p", "m", None, "k", **fields)  # type: ignore[arg-type]


@pytest_asyncio.fixture
async def model() -> AsyncIterator[OpenAIChatModel]:
    chat = OpenAIChatModel(POLICY)
    yield chat
    await chat.aclose()


# --- the body ----------------------------------------------------------------------------------


def test_output_bound_default_profile_agent_and_params():
    default = LLMSettings()
    assert request_body(ModelRequest(target(), MESSAGES), default, stream=True)["max_tokens"] == 4096
    assert "max_tokens" not in request_body(
        ModelRequest(target(), MESSAGES), LLMSettings(max_output_tokens=None), stream=True
    )
    profile = target(max_output_tokens=512)
    assert request_body(ModelRequest(profile, MESSAGES), default, stream=True)["max_tokens"] == 512
    agent = ModelRequest(profile, MESSAGES, max_output_tokens=128)
    assert request_body(agent, default, stream=True)["max_tokens"] == 128
    params = target(params={"max_tokens": 300})
    assert request_body(ModelRequest(params, MESSAGES), default, stream=True)["max_tokens"] == 300
    small = target(context_window=8192)  # the default leaves the prompt 4/5 of the window
    assert request_body(ModelRequest(small, MESSAGES), default, stream=True)["max_tokens"] == 1638
    explicit = ModelRequest(target(context_window=8192, max_output_tokens=3000), MESSAGES)
    assert request_body(explicit, default, stream=True)["max_tokens"] == 3000
    reasoning = target(params={"max_completion_tokens": 700})
    body = request_body(ModelRequest(reasoning, MESSAGES, max_output_tokens=900), default, stream=True)
    assert body["max_completion_tokens"] == 900 and "max_tokens" not in body


def test_tool_choice_only_with_tools_agent_over_profile():
    settings = LLMSettings()
    profile = target(tool_choice="auto", params={"parallel_tool_calls": False})
    with_tools = request_body(ModelRequest(profile, MESSAGES, TOOLS), settings, stream=True)
    assert with_tools["tool_choice"] == "auto" and with_tools["parallel_tool_calls"] is False
    agent = ModelRequest(profile, MESSAGES, TOOLS, tool_choice="required")
    assert request_body(agent, settings, stream=True)["tool_choice"] == "required"
    bare = request_body(ModelRequest(profile, MESSAGES), settings, stream=True)
    assert "tool_choice" not in bare and "parallel_tool_calls" not in bare and "tools" not in bare
    assert request_body(ModelRequest(target(), MESSAGES, TOOLS), settings, stream=True)["tool_choice"] == "auto"
    omitted = ModelRequest(target(tool_choice="omit"), MESSAGES, TOOLS)
    assert "tool_choice" not in request_body(omitted, settings, stream=True)
    unstreamed = request_body(ModelRequest(profile, MESSAGES, TOOLS), settings, stream=False)
    assert "stream" not in unstreamed and "stream_options" not in unstreamed


def test_profile_fields_are_read_from_models_yaml(tmp_path: Path):
    path = tmp_path / "models.yaml"
    path.write_text(
        "profiles:\n  local:\n    model: qwen\n    base_url: http://127.0.0.1:8080/v1\n"
        "    api_key_env: K\n    max_output_tokens: 1024\n    tool_choice: auto\n"
        "    stream_tools: false\n"
    )
    resolved = ModelRegistry.from_file(path, env={"K": "x"}).resolve("local")
    assert (resolved.max_output_tokens, resolved.tool_choice, resolved.stream_tools) == (1024, "auto", False)


# --- over HTTP ---------------------------------------------------------------------------------


async def test_post_path_keeps_auth_and_error_types(model, llm: ScriptedLLM):
    llm.script(Text("ok"), Error(401, "bad key"))
    request = ModelRequest(ResolvedModel(None, "m", llm.base_url, "secret-key"), MESSAGES)
    assert (await model.complete(request)).content == "ok"
    assert llm.request_headers[0]["authorization"] == "Bearer secret-key"
    body = llm.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 4096 and body["messages"] == MESSAGES
    with pytest.raises(FatalLLMError, match="HTTP 401.*bad key"):
        await model.complete(request)


async def test_stream_tools_false_sends_tool_turns_unstreamed(model, llm: ScriptedLLM):
    unstreamed = ResolvedModel(None, "m", llm.base_url, "k", stream_tools=False)
    llm.script(ToolCalls([Call("look", {"what": "sky"}, id="c1")], content="Looking."), Text("Blue."))
    deltas: list[str] = []
    response = await model.complete(ModelRequest(unstreamed, MESSAGES, TOOLS), deltas.append)
    assert response.tool_calls == [{"id": "c1", "name": "look", "arguments": '{"what": "sky"}'}]
    assert response.finish_reason == "tool_calls" and response.usage is not None
    assert deltas == ["Looking."]  # the text still reaches the user, in one piece
    assert "stream" not in llm.requests[0]
    await model.complete(ModelRequest(unstreamed, MESSAGES), deltas.append)
    assert llm.requests[1]["stream"] is True  # turns without tools still stream


async def test_call_deadline_stops_a_call_that_never_ends(llm: ScriptedLLM):
    chat = OpenAIChatModel(LLMSettings(max_retries=3, timeout=60, call_deadline=0.2))
    llm.script(Hang())
    try:
        with pytest.raises(RetryableLLMError, match=r"llm.call_deadline \(0.2 s\)"):
            await chat.complete(ModelRequest(ResolvedModel(None, "m", llm.base_url, "k"), MESSAGES))
    finally:
        await chat.aclose()


async def test_agent_front_matter_and_profile_reach_the_request(make_client, llm, tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", "k")
    config = make_config(tmp_path, lead_tools=["look"], yaml_text="model: local\n")
    (config / "models.yaml").write_text(
        "profiles:\n  local:\n    model: local-model\n"
        f"    base_url: {llm.base_url}\n    api_key_env: LOCAL_KEY\n"
        "    max_output_tokens: 1000\n    tool_choice: auto\n",
        encoding="utf-8",
    )
    write_agent(config / "agents", "lead_agent", role="lead", tools=["look"],
                extra=textwrap.dedent("""\
                    max_output_tokens: 256
                    tool_choice: required
                """))
    client = await make_client(config, extra_tools=[look])
    llm.script(ToolCalls([Call("look", {"what": "up"})]), Text("Done.", finish_reason="length"))
    result = await client.run("Look up")
    assert result.status == "completed"
    assert [r["max_tokens"] for r in llm.requests] == [256, 256]
    assert [r["tool_choice"] for r in llm.requests] == ["required", "required"]
    assert [r["model"] for r in llm.requests] == ["local-model", "local-model"]
    finishes = [e.data.finish_reason for e in result.events if e.type == "llm_complete"]
    assert finishes == ["tool_calls", "length"]
