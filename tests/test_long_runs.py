"""Long runs through the real engine against a model with a small window (issue 10).

The scripted OpenAI-compatible server enforces the window the way providers do: above it, HTTP
400 `context_length_exceeded`; its "tokenizer" (3 characters per token) is denser than our
heuristic's 4, so the estimates must calibrate from reported usage. Every request the model
receives is checked: inside the window, every tool call with all of its results.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from conftest import make_config, write_agent
from scripted_llm import Call, Quirks, ScriptedLLM, Text, ToolCalls

from artifactflow import Client, Hooks, Resume, Task, load_settings, tool
from artifactflow.core.window.history import HISTORY_SYSTEM
from artifactflow.core.window.history_store import HistorySummaries
from artifactflow.core.window.rounds import check_pairs, is_summary, rounds_in
from artifactflow.core.window.summary import SUMMARY_SYSTEM

WINDOW = 8192
TASK = "Read every page in order and report the longest word."
PLAN = "PLAN-MARKER: 1. read the pages one by one  2. report the longest word"


def page(n: int, size: int = 4096) -> str:
    return (f"page {n}: " + " ".join(f"w{(n * 31 + i) % 9973}" for i in range(size // 5)))[:size]


@tool
def fetch_page(n: int) -> str:
    """Fetch one 4 KB page."""
    return page(n)


@tool
def fetch_huge(n: int) -> str:
    """Fetch a page far larger than the model's window."""
    return page(n, 60_000)


@tool(permission="confirm")
def publish(text: str) -> str:
    """Publish the text (asks a person first)."""
    return f"published {len(text)} characters"


def kind(body: dict[str, Any]) -> str:
    first = (body.get("messages") or [{}])[0].get("content")
    return {SUMMARY_SYSTEM: "summary", HISTORY_SYSTEM: "history"}.get(first, "agent")


def agent_requests(llm: ScriptedLLM) -> list[list[dict[str, Any]]]:
    return [b["messages"] for b in llm.requests if kind(b) == "agent"]


def assert_well_formed(messages: list[dict[str, Any]]) -> None:
    """Every tool call with all of its results, no result without its call."""
    calls = {c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or ()}
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sorted(results) == sorted(calls) and check_pairs(messages) == []


def events_of(result: Any, type_: str) -> list[Any]:
    return [e for e in result.events if e.type == type_]


@pytest_asyncio.fixture
async def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Callable[..., Any]]:
    """Start a windowed scripted server (or reuse one) and open a client on it."""
    for name in list(os.environ):
        if name.startswith("ARTIFACTFLOW_"):
            monkeypatch.delenv(name, raising=False)
    servers: list[ScriptedLLM] = []
    clients: list[Client] = []

    async def start(config: Path, *, llm: ScriptedLLM | None = None, tools: tuple[Any, ...] = (),
                    hooks: tuple[Any, ...] = (), **server: Any) -> tuple[ScriptedLLM, Client]:
        if llm is None:
            llm = ScriptedLLM(**{"context_window": WINDOW, "chars_per_token": 3.0, **server}).start()
            servers.append(llm)
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        settings = load_settings(config, config.parent / "data")
        client = await Client.open(
            settings, extra_tools=[fetch_page, fetch_huge, publish, *tools], hooks=hooks
        )
        clients.append(client)
        return llm, client

    yield start
    for client in clients:
        await client.aclose()
    for server in servers:
        server.close()


def config_for(root: Path, lead_tools: list[str], *, rounds: int = 400, yaml_text: str = "",
               plugin_files: dict[str, str] | None = None) -> Path:
    return make_config(root, lead_tools=lead_tools, max_tool_rounds=rounds, plugin_files=plugin_files,
                       yaml_text=f"context:\n  default_window: {WINDOW}\n" + yaml_text)


def summarizing(answer: Callable[[list[dict[str, Any]]], Any]) -> Callable[[dict[str, Any]], Any]:
    """A route: summary requests get notes, the rest `answer(messages)`."""
    def route(body: dict[str, Any]) -> Any:
        if kind(body) == "summary":
            return Text("notes: pages read so far; longest word so far w9972")
        if kind(body) == "history":
            return Text("the user asked numbered questions about rainfall; each was answered")
        return answer(body["messages"])
    return route


