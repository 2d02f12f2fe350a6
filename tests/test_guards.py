"""Guards for weak models (issue 23): the loop guard and lenient tool arguments.

A small local model repeated one failing call for 27 rounds, and a raw newline inside an
argument string made a call fail after a person had approved it. Everything here runs through
the scripted OpenAI-compatible server over HTTP and a real SQLite store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_config
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Resume, Task
from artifactflow.core import loop_guard
from artifactflow.tools.arguments import parse_arguments

PLUGIN = '''
import json
import os
from pathlib import Path
from artifactflow import tool

@tool
def update_doc(doc_id: str, text: str) -> str:
    """Update a document (this one never exists)."""
    raise ValueError(f"no document {doc_id!r}")

@tool(permission="confirm")
def append_line(text: str) -> str:
    """Append one line to the journal file."""
    with Path(os.environ["AF_JOURNAL"]).open("a", encoding="utf-8") as f:
        f.write(json.dumps(text) + "\\n")
    return f"appended {text!r}"

@tool
def ok() -> str:
    """Always works."""
    return "fine"

@tool(permission="confirm")
def risky(text: str) -> str:
    """A CONFIRM tool that always fails."""
    raise RuntimeError("disk says no")
'''

WARNING = "change course"


def config(tmp_path: Path, yaml_text: str = "", max_tool_rounds: int = 20) -> Path:
    return make_config(
        tmp_path,
        lead_tools=["update_doc", "append_line", "risky", "ok"],
        yaml_text="plugins: [guard_tools]\n" + yaml_text,
        plugin_files={"guard_tools.py": PLUGIN},
        max_tool_rounds=max_tool_rounds,
    )


def failing(n: int, name: str = "update_doc", args: dict | None = None) -> list[ToolCalls]:
    args = args if args is not None else {"doc_id": "notes", "text": "hello"}
    return [ToolCalls([Call(name, args)], content=f"Trying again ({i + 1})") for i in range(n)]


def last_tool_text(request: dict) -> str:
    return [m for m in request["messages"] if m["role"] == "tool"][-1]["content"]


async def test_identical_failing_call_is_told_at_the_third_and_stopped_at_the_fifth(
    make_client, llm, tmp_path
):
    client = await make_client(config_dir=config(tmp_path))
    llm.script(*failing(10), Text("never reached"))
    events = [e async for e in await client.runs.start(Task("update my notes"))]
    complete = events[-1]
    assert complete.type == "complete", [e.type for e in events]
    assert complete.data.outcome == "loop_detected"
    assert complete.data.response == "Trying again (5)"  # the partial answer is kept
    assert "same failing tool call 5 times in a row: update_doc(" in complete.data.reason
    assert (
        "no document 'notes'" in complete.data.reason and "run.loop_guard" in complete.data.reason
    )
    assert llm.request_count == 5  # stopped at the fifth call: no sixth model request
    requests = llm.requests
    assert WARNING not in last_tool_text(requests[1]) and WARNING not in last_tool_text(requests[2])
    assert WARNING in last_tool_text(requests[3])  # the third identical failure
    assert "3 times" in last_tool_text(requests[3]) and "4 times" in last_tool_text(requests[4])
    assert "no document 'notes'" in last_tool_text(requests[3])  # the error itself is still there
    message = await client.admin.store.get_message(complete.message_id)
    assert message["status"] == "completed" and message["outcome"] == "loop_detected"


async def test_other_arguments_or_a_success_start_the_count_again(make_client, llm, tmp_path):
    client = await make_client(
        config_dir=config(
            tmp_path, yaml_text="run:\n  loop_guard: {warn_after: 2, stop_after: 3}\n"
        )
    )
    other = {"doc_id": "other", "text": "hello"}
    llm.script(
        *failing(2),  # the second is told
        *failing(1, args=other),  # other arguments: counted from one, so not stopped
        ToolCalls([Call("ok")]),  # a success ends the streak
        *failing(2, args=other),  # counted from one again: the second is told
        Text("done"),
    )
    result = await client.run(Task("go"))
    assert result.outcome == "completed" and result.response == "done"
    notes = [WARNING in last_tool_text(r) for r in llm.requests[1:]]
    assert notes == [False, True, False, False, False, True]


async def test_loop_guard_counts_across_pauses_and_processes(make_client, llm, tmp_path):
    """A CONFIRM tool that fails: every round pauses for approval, and each resume is done by
    another client on the same data folder. The count comes from the checkpointed memory."""
    folder = config(tmp_path)
    data = tmp_path / "data"
    llm.script(*failing(6, name="risky", args={"text": "x"}))
    first = await make_client(config_dir=folder, data_dir=data)
    events = [e async for e in await first.runs.start(Task("do it"))]
    message_id = events[-1].message_id
    outcomes = []
    for _ in range(5):
        assert events[-1].type == "permission_request", [e.type for e in events]
        client = await make_client(config_dir=folder, data_dir=data)
        events = [e async for e in await client.runs.start(Resume(message_id, "approve"))]
        outcomes.append(events[-1].type)
    assert outcomes == ["permission_request"] * 4 + ["complete"]
    assert events[-1].data.outcome == "loop_detected"
    assert llm.request_count == 5
    assert WARNING in last_tool_text(llm.requests[3]) and WARNING not in last_tool_text(
        llm.requests[2]
    )


async def test_loop_guard_can_be_turned_off(make_client, llm, tmp_path):
    folder = config(
        tmp_path,
        yaml_text="run:\n  loop_guard: {warn_after: 0, stop_after: null}\n",
        max_tool_rounds=6,
    )
    client = await make_client(config_dir=folder)
    llm.script(*failing(7))
    result = await client.run(Task("loop"))
    assert result.outcome == "max_tool_rounds"
    assert not any(WARNING in last_tool_text(r) for r in llm.requests[1:])


async def test_raw_newline_inside_an_argument_string_is_accepted(
    make_client, llm, tmp_path, journal
):
    client = await make_client(config_dir=config(tmp_path))
    raw = '{"text": "line one\nline two"}'  # a raw newline: invalid for strict JSON
    llm.script(ToolCalls([Call("append_line", raw, id="c1")]), Text("written"))
    events = [e async for e in await client.runs.start(Task("write two lines"))]
    request = events[-1]
    assert request.type == "permission_request"
    assert request.data.calls[0].arguments == {"text": "line one\nline two"}  # shown parsed
    result = await client.run(Resume(request.message_id, "approve"))
    assert result.outcome == "completed"
    assert [json.loads(line) for line in journal.read_text().splitlines()] == ["line one\nline two"]
    # The history resent to the model carries the arguments as strict JSON.
    sent = llm.requests[-1]["messages"]
    arguments = next(m for m in sent if m["role"] == "assistant")["tool_calls"][0]["function"][
        "arguments"
    ]
    assert json.loads(arguments) == {"text": "line one\nline two"}
    assert last_tool_text(llm.requests[-1]) == "appended 'line one\\nline two'"


async def test_invalid_arguments_never_reach_the_approval_prompt(
    make_client, llm, tmp_path, journal
):
    client = await make_client(config_dir=config(tmp_path))
    llm.script(
        ToolCalls(
            [
                Call("append_line", '{"text": "unterminated', id="bad_json"),
                Call("append_line", {"txt": "wrong key"}, id="bad_schema"),
            ]
        ),
        Text("I will fix my arguments"),
    )
    events = [e async for e in await client.runs.start(Task("write"))]
    assert "permission_request" not in [e.type for e in events]
    assert events[-1].type == "complete" and events[-1].data.response == "I will fix my arguments"
    assert not journal.exists()
    results = {
        m["tool_call_id"]: m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"
    }
    assert results["bad_json"].startswith("ERROR: arguments are not valid JSON")
    assert results["bad_schema"].startswith("ERROR: invalid arguments for 'append_line'")
    assert "text" in results["bad_schema"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('  {"a": 1}\n', {"a": 1}),
        ('```json\n{"a": "x"}\n```', {"a": "x"}),
        ('{"a": "```"}\n```json', {"a": "```"}),
        ('\ufeff{"a": "tab\there"}', {"a": "tab\there"}),
    ],
)
def test_lenient_repairs_that_cannot_change_meaning(raw, expected):
    assert parse_arguments(raw) == (expected, None)


@pytest.mark.parametrize("raw", ['{"a": 1', "{'a': 1}", '{"a": 1,}', '```\n{"a": 1\n```', "[1]"])
def test_nothing_is_guessed(raw):
    args, error = parse_arguments(raw)
    assert args is None and error


def test_a_noted_result_still_counts_as_the_same_error():
    text = "ERROR: no such file"
    noted = loop_guard.with_note(text, "told")
    assert loop_guard.signature("t", '{"b": 1, "a": 2}', text) == loop_guard.signature(
        "t", '{"a": 2, "b": 1}', noted
    )
    assert loop_guard.signature("t", "{}", "fine") is None


def test_cli_says_why_it_stopped_and_exits_4(tmp_path, llm_env, capsys):
    from artifactflow.cli.main import main

    llm_env.script(*failing(10))
    folder = config(tmp_path)
    code = main(
        [
            "--config-dir",
            str(folder),
            "--data-dir",
            str(tmp_path / "data"),
            "run",
            "--no-input",
            "loop",
        ]
    )
    out = capsys.readouterr().out
    assert code == 4, out
    assert "⚠ stopped: the agent made the same failing tool call 5 times in a row" in " ".join(
        out.split()
    )


EDIT_WORKFLOW = """
name: edit
input: {type: object, properties: {doc: {type: string}}, required: [doc]}
nodes:
  - {id: start, role: start}
  - {id: work, role: linear, kind: agent, agent: editor, instruction: "Edit {{ input.doc }}"}
  - {id: done, role: exit}
