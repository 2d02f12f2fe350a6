"""The client against the habits of real servers (issue 11), each reproduced by the scripted
server's quirks mode: first proof that the quirk is there on the wire (so the test can fail),
then the client's behaviour, at the model seam and through whole runs."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest
import pytest_asyncio
from conftest import make_config
from scripted_llm import LLAMA_CPP_PYTHON, LLAMA_SERVER, Call, Quirks, ScriptedLLM, Text, ToolCalls

from artifactflow import ModelRequest, RetryableLLMError, tool
from artifactflow.agents.model import OpenAIChatModel, ResolvedModel
from artifactflow.cli.render import closing_line
from artifactflow.events.payloads import CompleteData
from artifactflow.settings import LLMSettings

POLICY = LLMSettings(max_retries=2, backoff_base=0.0, backoff_max=0.0)
MESSAGES = [{"role": "user", "content": "go"}]
TOOLS = [{"type": "function", "function": {"name": "append_note", "parameters": {"type": "object"}}}]


@tool
async def append_note(text: str) -> str:
    """Append a note.

    Args:
        text: The note.
    """
    return f"noted: {text}"


@pytest_asyncio.fixture
async def model() -> AsyncIterator[OpenAIChatModel]:
    chat = OpenAIChatModel(POLICY)
    yield chat
    await chat.aclose()


def request(llm: ScriptedLLM, tools: list | None = None, **target: object) -> ModelRequest:
    return ModelRequest(
        ResolvedModel(None, "m", llm.base_url, "test-key", **target), MESSAGES, tools, agent="a"  # type: ignore[arg-type]
    )


async def raw_stream(llm: ScriptedLLM, messages: list[dict], tools: list | None = None) -> list:
    client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="k", max_retries=0)
    try:
        extra = {"tools": tools} if tools else {}
        stream = await client.chat.completions.create(
            model="m", messages=messages, stream=True, **extra  # type: ignore[arg-type]
        )
        return [chunk async for chunk in stream]
    finally:
        await client.close()


# --- 1. repeated tool names ----------------------------------------------------------------


async def test_repeated_tool_names_in_deltas_are_not_appended(model, llm):
    llm.quirks = Quirks(repeat_tool_names=True)
    call = Call("append_note", {"text": "a long enough note"}, id="c1")
    llm.script(ToolCalls([call], chunk_size=4))
    chunks = await raw_stream(llm, MESSAGES)
    names = [p.function.name for c in chunks for ch in c.choices for p in ch.delta.tool_calls or []]
    assert len(names) > 3 and set(names) == {"append_note"}  # the quirk: the name every time

    llm.script(ToolCalls([call], chunk_size=4))
    response = await model.complete(request(llm))
    assert response.tool_calls == [
        {"id": "c1", "name": "append_note", "arguments": '{"text": "a long enough note"}'}
    ]


async def test_name_fragments_are_still_joined(model, llm):
    """What OpenAI itself may do: a name split over deltas still arrives whole."""
    from artifactflow.agents.model.openai_wire import Assembly

    class Fn:
        def __init__(self, name: str | None, arguments: str) -> None:
            self.name, self.arguments = name, arguments

    class Part:
        def __init__(self, name: str | None, arguments: str = "") -> None:
            self.index, self.id, self.function = 0, "c1", Fn(name, arguments)

    assembly = Assembly("m")
    for part in (Part("append_"), Part("note"), Part(None, "{}"), Part("append_note")):
        assembly._add_call_part(part)
    assert assembly.calls[0]["name"] == "append_note" and assembly.calls[0]["arguments"] == "{}"


# --- 2. "content": null ----------------------------------------------------------------------


async def test_null_content_is_refused_by_the_quirky_server_and_never_sent(model, llm):
    llm.quirks = Quirks(reject_null_content=True)
    with pytest.raises(openai.InternalServerError, match="valid string"):
        await raw_stream(llm, [*MESSAGES, {"role": "assistant", "content": None}])
    assert len(llm.refused) == 1

    history = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "append_note", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "noted"},
    ]
    llm.script(Text("fine"))
    response = await model.complete(ModelRequest(request(llm).target, history))
    assert response.content == "fine" and len(llm.refused) == 1
    assert llm.last_request["messages"][1]["content"] == ""
    assert history[1]["content"] is None  # the caller's memory is not changed


# --- 4. streams without finish_reason, empty streams ------------------------------------------


async def test_empty_stream_is_retried_then_answered(model, llm):
    llm.script(Text("lost", quirks=Quirks(empty_stream=True)), Text("second try"))
    response = await model.complete(request(llm))
    assert response.content == "second try" and response.attempts == 2


async def test_a_server_that_cannot_stream_tools_gets_them_unstreamed(model, llm, caplog):
    """llama-cpp-python answers a streamed request offering tools with an empty stream: the
    turn is sent again unstreamed, the endpoint's later tool turns go unstreamed at once, and
    one warning names the profile setting that starts that way."""
    llm.quirks = Quirks(no_streamed_tools=True)
    # the empty stream uses up a scripted answer as the server's own would use up a turn
    llm.script(*[ToolCalls([Call("append_note", {"text": str(i)})]) for i in (9, 0, 1)])
    first = await model.complete(request(llm, TOOLS))
    second = await model.complete(request(llm, TOOLS))
    assert [json.loads(r.tool_calls[0]["arguments"]) for r in (first, second)] == [
        {"text": "0"}, {"text": "1"},
    ]
    assert [r.get("stream", False) for r in llm.requests] == [True, False, False]
    assert llm.requests[0]["tool_choice"] == "auto"  # sent by default with tools
    warnings = [r.getMessage() for r in caplog.records if "empty stream" in r.getMessage()]
    assert len(warnings) == 1 and "stream_tools: false" in warnings[0]


async def test_empty_streams_without_tools_end_in_an_error_never_done(model, llm):
    llm.quirks = Quirks(empty_stream=True)
    llm.script(*[Text("never sent")] * 3)
    with pytest.raises(RetryableLLMError) as info:
        await model.complete(request(llm))
    message = str(info.value)
    assert "after 3 attempts" in message and "empty stream" in message


async def test_tool_call_stream_cut_short_is_retried(model, llm):
    cut = ToolCalls([Call("append_note", {"text": "x"})], quirks=Quirks(no_finish_reason=True))
    llm.script(cut, ToolCalls([Call("append_note", {"text": "y"})]))
    response = await model.complete(request(llm, TOOLS))
    assert response.attempts == 2 and json.loads(response.tool_calls[0]["arguments"]) == {"text": "y"}


async def test_text_stream_cut_short_after_output_is_an_error_not_a_replay(model, llm):
    llm.script(Text("half an answer", quirks=Quirks(no_finish_reason=True)), Text("unused"))
    deltas: list[str] = []
    with pytest.raises(RetryableLLMError, match="cut short"):
        await model.complete(request(llm), deltas.append)
    assert "".join(deltas) == "half an answer" and llm.remaining == 1


# --- no usage ----------------------------------------------------------------------------------


async def test_missing_usage_stays_unknown(model, llm):
    llm.quirks = Quirks(no_usage=True)
    llm.script(Text("no figures"))
    response = await model.complete(request(llm))
    assert response.usage is None and response.content == "no figures"


# --- whole runs --------------------------------------------------------------------------------


def local_profile(config: Path, llm: ScriptedLLM, body: str) -> None:
    (config / "models.yaml").write_text(
        "profiles:\n  local:\n    model: local-model\n"
        f"    base_url: {llm.base_url}\n    api_key_env: LOCAL_KEY\n" + textwrap.indent(body, "    "),
        encoding="utf-8",
    )


async def test_llama_cpp_python_habits_with_its_profile(make_client, llm, tmp_path, monkeypatch):
    """Repeated names, null content refused, no streamed tools, no usage: a tool round and an
    answer go through with `tool_choice: auto` and `stream_tools: false`."""
    monkeypatch.setenv("LOCAL_KEY", "k")
    llm.quirks = LLAMA_CPP_PYTHON
    config = make_config(tmp_path, lead_tools=["append_note"], yaml_text="model: local\n")
    local_profile(config, llm, "tool_choice: auto\nstream_tools: false\n")
    client = await make_client(config, extra_tools=[append_note])
    llm.script(ToolCalls([Call("append_note", {"text": "first"})]), Text("All noted."))
    result = await client.run("Take a note")
    assert result.status == "completed" and result.response == "All noted."
    assert llm.refused == []
    first, second = llm.requests
    assert "stream" not in first and first["tool_choice"] == "auto"
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["function"]["name"] == "append_note"
    done = [e for e in result.events if e.type == "tool_complete"]
    assert done[0].data.success and done[0].data.result.data == "noted: first"
    # no usage sent: counted offline and marked estimated (never zero, never "n/a")
    llm_events = [e for e in result.events if e.type == "llm_complete"]
    assert all(e.data.usage_estimated is True for e in llm_events)
    assert all((e.data.usage.prompt_tokens or 0) > 0 for e in llm_events)
    assert (llm_events[1].data.usage.completion_tokens or 0) >= 2  # "All noted."
    tokens = result.metrics["tokens"]
    prompts = sum(e.data.usage.prompt_tokens or 0 for e in llm_events)
    assert tokens["prompt"] == prompts and tokens["estimated_calls"] == 2
    assert tokens["unreported_calls"] == 0
    line = closing_line(CompleteData(response="", metrics=result.metrics))
    assert f"~{tokens['total']} tokens" in line and "2 calls estimated: no usage sent" in line


async def test_malformed_arguments_are_not_echoed_to_a_strict_server(make_client, llm):
    llm.quirks = LLAMA_SERVER
    client = await make_client(lead_tools=["append_note"], extra_tools=[append_note])
    llm.script(
        ToolCalls([Call("append_note", '{"text": "cut off by max_tok')], finish_reason="length"),
        Text("Sorry, retrying later."),
    )
    result = await client.run("Take a note")
    assert result.status == "completed" and llm.refused == []
    second = llm.requests[1]["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    (tool_message,) = [m for m in second if m["role"] == "tool"]
    assert "not valid JSON" in tool_message["content"] and "cut off by max_tok" in tool_message["content"]
    first = next(e for e in result.events if e.type == "llm_complete")
    assert first.data.finish_reason == "length"


async def test_run_on_empty_streams_fails_instead_of_completing(make_client, llm):
    client = await make_client()
    llm.quirks = Quirks(empty_stream=True)
    llm.script(*[Text("never sent")] * 3)
    result = await client.run("hello?")
    assert result.status == "failed" and result.response in (None, "")
    assert "empty stream" in (result.error or "")
    assert llm.request_count == 3  # the first try and two retries (max_retries: 2)


async def test_partial_usage_is_reported_as_a_partial_sum():
    from artifactflow.core.metrics import summarize

    records = [
        {"kind": "llm", "agent": "a", "model": "m", "prompt_tokens": 10, "completion_tokens": 5},
        {"kind": "llm", "agent": "a", "model": "m", "prompt_tokens": None, "completion_tokens": None},
    ]
    tokens = summarize(records, 1.0)["tokens"]
    assert tokens == {"prompt": 10, "completion": 5, "total": 15, "unreported_calls": 1}
    line = closing_line(CompleteData(response="", metrics={"tokens": tokens}))
    assert "15 tokens" in line and "n/a for 1 call without usage" in line
    assert summarize([], 1.0)["tokens"]["total"] == 0
