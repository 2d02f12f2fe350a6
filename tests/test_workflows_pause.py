"""CONFIRM tools inside workflows: parallel split items pause together, a tool step pauses
too, and the run resumes from another process with every side effect exactly once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from resume_helpers import resume_elsewhere
from scripted_llm import Call, Text, ToolCalls
from wf_helpers import ByAgent, by_item, workflow_config

from artifactflow import InvalidResumeError, Resume, WorkflowTask

PLUGIN = '''
import os
from pathlib import Path
from artifactflow import tool

@tool(permission="confirm")
def append_line(text: str) -> str:
    """Append one line to the journal file."""
    with Path(os.environ["AF_JOURNAL"]).open("a", encoding="utf-8") as f:
        f.write(text + "\\n")
    return f"appended {text!r}"
'''

JOURNAL = """
name: journal
input:
  type: object
  properties: {items: {type: array, items: {type: string}}}
nodes:
  - {id: start, role: start}
  - {id: fan, role: split, over: "{{ input.items }}"}
  - {id: write, role: linear, kind: agent, agent: scribe, instruction: "Record {{ item }}"}
  - {id: join, role: merge, strategy: concatenate, separator: ", "}
  - id: stamp
    role: linear
    kind: tool
    tool: append_line
    arguments: {text: "summary: {{ nodes.join.output }}"}
  - {id: done, role: exit, output: "{{ nodes.join.output }}"}
edges:
  - {from: start, to: fan}
  - {from: fan, to: write}
  - {from: write, to: join}
  - {from: join, to: stamp}
  - {from: stamp, to: done}
"""

@pytest.fixture
def config(tmp_path: Path) -> Path:
    return workflow_config(
        tmp_path, {"journal": JOURNAL}, agents={"scribe": ["append_line"]},
        yaml_text="plugins: [journal_tools]\n", plugin_files={"journal_tools.py": PLUGIN},
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def scribe(llm) -> ByAgent:
    return ByAgent(llm, {"scribe": by_item({
        "Record a": [ToolCalls([Call("append_line", {"text": "a"}, id="call_0")]), Text("recorded a")],
        "Record b": [ToolCalls([Call("append_line", {"text": "b"}, id="call_0")]), Text("recorded b")],
    })})


async def test_split_items_pause_together_and_resume_in_another_process(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    scribe(llm)
    events = [e async for e in await client.runs.start(WorkflowTask("journal", {"items": ["a", "b"]}))]
    request = events[-1]
    assert request.type == "permission_request"
    # two parallel items, two interrupts, one request; the same provider id kept apart per item
    assert sorted(c.tool_call_id for c in request.data.calls) == ["call_0.0", "call_0.1"]
    assert sorted(c.arguments["text"] for c in request.data.calls) == ["a", "b"]
    assert len(request.data.interrupt_ids) == 2
    assert lines(journal) == []
    mid = request.message_id
    data = client.settings.data_dir
    await client.aclose()

    first = await asyncio.to_thread(resume_elsewhere, config, data, mid)
    assert first["status"] == "waiting" and first["calls"] == ["wf-stamp#1"]  # the tool step asks
    assert sorted(lines(journal)) == ["a", "b"]
    assert first["types"].count("tool_start") == 2 and first["types"][0] == "permission_result"

    second = await make_client(config_dir=config, data_dir=data)
    with pytest.raises(InvalidResumeError, match="Pending calls: wf-stamp#1"):  # answered already
        await second.run(Resume(mid, {"call_0.0": "approve"}))
    result = await second.run(Resume(mid, "approve"))
    assert result.status == "completed"
    assert result.response == "recorded a, recorded b"
    journal_lines = lines(journal)
    assert sorted(journal_lines[:2]) == ["a", "b"]
    assert journal_lines[2:] == ["summary: recorded a, recorded b"]  # every side effect once
    records = {r["execution_id"]: r for r in await second.admin.store.lineage(mid)}
    assert records["write#1[0]"]["status"] == "ok" and records["write#1[1]"]["status"] == "ok"
    assert records["stamp#1"]["output"] == "appended 'summary: recorded a, recorded b'"
    assert records["join#1"]["parents"] == ["write#1[0]", "write#1[1]"]
    stored = [e.event_id for e in await second.runs.events(mid)]
    assert stored == list(range(1, len(stored) + 1))
    types = [e.type for e in await second.runs.events(mid)]
    assert types.count("workflow_node_start") == types.count("workflow_node_complete") == 7
    assert not llm.unexpected


async def test_deny_one_item_and_fail_the_denied_tool_step(make_client, config, llm, journal):
    client = await make_client(config_dir=config)
    scribe(llm)
    events = [e async for e in await client.runs.start(WorkflowTask("journal", {"items": ["a", "b"]}))]
    mid = events[-1].message_id
    decisions = {"call_0.0": "approve", "call_0.1": {"action": "deny", "reason": "not b"}}
    paused = await client.run(Resume(mid, decisions))
    assert paused.status == "waiting" and lines(journal) == ["a"]
    denied = [m for r in llm.requests for m in r["messages"]
              if m["role"] == "tool" and "not b" in (m.get("content") or "")]
    assert denied and denied[0]["tool_call_id"] == "call_0.1"
    result = await client.run(Resume(mid, {"wf-stamp#1": {"action": "deny"}}))
    assert result.status == "failed"
    assert "workflow node 'stamp' failed: the user denied this tool call" in result.error
    assert lines(journal) == ["a"]


RACE = """
name: race
nodes:
  - {id: start, role: start}
  - {id: fork, role: branch}
  - {id: careful, role: linear, kind: agent, agent: scribe, instruction: "Record a"}
  - {id: quick, role: linear, kind: agent, agent: fast, instruction: "answer"}
  - {id: first, role: merge}
  - {id: done, role: exit}