async def test_300_rounds_of_4kb_results_through_an_8k_window(tmp_path: Path, engine):
    """The issue's headline: 300 rounds complete, no request exceeds the window, every
    compaction is one summary call, and the plan and the task are in every request."""
    config = config_for(tmp_path, ["fetch_page", "create_artifact"])

    def answer(messages: list[dict[str, Any]]) -> Any:
        done = rounds_in(messages)
        if done == 0:
            return ToolCalls([Call("create_artifact", {"id": "task_plan", "title": "Plan", "content": PLAN})])
        return ToolCalls([Call("fetch_page", {"n": done})]) if done <= 300 else Text("longest: w9972")

    llm, client = await engine(config)
    llm.route(summarizing(answer))
    result = await client.run(TASK)
    assert (result.status, result.outcome, result.response) == ("completed", "completed", "longest: w9972"), result.error
    assert llm.rejected == [] and not llm.unexpected
    assert max(llm.accepted_prompt_tokens) <= WINDOW
    requests = agent_requests(llm)
    assert len(requests) == 302 and rounds_in(requests[-1]) == 301  # nothing lost from the count
    for messages in requests:
        assert_well_formed(messages)
        assert {"role": "user", "content": TASK} in messages
    assert all(PLAN in messages[0]["content"] for messages in requests[2:])  # once it exists
    compactions = events_of(result, "context_compacted")
    summaries = [b for b in llm.requests if kind(b) == "summary"]
    assert len(compactions) == len(summaries) and 20 <= len(compactions) <= 300 // 2
    assert all(e.data.tokens_after < e.data.tokens_before and e.data.scope == "memory" for e in compactions)
    assert compactions[-1].data.rounds_summarized > 250  # the summary stands for all older rounds
    # the summary calls are metered like any call
    assert result.metrics["llm_calls"] == len(llm.requests)
    assert sum(e.data.usage.prompt_tokens for e in compactions) > 0


async def test_a_subagents_memory_is_compacted_with_its_instruction_kept(tmp_path: Path, engine):
    config = config_for(tmp_path, ["call_subagent"])
    write_agent(config / "agents", "reader", tools=["fetch_page"], max_tool_rounds=100,
                prompt="You are reader, a subagent.")
    instruction = "INSTRUCTION-MARKER: read pages 1 to 15"

    def answer(messages: list[dict[str, Any]]) -> Any:
        done = rounds_in(messages)
        if messages[0]["content"].startswith("You are reader"):
            return ToolCalls([Call("fetch_page", {"n": done + 1})]) if done < 15 else Text("reader: w9972")
        if done == 0:
            return ToolCalls([Call("call_subagent", {"agent_name": "reader", "instruction": instruction})])
        return Text("the reader says w9972")

    class Compactions(Hooks):
        def __init__(self) -> None:
            self.seen: list[tuple[str, int, int, str | None]] = []

        async def on_compaction(self, run, agent, compaction) -> None:
            self.seen.append((agent.name, compaction.tokens_before, compaction.tokens_after,
                              compaction.summary_model))

    hook = Compactions()
    llm, client = await engine(config, hooks=(hook,))
    llm.route(summarizing(answer))
    result = await client.run(TASK)
    assert (result.status, result.response) == ("completed", "the reader says w9972"), result.error
    assert llm.rejected == []
    reader = [m for m in agent_requests(llm) if m[0]["content"].startswith("You are reader")]
    assert len(reader) == 16 and rounds_in(reader[-1]) == 15
    for messages in reader:
        assert_well_formed(messages)
        assert messages[1] == {"role": "user", "content": instruction}
    compactions = [e for e in events_of(result, "context_compacted") if e.agent == "reader"]
    assert compactions and any(is_summary(m) for m in reader[-1])
    # the on_compaction hook saw each one, with the same figures
    assert hook.seen == [("reader", e.data.tokens_before, e.data.tokens_after, e.data.summary_model)
                         for e in compactions]
    lead_last = agent_requests(llm)[-1]
    assert {"role": "tool", "tool_call_id": lead_last[-1]["tool_call_id"], "content": "reader: w9972"} == lead_last[-1]