edges:
  - {from: start, to: work}
  - {from: work, to: done}
"""


async def test_loop_guard_stops_a_workflow_step(make_client, llm, tmp_path):
    """In a workflow step there is no chat run to end: the step fails with outcome
    loop_detected at the fifth identical failing call, and its agent is not asked again."""
    from wf_helpers import workflow_config

    from artifactflow import WorkflowTask

    folder = workflow_config(
        tmp_path, {"edit": EDIT_WORKFLOW}, agents={"editor": ["update_doc"]},
        yaml_text="plugins: [guard_tools]\n", plugin_files={"guard_tools.py": PLUGIN},
    )
    client = await make_client(config_dir=folder)
    llm.script(*failing(10), Text("never reached"))
    async with await client.runs.start(WorkflowTask("edit", {"doc": "notes"})) as handle:
        events = [e async for e in handle]
    assert llm.request_count == 5  # stopped at the fifth call: no sixth model request
    assert WARNING in last_tool_text(llm.requests[3]) and WARNING not in last_tool_text(llm.requests[2])
    step = next(e.data for e in events if e.type == "workflow_node_complete" and e.data.node == "work")
    assert step.status == "failed" and step.outcome == "loop_detected"
    assert "same failing tool call 5 times in a row: update_doc(" in step.error
    assert "run.loop_guard" in step.error
    assert events[-1].type == "error" and "loop" in events[-1].data.message


GROUP_WORKFLOW = """
name: desk
input: {type: object, properties: {doc: {type: string}}}
nodes:
  - {id: start, role: start}
  - {id: talk, role: linear, kind: group, mode: order, agents: [editor, critic], instruction: "Edit {{ input.doc }}"}
  - {id: done, role: exit}
edges:
  - {from: start, to: talk}
  - {from: talk, to: done}
"""


async def test_loop_guard_stops_a_group_member(make_client, llm, tmp_path):
    from wf_helpers import workflow_config

    from artifactflow import WorkflowTask

    folder = workflow_config(
        tmp_path, {"desk": GROUP_WORKFLOW}, agents={"editor": ["update_doc"], "critic": []},
        yaml_text="plugins: [guard_tools]\n", plugin_files={"guard_tools.py": PLUGIN},
    )
    client = await make_client(config_dir=folder)
    llm.script(*failing(10), Text("never reached"))
    events = [e async for e in await client.runs.start(WorkflowTask("desk", {"doc": "notes"}))]
    assert llm.request_count == 5  # the critic never speaks: the group step failed
    step = next(e.data for e in events if e.type == "workflow_node_complete" and e.data.node == "talk")
    assert step.status == "failed"
    assert "editor failed: the agent made the same failing tool call 5 times" in step.error
