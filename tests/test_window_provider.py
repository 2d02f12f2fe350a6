"""Against a provider that enforces a small window (the scripted server's `context_window`),
over real HTTP with the real client: the 400 it sends, recognising it, calibration from its
usage, and a long tool loop that compacts and never overflows."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from scripted_llm import Call, ScriptedLLM, Text, ToolCalls, context_length_body, request_tokens

from artifactflow.agents.model import ModelRequest, OpenAIChatModel, ResolvedModel
from artifactflow.agents.prompts import lead_messages
from artifactflow.agents.spec import AgentSpec
from artifactflow.core.state import assistant_message
from artifactflow.core.window.compaction import CompactionConfig, fit_request
from artifactflow.core.window.overflow import Overflow, parse_exception, parse_overflow
from artifactflow.core.window.rounds import check_pairs, rounds_in
from artifactflow.core.window.summary import SUMMARY_SYSTEM
from artifactflow.core.window.tokens import TokenCounter
from artifactflow.errors import LLMError
from artifactflow.settings import LLMSettings


class ChatClient:
    """The chat-completions Model, called the way an agent node calls it."""

    def __init__(self, settings: LLMSettings) -> None:
        self.model = OpenAIChatModel(settings)

    async def complete(self, target, messages, tools=None):  # type: ignore[no-untyped-def]
        response = await self.model.complete(ModelRequest(target, messages, tools))
        response.prompt_tokens = response.usage.prompt_tokens if response.usage else None
        return response

    async def aclose(self) -> None:
        await self.model.aclose()


TOOLS = [{"type": "function", "function": {"name": "fetch_page", "description": "Fetch page n",
          "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]
LEAD = AgentSpec(name="lead_agent", role="lead", tools=("fetch_page",), prompt="You are the lead agent.")


def page(n: int, size: int = 4096) -> str:
    return (f"page {n}: " + " ".join(f"w{(n * 7 + i) % 997}" for i in range(size // 4)))[:size]


async def test_window_enforced_with_a_real_provider_body_and_consistent_usage():
    with ScriptedLLM(Text("short answer"), context_window=500, chars_per_token=3.0) as llm:
        client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="k", max_retries=0)
        too_long = [{"role": "user", "content": "x" * 3000}]
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model="m", messages=too_long)
        figure = request_tokens({"messages": too_long}, 3.0)
        assert info.value.code == "context_length_exceeded" and info.value.status_code == 400
        assert f"maximum context length is 500 tokens. However, your messages resulted in {figure} tokens" in info.value.message
        assert llm.rejected == [figure] and llm.remaining == 1  # the script was not consumed
        overflow = parse_exception(info.value)
        assert overflow is not None and (overflow.requested_tokens, overflow.limit_tokens) == (figure, 500)
        # prompt + max_tokens over the window: the completion counts too, as with OpenAI
        fits = [{"role": "user", "content": "y" * 900}]
        with pytest.raises(openai.BadRequestError, match=r"in the messages, 300 in the completion"):
            await client.chat.completions.create(model="m", messages=fits, max_tokens=300)
        response = await client.chat.completions.create(model="m", messages=fits, tools=TOOLS)
        expected = request_tokens({"messages": fits, "tools": TOOLS}, 3.0)
        assert response.usage is not None and response.usage.prompt_tokens == expected
        assert llm.accepted_prompt_tokens == [expected] and expected <= 500
        assert len(llm.request_sizes) == 3 and 900 < llm.request_sizes[-1] < 2000
        await client.close()


def test_overflow_texts_of_several_providers_are_recognised():
    cases = [
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
              "(8000 in the messages, 1000 in the completion).", None, (8000, 8192)),  # the prompt's part
        (400, "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum "
              "context length", None, (40000, 32768)),
        (400, "prompt is too long: 213338 tokens > 200000 maximum", None, (213338, 200000)),
        (400, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
         None, (1200000, 1048576)),
        (400, "the request exceeds the available context size, try increasing it",
         {"error": {"type": "exceed_context_size_error", "n_prompt_tokens": 9100, "n_ctx": 8192}}, (9100, 8192)),
        (400, "bad", {"error": {"code": "context_length_exceeded", "message": "too long"}}, (None, None)),
    ]
    for status, message, body, figures in cases:
        overflow = parse_overflow(status, message, body)
        assert overflow is not None, message
        assert (overflow.requested_tokens, overflow.limit_tokens) == figures
    assert parse_overflow(429, "Request too large: 90000 tokens per min (TPM); maximum context length") is None
    assert parse_overflow(400, "Invalid value for 'temperature'") is None
    assert parse_overflow(401, "context length") is None


async def test_retries_do_not_hide_the_overflow_error_from_the_client():
    """Our client does not retry a 400; the overflow stays recognisable through LLMError."""
    with ScriptedLLM(context_window=200) as llm:
        client = ChatClient(LLMSettings(max_retries=3, backoff_base=0.01))
        model = ResolvedModel(None, "m", llm.base_url, "k")
        with pytest.raises(LLMError) as info:
            await client.complete(model, [{"role": "user", "content": "z" * 4000}])
        await client.aclose()
        assert len(llm.requests) == 1 and not info.value.retryable
        overflow = parse_exception(info.value)
        assert overflow is not None and overflow.limit_tokens == 200


async def run_tool_loop(llm: ScriptedLLM, rounds: int, window: int, keep: int = 4,
                        first_memory: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What an agent node will do: fit, call, observe, append; recover once on overflow."""
    client = ChatClient(LLMSettings(max_retries=0))
    # the window is declared, so the default output bound (max_tokens) leaves the prompt room
    model = ResolvedModel(None, "m", llm.base_url, "k", context_window=window)
    counter = TokenCounter()
    config = CompactionConfig(window=window, keep_recent_rounds=keep, summary_max_tokens=400,
                              agent="lead_agent", model_label="model 'm'")
    task = "Read pages 1..N and report the longest word."
    memory: list[dict[str, Any]] = list(first_memory or [])
    stats = {"compactions": 0, "summary_calls": 0, "recoveries": 0, "errors": []}

    async def summarize(messages: list[dict[str, Any]]) -> str:
        stats["summary_calls"] += 1
        response = await client.complete(model, messages)
        return response.content

    while True:
        fixed = lead_messages(LEAD, task=task, history=[], memory=[], subagents=[], artifacts=None)
        result = await fit_request(fixed=fixed, memory=memory, tools=TOOLS, task=task, summarize=summarize,
                                   counter=counter, config=config)
        if result is not None:
            stats["compactions"] += 1
            memory = result.memory
        for attempt in range(2):
            messages = [*fixed, *memory]
            measured = counter.measure(messages, TOOLS)
            try:
                response = await client.complete(model, messages, TOOLS)
                break
            except LLMError as exc:
                overflow = parse_exception(exc)
                if overflow is None or attempt == 1:
                    raise
                stats["recoveries"] += 1
                counter.observe(measured.raw, overflow.requested_tokens)
                result = await fit_request(fixed=fixed, memory=memory, tools=TOOLS, task=task,
                                           summarize=summarize, counter=counter, config=config, aggressive=True)
                assert result is not None
                memory = result.memory
        stats.setdefault("estimates", []).append((measured.tokens, response.prompt_tokens))
        counter.observe(measured.raw, response.prompt_tokens)
        assert check_pairs(memory) == []
        memory.append(assistant_message(response.content, response.tool_calls))
        if not response.tool_calls:
            break
        for call in response.tool_calls:
            n = json.loads(call["arguments"])["n"]
            memory.append({"role": "tool", "tool_call_id": call["id"], "content": page(n)})
    await client.aclose()
    stats["memory"] = memory
    return stats


