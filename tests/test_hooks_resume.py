"""Hooks fire exactly once per step across a pause and resume, a resume in another process,
and a process killed in the middle of a tool round (the run is recovered elsewhere).

The hook is listed in the config (`hooks.load`, a module in the config folder), as a user
would do it, and appends one JSON line per firing to a file every process shares."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from pathlib import Path

from cli_fork import fork_python_async
from conftest import make_config
from hooks_recorder import SUB, by_agent
from resume_helpers import RESUMER, resume_elsewhere
from scripted_llm import Call, Text, ToolCalls
from waiting import wait_until

from artifactflow import Client, Resume, load_settings
from artifactflow.core.store.repository import AppStore

JOURNAL_HOOK = '''
import json
from artifactflow.hooks import (
    POINTS, AgentStep, Hooks, PermissionRequest, PermissionResult, RunEnd, ToolCall, ToolOutcome,
    ToolRound,
)


def short(key):
    invocation, _, rest = key.partition("/")
    return invocation.split(":")[0] + "/" + rest


def ident(value):
    if isinstance(value, AgentStep):
        return f"{value.invocation.split(':')[0]}/{value.round}"
    if isinstance(value, (ToolCall, ToolRound)):
        return short(value.key)
    if isinstance(value, ToolOutcome):
        return short(value.call.key)
    if isinstance(value, RunEnd):
        return value.status
    if isinstance(value, PermissionRequest):
        return ",".join(short(c.key) for c in value.calls)
    if isinstance(value, PermissionResult):
        return ",".join(d.action for d in value.decisions)
    return None


class Journal(Hooks):
    def __init__(self, path):
        self.path = path


def recording(point):
    def method(self, run, *rest):
        parts = [point] + [p for p in map(ident, rest) if p]
        if point in ("on_run_start", "on_run_end"):
            parts.append(run.segment)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(parts) + "\\n")
    return method


for point in POINTS:
    if point != "before_run":
        setattr(Journal, point, recording(point))
'''

TOOLS = '''
import asyncio, os
from pathlib import Path
from artifactflow import tool

@tool(permission="confirm")
def write_note(text: str) -> str:
    """Append a note (needs approval)."""
    with open(os.environ["AF_NOTES"], "a", encoding="utf-8") as f:
        f.write(text + "\\n")
    return "written"

@tool(permission="confirm")
async def slow_note(text: str) -> str:
    """Append a note, slowly (needs approval)."""
    with open(os.environ["AF_NOTES"], "a", encoding="utf-8") as f:
        f.write("slow:" + text + "\\n")
    await asyncio.sleep(30)
    return "slow written"

@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"
'''


def configure(tmp_path: Path, monkeypatch) -> tuple[Path, Path, Path]:
    journal, notes = tmp_path / "journal.jsonl", tmp_path / "notes.txt"
    monkeypatch.setenv("AF_NOTES", str(notes))
    config = make_config(
        tmp_path,
        lead_tools=["call_subagent", "lookup", "write_note", "slow_note"],
        subagents={SUB: ["lookup", "write_note"]},
        yaml_text=f"""
        plugins: [note_tools]
        hooks:
          load: [{{use: "journal_hook.py:Journal", options: {{path: {json.dumps(str(journal))}}}}}]
        """,
        plugin_files={"note_tools.py": TOOLS, "journal_hook.py": JOURNAL_HOOK},
    )
    return config, journal, notes


def entries(path: Path) -> list[tuple[str, ...]]:
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()] if path.exists() else []


def assert_once(journal: list[tuple[str, ...]]) -> None:
    twice = [entry for entry, n in Counter(journal).items() if n > 1]
    assert not twice, f"fired more than once: {twice}"


def delegate_then_confirm(llm) -> None:
    """The lead looks up and delegates in one round; the subagent's round needs approval."""
    by_agent(llm, {
        "lead": [
            ToolCalls([Call("lookup", {"topic": "a"}, id="l1"),
                       Call("call_subagent", {"agent_name": SUB, "instruction": "note it"}, id="d1")]),
            Text("all noted"),
        ],
        SUB: [
            ToolCalls([Call("write_note", {"text": "n1"}, id="s1"), Call("lookup", {"topic": "b"}, id="s2")]),
            Text("noted"),
        ],
    })


EXPECTED = {
    ("on_run_start", "new"), ("on_run_end", "waiting", "new"),
    ("on_run_start", "resumed"), ("on_permission_request", f"{SUB}/1/s1"),
    ("on_permission_result", "approve"),
    ("on_run_end", "completed", "resumed"),
    *[(p, "lead/1") for p in ("on_agent_start", "before_model_request", "on_model_start",
                               "after_model_request", "on_model_end", "on_agent_end")],
    ("before_tool_call", "lead/1/l1"), ("before_tool_call", "lead/1/d1"),
    ("on_tool_round_start", "lead/1/*"), ("on_tool_start", "lead/1/l1"),
    ("after_tool_call", "lead/1/l1"), ("on_tool_end", "lead/1/l1"), ("after_tool_round", "lead/1/*"),
    *[(p, f"{SUB}/{r}") for r in (1, 2) for p in (
        "on_agent_start", "before_model_request", "on_model_start", "after_model_request",
        "on_model_end", "on_agent_end")],
    ("before_tool_call", f"{SUB}/1/s1"), ("before_tool_call", f"{SUB}/1/s2"),
    ("on_tool_round_start", f"{SUB}/1/*"),
    *[(p, f"{SUB}/1/{c}") for c in ("s1", "s2") for p in ("on_tool_start", "after_tool_call", "on_tool_end")],
    ("after_tool_round", f"{SUB}/1/*"),
    ("after_tool_call", "lead/1/d1"), ("on_tool_end", "lead/1/d1"),
    *[(p, "lead/2") for p in ("on_agent_start", "before_model_request", "on_model_start",
                               "after_model_request", "on_model_end", "on_agent_end")],
}