async def test_pause_for_permission_after_a_compaction_and_resume_in_a_new_process(tmp_path: Path, engine):
    config = config_for(tmp_path, ["fetch_page", "publish"])

    def answer(messages: list[dict[str, Any]]) -> Any:
        done = rounds_in(messages)
        if done < 8:
            return ToolCalls([Call("fetch_page", {"n": done + 1})])
        if done == 8:
            return ToolCalls([Call("publish", {"text": "report"}, id="pub")])
        return Text("published the report")

    llm, client = await engine(config)
    llm.route(summarizing(answer))
    paused = await client.run(TASK)
    assert paused.status == "waiting", paused.error
    assert events_of(paused, "context_compacted")  # the memory was compacted before the pause
    await client.aclose()

    _, later = await engine(config, llm=llm)  # another process, same stores
    result = await later.run(Resume(paused.message_id, "approve"))
    assert (result.status, result.response) == ("completed", "published the report"), result.error
    last = agent_requests(llm)[-1]
    assert_well_formed(last)
    assert any(is_summary(m) for m in last) and rounds_in(last) == 9
    assert {"role": "tool", "tool_call_id": "pub", "content": "published 6 characters"} in last
    assert llm.rejected == []


async def test_overflow_recovery_against_a_server_that_reports_no_usage(tmp_path: Path, engine):
    """A local server sends no usage and counts 2 characters per token: the uncalibrated
    estimate is half the real figure, so a request overflows; the run recalibrates from the
    figure in the error, compacts aggressively, retries once and goes on."""
    config = config_for(tmp_path, ["fetch_page"])

    def answer(messages: list[dict[str, Any]]) -> Any:
        done = rounds_in(messages)
        return ToolCalls([Call("fetch_page", {"n": done + 1})]) if done < 12 else Text("done reading")

    llm, client = await engine(config, chars_per_token=2.0, quirks=Quirks(no_usage=True))
    llm.route(summarizing(answer))
    result = await client.run(TASK)
    assert (result.status, result.response) == ("completed", "done reading"), result.error
    assert llm.rejected  # the estimate was wrong at least once ...
    aggressive = [e for e in events_of(result, "context_compacted") if e.data.aggressive]
    assert aggressive and len(aggressive) <= len(llm.rejected)  # ... and each refusal was recovered once
    assert rounds_in(agent_requests(llm)[-1]) == 12
    finish = [e.data.finish_reason for e in events_of(result, "llm_complete")]
    assert finish[-1] == "stop" and set(finish[:-1]) == {"tool_calls"}


async def test_a_single_oversized_result_is_shortened_and_a_huge_task_fails_clearly(tmp_path: Path, engine):
    config = config_for(tmp_path, ["fetch_huge"], yaml_text="tools:\n  max_result_chars: 100000\n")

    def answer(messages: list[dict[str, Any]]) -> Any:
        return ToolCalls([Call("fetch_huge", {"n": 1})]) if rounds_in(messages) == 0 else Text("read it")

    llm, client = await engine(config)
    llm.route(summarizing(answer))
    result = await client.run(TASK)
    assert (result.status, result.response) == ("completed", "read it"), result.error
    assert llm.rejected == []
    shortened = [m for m in agent_requests(llm)[-1] if m["role"] == "tool"][0]["content"]
    assert len(shortened) < 30_000 and "were cut to fit the model's context window" in shortened
    event = events_of(result, "context_compacted")[0]
    assert event.data.results_shortened == 1 and event.data.rounds_summarized == 0

    # what cannot be compacted (the task itself) fails the run with the setting to change
    failed = await client.run("summarize this: " + "lorem ipsum " * 4000)
    assert failed.status == "failed"
    assert "`context_window`" in failed.error and "models.yaml" in failed.error
    assert events_of(failed, "error")[-1].data.kind == "ContextWindowExceeded"
    assert len(llm.requests) == 2  # the refused run never reached the model