def script_rounds(llm: ScriptedLLM, rounds: int) -> None:
    llm.route(lambda req: Text("notes: pages read so far, longest word w996")
              if req["messages"][0]["content"] == SUMMARY_SYSTEM else None)
    llm.script(*(ToolCalls([Call("fetch_page", {"n": n})]) for n in range(1, rounds + 1)), Text("w996"))


async def test_a_long_tool_loop_against_an_8k_window_never_overflows():
    """60 rounds of 4 KB results through an 8k window whose tokenizer is denser than our
    heuristic (3 characters per token): compaction keeps every request inside."""
    with ScriptedLLM(context_window=8192, chars_per_token=3.0) as llm:
        script_rounds(llm, 60)
        stats = await run_tool_loop(llm, 60, window=8192)
        assert llm.rejected == [] and not llm.unexpected
        assert max(llm.accepted_prompt_tokens) <= 8192 * 0.8 + 50
        assert stats["compactions"] == stats["summary_calls"] >= 5  # one summary call each
        assert stats["compactions"] <= 60 // 2  # not every round: each compaction leaves room
        assert rounds_in(stats["memory"]) == 60 and stats["memory"][-1]["content"] == "w996"
        # once calibrated, the estimate tracks the server's figure closely
        late = stats["estimates"][5:]
        assert max(abs(est - real) / real for est, real in late) < 0.05


async def test_overflow_recovery_when_the_estimate_is_far_off():
    """The provider counts 2 characters per token, our heuristic 4: the first big request
    overflows, the loop recalibrates from the error's figure and retries once, aggressively."""
    with ScriptedLLM(context_window=8192, chars_per_token=2.0) as llm:
        script_rounds(llm, 3)
        first = [assistant_message("", [{"id": "c0", "name": "fetch_page", "arguments": '{"n": 0}'}]),
                 {"role": "tool", "tool_call_id": "c0", "content": page(0, 17_000)}]
        stats = await run_tool_loop(llm, 3, window=8192, first_memory=first)
        assert len(llm.rejected) >= 1 and stats["recoveries"] >= 1
        assert llm.accepted_prompt_tokens and max(llm.accepted_prompt_tokens) <= 8192
        assert stats["memory"][-1]["content"] == "w996"
        retry = llm.requests[1]  # the request after the refused one
        tool_messages = [m for m in retry["messages"] if m["role"] == "tool"]
        assert len(tool_messages) == 1 and "were cut to fit" in tool_messages[0]["content"]


def test_the_prompt_figure_is_read_apart_from_the_requested_output():
    body = context_length_body(8192, 7000, 1638)
    overflow = parse_overflow(400, body["error"]["message"], body)
    assert overflow == Overflow(requested_tokens=7000, limit_tokens=8192)
