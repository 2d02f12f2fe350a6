"""Small local models fail fast and clearly (issue 38).

Measured with Gemma 3 270M on llama-cpp-python: 30 `call_subagent` calls to agents that do not
exist (`agent1`, `machine_id:179304`) or with broken JSON, 27.6 minutes, because each call's
arguments differed and the loop guard counted only identical calls; and `web_fetch` calls
with `[""]` or `[]` were put to a person. Everything here runs through the scripted
OpenAI-compatible server over HTTP and a real SQLite store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from scripted_llm import Call, Delay, Error, Text, ToolCalls

from artifactflow import Task
from artifactflow.agents.model import ModelRequest, OpenAIChatModel, ResolvedModel
from artifactflow.core import loop_guard
from artifactflow.errors import RetryableLLMError
from artifactflow.settings import LLMSettings
from artifactflow.testing import LLAMA_CPP_PYTHON

SUBS = {"search_agent": [], "crawl_agent": []}


def tool_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_unknown_subagent_names_that_vary_are_one_kind_told_then_stopped(make_client, llm):
    client = await make_client(lead_tools=["call_subagent"], subagents=SUBS)
    names = ["agent1", "machine_id:179304", "agent2", "researcher", "agent3", "agent4"]
    llm.script(*[
        ToolCalls([Call("call_subagent", {"agent_name": n, "instruction": "find it"})],
                  content=f"try {i}")
        for i, n in enumerate(names)
    ])
    result = await client.run(Task("research something"))
    assert result.outcome == "loop_detected"
    assert llm.request_count == 5  # stopped at the fifth malformed call, no sixth request
    assert "malformed tool calls of one kind 5 times in a row" in result.events[-1].data.reason
    assert "an unknown subagent name" in result.events[-1].data.reason
    third = tool_texts(llm.requests[3])[-1]  # the result of the third call, as the model saw it
    assert "3 calls of call_subagent in a row failed with an unknown subagent name" in third
    assert "Valid subagents: crawl_agent, search_agent" in third or (
        "Valid subagents: search_agent, crawl_agent" in third
    )
    assert "Varying the arguments will not help" not in tool_texts(llm.requests[2])[-1]


async def test_broken_json_of_varying_text_is_one_kind(make_client, llm):
    client = await make_client(lead_tools=["call_subagent"], subagents=SUBS)
    broken = ['{"agent_name": "search_agent', '{agent_name: x}', '{"a": 1,,}', "call it", "{"]
    llm.script(*[ToolCalls([Call("call_subagent", raw)]) for raw in broken], Text("never"))
    result = await client.run(Task("go"))
    assert result.outcome == "loop_detected" and llm.request_count == 5
    assert "arguments that are not one JSON object" in result.events[-1].data.reason


async def test_malformed_edits_between_successful_reads_are_counted_in_a_window(make_client, llm):
    """Measured with Gemma 3 270M and the default agents: `read_artifact` succeeded between
    failing `update_artifact` and `rewrite_artifact` calls, so no streak formed and the run
    ground on. Malformed calls of one family (here: invalid arguments, of two tools) are
    counted within the last calls whatever succeeded between: told what is valid at the third,
    stopped at the fifth."""
    client = await make_client(lead_tools=["list_artifacts", "update_artifact", "rewrite_artifact"])
    edits = [Call("update_artifact", {"id": "plan", "old": "a"}),
             Call("rewrite_artifact", {"artifact": "plan"})] * 3
    script = []
    for i, edit in enumerate(edits):
        script += [ToolCalls([edit], content=f"edit {i}"), ToolCalls([Call("list_artifacts", {})])]
    llm.script(*script, Text("never"))
    result = await client.run(Task("write a plan"))
    assert result.outcome == "loop_detected", result.response
    assert llm.request_count == 9  # the fifth malformed edit (the ninth call) ends it
    reason = result.events[-1].data.reason
    assert "5 malformed tool calls (invalid arguments) within its last 9 calls" in reason
    third = tool_texts(llm.requests[5])[-1]  # the third edit's result, as the model saw it
    assert "3 of your last 5 tool calls were malformed (invalid arguments: " in third
    assert "rewrite_artifact, update_artifact" in third
    schema = json.loads(third.split("JSON schema: ", 1)[1].rsplit(" Send one valid call", 1)[0])
    assert set(schema["required"]) >= {"id", "old_str", "new_str"}
    assert "[loop guard]" not in tool_texts(llm.requests[3])[-1]  # the second is not told


async def test_invalid_calls_of_a_confirm_tool_go_back_to_the_model_without_asking(
    make_client, llm
):
    """`web_fetch` needs approval; `[""]` and `[]` are schema-valid lists but can only fail:
    they are refused before anyone is asked, and the third such call carries the schema."""
    client = await make_client(lead_tools=["web_fetch"])
    bad = [{"url_list": [""]}, {"url_list": []}, {"url_list": ["  "]}]
    llm.script(*[ToolCalls([Call("web_fetch", args)]) for args in bad], Text("I give up"))
    events = [e async for e in await client.runs.start(Task("read a page"))]
    types = [e.type for e in events]
    assert "permission_request" not in types, types
    assert events[-1].type == "complete" and events[-1].data.response == "I give up"
    results = tool_texts(llm.requests[-1])
    assert results[0].startswith("ERROR: invalid arguments for 'web_fetch': url_list.0")
    assert "at least 1 item" in results[1]
    assert "3 calls of web_fetch in a row failed with invalid arguments (url_list)" in results[2]
    schema = json.loads(results[2].split("JSON schema: ", 1)[1].rsplit(" Send one valid call", 1)[0])
    assert schema["properties"]["url_list"]["minItems"] == 1


async def test_a_tool_error_with_other_arguments_is_still_a_new_attempt(make_client, llm):
    """Only malformed calls count by kind: a tool that fails on what it was given (a page that
    is not there) with other arguments each time is not stopped early."""
    sig = [
        loop_guard.signature("t", json.dumps({"id": i}), f"ERROR: no document '{i}'")
        for i in range(2)
    ]
    assert sig[0] != sig[1] and not loop_guard._same(sig[0], sig[1])
    kinds = [
        loop_guard.signature("t", json.dumps({"u": i}), f"ERROR: invalid arguments for 't': u.{i}: bad")
        for i in range(2)
    ]
    assert loop_guard._same(kinds[0], kinds[1])
    other_field = loop_guard.signature("t", "{}", "ERROR: invalid arguments for 't': v: bad")
    assert not loop_guard._same(kinds[0], other_field)


async def test_llama_cpp_python_through_the_environment_variables_alone(make_client, llm):
    """No profile: the default endpoint with the server's habits (no streamed tools, no usage,
    repeated names, null content refused). `tool_choice: auto` goes with the tools, the tool
    turn is re-sent unstreamed after the empty stream, and the run answers."""
    llm.quirks = LLAMA_CPP_PYTHON
    client = await make_client(lead_tools=["list_artifacts"])
    llm.script(
        ToolCalls([Call("list_artifacts", {})], content="lost"),  # used up by the empty stream
        ToolCalls([Call("list_artifacts", {})]),
        Text("There are no artifacts yet."),
    )
    result = await client.run(Task("what is there?"))
    assert result.status == "completed" and result.response == "There are no artifacts yet."
    assert llm.refused == []
    offered = [r for r in llm.requests if r.get("tools")]
    assert all(r["tool_choice"] == "auto" for r in offered)
    assert [r.get("stream", False) for r in offered] == [True, False, False]


async def test_the_empty_stream_is_reported_once_per_process_and_not_streamed_again_on_retry(
    make_client, llm, caplog
):
    """A tool turn answered with an empty stream, then a failure of its unstreamed request:
    the retry goes unstreamed at once (it used to stream again, get the empty stream again and
    warn again, every retry), and a second client in the same process says nothing more."""
    llm.quirks = LLAMA_CPP_PYTHON
    caplog.set_level(logging.WARNING, logger="artifactflow.model")
    for _ in range(2):
        client = await make_client(lead_tools=["list_artifacts"])
        llm.script(
            ToolCalls([Call("list_artifacts", {})]),  # used up by the empty stream
            Error(500, "busy"),
            ToolCalls([Call("list_artifacts", {})]),
            Text("None yet."),
        )
        start = llm.request_count
        result = await client.run(Task("what is there?"))
        assert result.response == "None yet."
        offered = [r for r in llm.requests[start:] if r.get("tools")]
        assert [r.get("stream", False) for r in offered] == [True, False, False, False]
    said = [r for r in caplog.records if "sent an empty stream" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]


async def test_a_timed_out_call_is_tried_twice_not_four_times():
    """A server silent for `llm.timeout`: measured with Gemma 3 270M, four tries at 120 s each
    (8 minutes) before the run failed. A timeout is retried `llm.timeout_retries` (1) times
    within `max_retries`, and the reason names the bound and what to change."""
    connections = 0

    def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = LLMSettings(max_retries=3, timeout=0.3, backoff_base=0.01, backoff_max=0.02)
    model = OpenAIChatModel(settings)
    request = ModelRequest(ResolvedModel(None, "m", f"http://127.0.0.1:{port}/v1", "k"),
                           [{"role": "user", "content": "hi"}], agent="lead_agent")
    try:
        with pytest.raises(RetryableLLMError) as caught:
            await model.complete(request)
    finally:
        await model.aclose()
        server.close()
    assert connections == 2
    text = str(caught.value)
    assert "after 2 attempts: request timed out" in text
    assert "llm.timeout = 0.3 s" in text and "max_output_tokens" in text


async def test_a_run_stops_at_its_time_budget_inside_a_slow_model_call(make_client, llm):
    """`budget.max_seconds` ends a run whose model is too slow, in the middle of a call that
    would take a minute: outcome `budget_exceeded`, the lead's latest text kept, the reason
    named, no further request."""
    client = await make_client(lead_tools=["list_artifacts"],
                               yaml_text="budget:\n  max_seconds: 1.5\n")
    llm.script(ToolCalls([Call("list_artifacts", {})], content="Looking first."),
               Delay(60, Text("far too late")))
    started = time.monotonic()
    result = await client.run(Task("plan something"))
    took = time.monotonic() - started
    assert result.status == "completed" and result.outcome == "budget_exceeded"
    assert result.response == "Looking first."
    reason = result.events[-1].data.reason
    assert "time budget reached: the run worked 1.5 s (budget.max_seconds)" in reason
    assert 1.5 <= took < 30 and llm.request_count == 2
    message = await client.admin.store.get_message(result.message_id)
    assert message["status"] == "completed" and message["outcome"] == "budget_exceeded"


SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "real-model-check"


def _dry_run(llm, python: str) -> subprocess.CompletedProcess[str]:
    """The script on the scripted model; each `artifactflow` it runs is forked from the tests'
    CLI fork server (`REAL_MODEL_CLI`, tests/cli_fork.py): the same `main()` in a process of
    its own, without the console script's start-up imports (3 CPU seconds each)."""
    import shlex

    import cli_fork

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ARTIFACTFLOW_", "OPENAI_", "REAL_MODEL_", "VIRTUAL_ENV"))}
    env.update(REAL_MODEL_BASE_URL=llm.base_url, NO_COLOR="1", REAL_MODEL_CLI=shlex.join(cli_fork.command()))
    return subprocess.run([python, str(SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)


def test_real_model_check_runs_as_documented_under_the_system_python(llm) -> None:
    """`scripts/real-model-check` started by its shebang's `python3` (the system's, without
    artifactflow) re-runs itself in the checkout's venv; against a server that answers as a
    model should, every step passes."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    assert system is not None
    llm.script(
        ToolCalls([Call("get_weather", {"city": "Oslo"})]), Text("Oslo: 3°C, light snow."),
        ToolCalls([Call("save_note", {"text": "meeting on Friday"})]), Text("Saved."),
        *[ToolCalls([Call("update_document", {"doc_id": "notes", "text": "hello"})])] * 5,
    )
    proc = _dry_run(llm, system)
    assert "running under" in proc.stdout and ".venv/bin/python" in proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("[PASS]") == 4 and "[FAIL]" not in proc.stdout
    assert "summary   4/4 steps passed" in proc.stdout


def test_real_model_check_never_says_ok_for_a_check_that_did_not_run() -> None:
    from importlib.machinery import SourceFileLoader

    module = SourceFileLoader("real_model_check", str(SCRIPT)).load_module()
    step = module.Step("a step")
    assert step.check(False, "`artifactflow run` exited 1") is False
    step.ran(module.Outcome(1, [], 0.1, "ModuleNotFoundError: No module named 'artifactflow'"))
    assert step.check(True, "nothing ran before the approval") is False
    assert step.detail == [
        "FAIL `artifactflow run` exited 1",
        "---- not checked (the command did not run): nothing ran before the approval",
    ]
    assert not any(line.startswith("ok") for line in step.detail)