async def test_a_cut_off_tool_call_comes_back_as_a_tool_error(tmp_path: Path, make_client):
    from artifactflow import Reply, ScriptedModel, ToolCall

    client = await make_client(lead_tools=["fetch_page"], extra_tools=[fetch_page])
    model = ScriptedModel(
        Reply(tool_calls=[ToolCall("fetch_page", '{"n": 1', id="cut")], finish_reason="length"),
        Reply("sorry, retrying was not needed"),
    )
    client.admin.services.use_model(model)
    result = await client.run("read page 1")
    assert result.status == "completed", result.error
    assert [e.data.finish_reason for e in events_of(result, "llm_complete")] == ["length", "stop"]
    tool_message = next(m for m in model.requests[1].messages if m["role"] == "tool")
    assert tool_message["tool_call_id"] == "cut" and "not valid JSON" in tool_message["content"]


async def test_a_long_conversation_reuses_its_stored_history_summary(tmp_path: Path, engine):
    """60 messages of ~1,000-token turns: the history is condensed every few messages, each
    summary stored once and reused by the messages after it; no request exceeds the window."""
    config = config_for(tmp_path, [])
    long_answer = "because " * 500
    llm, client = await engine(config)
    llm.route(summarizing(lambda messages: Text(f"answer {len(messages)}: {long_answer}", chunk_size=500)))
    conversation_id = None
    for n in range(60):
        result = await client.run(Task(f"question {n}: " + "why " * 400, conversation_id))
        assert result.status == "completed", result.error
        conversation_id = result.conversation_id
    assert llm.rejected == [] and max(llm.accepted_prompt_tokens) <= WINDOW
    history_calls = [b for b in llm.requests if kind(b) == "history"]
    stored = await HistorySummaries(client.admin.store).for_conversation(conversation_id)
    assert 3 <= len(history_calls) == len(stored) <= 60 // 3  # not every message
    assert [row["covers"] for row in stored] == sorted({row["covers"] for row in stored})
    last = agent_requests(llm)[-1]
    assert last[1]["role"] == "system" and last[1]["content"].startswith("Summary of the earlier conversation")
    assert last[-1]["content"].startswith("question 59")
    # tokens and cost per message and per conversation
    totals = result.metrics["conversation"]
    assert totals["messages"] == 60 and totals["tokens"]["total"] > 60 * 1000
    tree = await client.conversations.tree(conversation_id)
    assert tree["usage"]["tokens"]["total"] == totals["tokens"]["total"]
    assert all(node["tokens"] > 0 for node in tree["messages"])


async def test_max_tool_rounds_1000_is_reached_at_exactly_1000_rounds(tmp_path: Path, make_client):
    from artifactflow import Reply, ScriptedModel, ToolCall

    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    config = make_config(tmp_path, lead_tools=["ping"], max_tool_rounds=1000)
    client = await make_client(config, tmp_path / "data", extra_tools=[ping])

    def respond(request: Any) -> Reply:
        if request.messages[0]["content"] == SUMMARY_SYSTEM:
            return Reply("notes: pinged many times")
        return Reply(tool_calls=[ToolCall("ping")])

    model = ScriptedModel(function=respond)
    client.admin.services.use_model(model)
    result = await client.run("ping forever")
    assert (result.status, result.outcome) == ("completed", "max_tool_rounds"), result.error
    agent = [r.messages for r in model.requests if r.messages[0]["content"] != SUMMARY_SYSTEM]
    assert len(agent) == 1001 and rounds_in(agent[-1]) == 1000
    assert "reached max_tool_rounds (1000)" in result.response
    assert len(events_of(result, "tool_complete")) == 1000


# --- budgets -----------------------------------------------------------------------------------


PRICED = """profiles:
  small:
    model: scripted-model
    base_url_env: OPENAI_BASE_URL
    api_key_env: OPENAI_API_KEY
    context_window: 8192
    input_per_mtok: 100.0
    output_per_mtok: 200.0
"""


def looping(messages: list[dict[str, Any]]) -> Any:
    done = rounds_in(messages)
    return ToolCalls([Call("fetch_page", {"n": done + 1})], content=f"reading page {done + 1}")


def assert_stopped_between_steps(result: Any, setting: str) -> None:
    assert (result.status, result.outcome) == ("completed", "budget_exceeded"), result.error
    complete = events_of(result, "complete")[-1]
    assert setting in complete.data.reason and complete.data.outcome == "budget_exceeded"
    assert result.response.startswith("reading page")  # the lead's latest text is kept
    started = [e.data.tool_call_id for e in events_of(result, "tool_start")]
    finished = [e.data.tool_call_id for e in events_of(result, "tool_complete")]
    assert started == finished  # never stopped inside a tool call