edges:
  - {from: start, to: fork}
  - {from: fork, to: careful}
  - {from: fork, to: quick}
  - {from: careful, to: first}
  - {from: quick, to: first}
  - {from: first, to: done}
"""


async def test_a_losing_branch_path_is_never_asked_for_approval(make_client, tmp_path, llm, journal):
    config = workflow_config(
        tmp_path, {"race": RACE}, agents={"scribe": ["append_line"], "fast": []},
        yaml_text="plugins: [journal_tools]\n", plugin_files={"journal_tools.py": PLUGIN},
    )
    client = await make_client(config_dir=config)
    a_answered = threading.Event()

    def scribe_answer(request):
        a_answered.set()
        return ToolCalls([Call("append_line", {"text": "a"})])

    def fast_answer(request):
        a_answered.wait(10)  # the careful path asks for approval first, then this one wins
        return Text("quick answer", chunk_size=1, chunk_delay=0.02)

    ByAgent(llm, {"scribe": scribe_answer, "fast": fast_answer})
    events = [e async for e in await client.runs.start(WorkflowTask("race", {}))]
    assert events[-1].type == "complete" and events[-1].data.response == "quick answer"
    assert "permission_request" not in [e.type for e in events]
    records = {r["execution_id"]: r for r in await client.admin.store.lineage(events[0].message_id)}
    assert records["careful#1[0]"]["status"] == "cancelled" and records["first#1"]["parents"] == ["quick#1[1]"]
    assert lines(journal) == []
    message = await client.admin.store.get_message(events[0].message_id)
    assert message["status"] == "completed" and message["waiting_for"] is None


async def test_hooks_see_a_paused_workflow(config, llm_env, journal, tmp_path):
    """Run-level hooks fire for a workflow run as for a chat run (with the caller's user);
    the permission request carries every paused item's call, read from the nested steps."""
    from hooks_recorder import Recorder

    from artifactflow import Client, load_settings

    recorder = Recorder()
    client = await Client.open(load_settings(config, tmp_path / "data"), hooks=[recorder])
    try:
        scribe(llm_env)
        handle = await client.runs.start(WorkflowTask("journal", {"items": ["a", "b"]}), user_id="u-1")
        events = [e async for e in handle]
        assert events[-1].type == "permission_request"
        (run, request), = recorder.args("on_permission_request")
        assert (run.segment, run.user_id) == ("new", "u-1")
        assert sorted((c.id, c.invocation, c.round, c.key) for c in request.calls) == [
            ("call_0.0", "write#1[0]", 1, "write#1[0]/1/call_0.0"),
            ("call_0.1", "write#1[1]", 1, "write#1[1]/1/call_0.1"),
        ]
        result = await (await handle.respond("approve")).result()
        assert result.status == "waiting" and [c["tool_call_id"] for c in result.pending_calls] == ["wf-stamp#1"]
        (_, stamp), = recorder.args("on_permission_request")[1:]
        assert [(c.id, c.invocation, c.agent) for c in stamp.calls] == [("wf-stamp#1", "stamp#1", "workflow:stamp")]
    finally:
        await client.aclose()
    assert [run.segment for (run,) in recorder.args("on_run_start")] == ["new", "resumed"]
    assert sorted(c.id for (_, c) in recorder.args("on_tool_start")) == ["call_0.0", "call_0.1"]
    assert sorted(lines(journal)) == ["a", "b"]
