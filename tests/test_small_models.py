"""Small local models fail fast and clearly (issue 38).

Measured with Gemma 3 270M on llama-cpp-python: 30 `call_subagent` calls to agents that do not
exist (`agent1`, `machine_id:179304`) or with broken JSON, 27.6 minutes, because each call's
arguments differed and the loop guard counted only identical calls; and `web_fetch` calls
with `[""]` or `[]` were put to a person. Everything here runs through the scripted
OpenAI-compatible server over HTTP and a real SQLite store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from scripted_llm import Call, Text, ToolCalls

from artifactflow import Task
from artifactflow.core import loop_guard
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


SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "real-model-check"


def _dry_run(llm, python: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ARTIFACTFLOW_", "OPENAI_", "REAL_MODEL_", "VIRTUAL_ENV"))}
    env.update(REAL_MODEL_BASE_URL=llm.base_url, NO_COLOR="1")
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