async def test_pause_then_resume_in_another_process_fires_each_point_once(tmp_path, monkeypatch, llm_env):
    config, journal, notes = configure(tmp_path, monkeypatch)
    data = tmp_path / "data"
    delegate_then_confirm(llm_env)
    first = await Client.open(load_settings(config, data))
    try:
        paused = await first.run("take notes")
    finally:
        await first.aclose()
    assert paused.status == "waiting" and [c["tool_call_id"] for c in paused.pending_calls] == ["s1"]
    before = entries(journal)
    assert before[-2:] == [("on_permission_request", f"{SUB}/1/s1"), ("on_run_end", "waiting", "new")]
    assert ("on_tool_round_start", f"{SUB}/1/*") not in before  # nothing fires before the interrupt

    result = await asyncio.to_thread(resume_elsewhere, config, data, paused.message_id)
    assert (result["status"], result["response"]) == ("completed", "all noted")
    assert notes.read_text() == "n1\n"
    journal_entries = entries(journal)
    assert_once(journal_entries)
    after = journal_entries[len(before):]
    assert after[:2] == [("on_run_start", "resumed"), ("on_permission_result", "approve")]
    assert set(journal_entries) == EXPECTED


async def test_pause_and_resume_in_one_client_fire_each_point_once(tmp_path, monkeypatch, llm_env):
    config, journal, _ = configure(tmp_path, monkeypatch)
    delegate_then_confirm(llm_env)
    client = await Client.open(load_settings(config, tmp_path / "data"))
    try:
        paused = await client.run("take notes")
        result = await client.run(Resume(paused.message_id, "approve"))
    finally:
        await client.aclose()
    assert result.status == "completed"
    journal_entries = entries(journal)
    assert_once(journal_entries)
    assert set(journal_entries) == EXPECTED


async def test_process_killed_mid_round_recovers_without_firing_twice(tmp_path, monkeypatch, llm_env):
    """Approved in a process that dies while the round's second tool runs: the recovered run
    re-enters the tool node, which replays the finished call from the ledger (no hooks),
    reports the interrupted one, and fires the round's points once in all."""
    llm = llm_env
    config, journal, notes = configure(tmp_path, monkeypatch)
    data = tmp_path / "data"
    llm.script(ToolCalls([Call("write_note", {"text": "fast"}, id="w1"),
                          Call("slow_note", {"text": "slow"}, id="w2")]))
    first = await Client.open(load_settings(config, data))
    try:
        paused = await first.run("write both")
    finally:
        await first.aclose()
    mid = paused.message_id
    env = dict(os.environ, ARTIFACTFLOW_RUN__LEASE_SECONDS="2")
    proc = await fork_python_async(RESUMER, [str(config), str(data), mid], env)  # tests/cli_fork.py
    store = await AppStore.open(None, sqlite_path=load_settings(config, data).app_db_path)
    try:
        async def fast_done_slow_running() -> bool:  # the fast call's ledger row is closed
            row = await store.ledger_get(mid, "lead/1/w1")
            return bool(row and row["status"] == "finished" and "slow:slow" in notes.read_text())

        await wait_until(fast_done_slow_running)
        assert ("on_tool_start", "lead/1/w2") in entries(journal)
    finally:
        proc.kill()
        await proc.wait()
        await store.close()
    llm.script(Text("recovered"))
    second = await Client.open(load_settings(config, data))
    second.admin.clock = lambda: time.time() + 3  # the dead owner's 2 s lease has expired
    try:
        # The resume's claim stored the approval: the recovered run goes on with it (issue 22)
        result = await second.run(Resume(mid, "approve"))
    finally:
        await second.aclose()
    assert result.status == "completed" and result.response == "recovered"
    assert sorted(notes.read_text().splitlines()) == ["fast", "slow:slow"]  # neither ran twice
    journal_entries = entries(journal)
    assert_once([e for e in journal_entries if not e[0].startswith(("on_permission", "on_run"))])
    tool_points = [e for e in journal_entries if "tool" in e[0] and e[1].startswith("lead/1/")]
    assert Counter(e[0] for e in tool_points) == {
        "before_tool_call": 2, "on_tool_round_start": 1, "on_tool_start": 2,
        "after_tool_call": 2, "on_tool_end": 2, "after_tool_round": 1,
    }
    recovered = journal_entries[journal_entries.index(("on_run_start", "recovered")):]
    # after recovery: only the interrupted call's result and the round's end, then the lead
    assert [e for e in recovered if e[0] in ("on_tool_start", "after_tool_call", "after_tool_round")] == [
        ("after_tool_call", "lead/1/w2"), ("after_tool_round", "lead/1/*"),
    ]
    tool_msgs = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_msgs[0]["content"] == "written" and "interrupted" in tool_msgs[1]["content"]