async def test_token_budget_ends_the_run_with_its_outcome(tmp_path: Path, engine):
    config = config_for(tmp_path, ["fetch_page"], yaml_text="budget:\n  max_tokens: 20000\n")
    llm, client = await engine(config)
    llm.route(summarizing(looping))
    result = await client.run(TASK)
    assert_stopped_between_steps(result, "budget.max_tokens")
    # crossed by the last step (its summary call, if any, and its model call), not before
    tokens = result.metrics["tokens"]["total"]
    last_step = result.events[max(i for i, e in enumerate(result.events) if e.type == "agent_start"):]
    step_tokens = sum(e.data.usage.prompt_tokens + e.data.usage.completion_tokens
                      for e in last_step if e.type in ("llm_complete", "context_compacted"))
    assert tokens - step_tokens < 20000 <= tokens
    assert result.error == events_of(result, "complete")[-1].data.reason


async def test_cost_budget_and_an_agents_own_budget(tmp_path: Path, engine):
    config = config_for(tmp_path / "cost", ["fetch_page"], yaml_text="model: small\nbudget:\n  max_cost_usd: 0.5\n")
    (config / "models.yaml").write_text(PRICED)
    llm, client = await engine(config)
    llm.route(summarizing(looping))
    result = await client.run(TASK)
    assert_stopped_between_steps(result, "budget.max_cost_usd")
    costs = [e.data.cost_usd for e in events_of(result, "llm_complete")]
    assert all(c is not None and c > 0 for c in costs)
    assert result.metrics["cost_usd"] == pytest.approx(sum(costs))
    assert sum(costs[:-1]) < 0.5 <= sum(costs)  # no summary call here: the last call crossed it
    assert result.metrics["cost_complete"] is True

    # an agent's own max_tokens (front matter) names its file
    config = config_for(tmp_path / "agent", ["fetch_page"])
    write_agent(config / "agents", "lead_agent", role="lead", tools=["fetch_page"], max_tool_rounds=400,
                prompt="You are the lead agent.", extra="max_tokens: 15000\n")
    _, client = await engine(config, llm=llm)
    result = await client.run(TASK)
    assert_stopped_between_steps(result, "max_tokens in the front matter")


async def test_cost_budget_refuses_to_start_without_prices(tmp_path: Path, engine):
    from artifactflow import UserError

    config = config_for(tmp_path, ["fetch_page"], yaml_text="budget:\n  max_cost_usd: 1.0\n")
    llm, client = await engine(config)
    with pytest.raises(UserError, match="input_per_mtok"):
        await client.runs.start(TASK)
    assert llm.requests == [] and await client.conversations.list() == []


def test_budget_exit_code_is_documented():
    from artifactflow.cli import exitcodes

    assert exitcodes.for_outcome("complete", "budget_exceeded") == exitcodes.BUDGET == 6
    assert "budget" in exitcodes.HELP and "| 6" in exitcodes.__doc__


def test_cli_budget_exit_code_closing_line_and_history_totals(tmp_path: Path, llm_env: ScriptedLLM, capsys):
    from test_cli import CLI, CONVERSATION_ID

    plugin = "from artifactflow import tool\n\n@tool\ndef fetch_page(n: int) -> str:\n    \"\"\"Fetch.\"\"\"\n    return 'word ' * 800\n"
    config = config_for(tmp_path, ["fetch_page"], yaml_text="plugins: [pages]\nbudget:\n  max_tokens: 3000\n",
                        plugin_files={"pages.py": plugin})
    llm_env.route(summarizing(looping))
    cli = CLI(config, tmp_path / "data", capsys)
    result = cli.call("run", TASK, "--no-input")
    assert result.code == 6, result.out + result.err
    assert "⚠ stopped: token budget reached" in result.out and "budget.max_tokens" in result.out
    conversation_id = CONVERSATION_ID.search(result.out).group(1)
    shown = cli.call("history", conversation_id)
    assert shown.code == 0 and re.search(r"· [\d,]+ tokens", shown.out)
    assert re.search(r"conversation: 1 messages · [\d,]+ tokens", shown.out)
