"""Record and replay: export a run, replay it offline under the current config, eval a folder.

The recorded run is real (scripted model over HTTP, plugin tools with side effects, a
permission pause resumed by another process); replays run on their own temporary data folder
and must never run a tool.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from conftest import make_config, write_agent
from resume_helpers import resume_elsewhere
from scripted_llm import Call, Text, ToolCalls

from artifactflow import (
    Client,
    Resume,
    Task,
    UserError,
    load_settings,
    read_session,
    replay_session,
)
from artifactflow.cli.main import main
from artifactflow.replay import recording
from artifactflow.replay import store as recorded_calls

PLUGIN = '''
import os
from pathlib import Path
from artifactflow import tool

def _touch(name, text):
    with (Path(os.environ["AF_SIDE_EFFECTS"]) / name).open("a", encoding="utf-8") as f:
        f.write(text + "\\n")

@tool
def lookup(topic: str) -> str:
    """Look a topic up (writes a trace file: a side effect a replay must not repeat)."""
    _touch("lookups.txt", topic)
    return f"facts about {topic}"

@tool(permission="confirm")
def append_line(text: str) -> str:
    """Append one line to the journal."""
    _touch("journal.txt", text)
    return f"appended {text!r}"
'''
SUBS = {"search_agent": ["lookup"], "crawl_agent": ["lookup"]}
LEAD_TOOLS = ["call_subagent", "lookup", "append_line", "create_artifact"]


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "effects"
    folder.mkdir()
    monkeypatch.setenv("AF_SIDE_EFFECTS", str(folder))
    return folder


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return make_config(
        tmp_path,
        lead_tools=LEAD_TOOLS,
        subagents=SUBS,
        yaml_text="plugins: [side_tools]\n",
        plugin_files={"side_tools.py": PLUGIN},
    )


def agent_of(request: dict) -> str:
    system = request["messages"][0]["content"]
    for name in SUBS:
        if system.startswith(f"You are {name}"):
            return name
    return "lead"


def by_agent(llm, answers: dict[str, list]) -> None:
    lock = threading.Lock()

    def route(request: dict):
        with lock:
            queue = answers.get(agent_of(request))
            return queue.pop(0) if queue else None

    llm.route(route)


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


async def record_rich_run(make_client, config: Path, llm, tmp_path: Path) -> tuple[str, Path]:
    """A run with parallel tools, two parallel subagents, an artifact and a permission pause
    resumed by another process; returns (message id, data folder)."""
    data = tmp_path / "data"
    client = await make_client(config_dir=config, data_dir=data)
    by_agent(llm, {
        "lead": [
            ToolCalls([
                Call("lookup", {"topic": "a"}, id="l1"),
                Call("lookup", {"topic": "b"}, id="l2"),
                Call("create_artifact", {"id": "report", "title": "Report", "content": "draft"},
                     id="a1"),
            ]),
            ToolCalls([
                Call("call_subagent", {"agent_name": "search_agent", "instruction": "find A"},
                     id="p1"),
                Call("call_subagent", {"agent_name": "crawl_agent", "instruction": "crawl B"},
                     id="p2"),
            ]),
            ToolCalls([Call("append_line", {"text": "hello"}, id="w1")]),
            Text("All done."),
        ],
        "search_agent": [ToolCalls([Call("lookup", {"topic": "x"}, id="s1")]), Text("A found")],
        "crawl_agent": [Text("B crawled")],
    })
    first = await client.run("research and write")
    assert first.status == "waiting", first.error
    resumed = await asyncio.to_thread(resume_elsewhere, config, data, first.message_id)
    assert (resumed["status"], resumed["response"]) == ("completed", "All done.")
    return first.message_id, data


async def test_export_then_replay_is_the_same_and_runs_no_tool(
    make_client, config, llm, effects, tmp_path
):
    mid, data = await record_rich_run(make_client, config, llm, tmp_path)
    client = await make_client(config_dir=config, data_dir=data)
    path = tmp_path / "golden" / "run.jsonl"
    session = await client.runs.export(mid, path)
    await client.aclose()

    # One file for both process segments: 7 model requests, both configurations.
    assert [c.agent for c in session.calls].count("lead_agent") == 4
    assert len(session.calls) == 7 and len(session.configs) == 2
    loaded = read_session(path)
    assert [c.messages for c in loaded.calls] == [c.messages for c in session.calls]
    assert loaded.calls[0].tools and loaded.calls[0].messages[1] == {
        "role": "user", "content": "research and write"}
    assert {t.tool_call_id for t in loaded.tools} >= {"l1", "l2", "a1", "s1", "w1"}
    assert [d["action"] for d in loaded.permissions[0].decisions] == ["approve"]
    assert loaded.configs[0]["agents"]["lead_agent"]["prompt"] == "You are the lead agent."
    assert loaded.configs[0]["tools"]["append_line"]["permission"] == "confirm"

    for name in ("lookups.txt", "journal.txt"):
        (effects / name).unlink()
    before = tree(data)
    requests = llm.request_count
    report = await replay_session(path, load_settings(config, tmp_path / "elsewhere"))
    assert report.line() == "same (7 steps)", report.divergence
    assert report.replayed == 7
    assert list(effects.iterdir()) == []  # no tool ran
    assert llm.request_count == requests  # no model was called
    assert tree(data) == before  # the user's data folder was not touched
    assert not (tmp_path / "elsewhere").exists()


async def test_changed_prompt_diverges_at_its_first_request_with_a_diff(
    make_client, config, llm, effects, tmp_path
):
    mid, data = await record_rich_run(make_client, config, llm, tmp_path)
    client = await make_client(config_dir=config, data_dir=data)
    path = tmp_path / "run.jsonl"
    session = await client.runs.export(mid, path)
    write_agent(config / "agents", "search_agent", tools=["lookup"],
                description="search_agent does research",
                prompt="You are search_agent, a careful subagent.")
    report = await replay_session(path, load_settings(config, data))
    assert report.verdict == "diverged"
    first_search = next(c.step for c in session.calls if c.agent == "search_agent")
    assert first_search == 3
    assert report.divergence.step == first_search and report.divergence.kind == "messages"
    assert report.divergence.agent == "search_agent"
    assert "-    You are search_agent, a subagent." in report.divergence.diff
    assert "+    You are search_agent, a careful subagent." in report.divergence.diff
    assert report.line().startswith("diverged at step 3: search_agent sent different messages")


async def test_changed_tool_arguments_diverge(make_client, config, llm, effects, tmp_path):
    """The person edited the arguments at the pause; under a config where the tool no longer
    asks, the model's own arguments are used: a different call than the recorded one."""
    data = tmp_path / "data"
    client = await make_client(config_dir=config, data_dir=data)
    llm.script(ToolCalls([Call("append_line", {"text": "hello"}, id="w1")]), Text("ok"))
    first = await client.run("write it")
    decision = {"w1": {"action": "edit", "arguments": {"text": "edited"}}}
    done = await client.run(Resume(first.message_id, decision))
    assert done.status == "completed"
    assert (effects / "journal.txt").read_text() == "edited\n"
    path = tmp_path / "run.jsonl"
    await client.runs.export(first.message_id, path)
    assert (await replay_session(path, load_settings(config, data))).ok

    text = (config / "artifactflow.yaml").read_text()
    (config / "artifactflow.yaml").write_text(text + "permissions: {append_line: auto}\n")
    report = await replay_session(path, load_settings(config, data))
    assert report.verdict == "diverged"
    assert report.divergence.step == 1 and report.divergence.kind == "tool_arguments"
    assert '-  "text": "edited"' in report.divergence.diff
    assert '+  "text": "hello"' in report.divergence.diff
    assert (effects / "journal.txt").read_text() == "edited\n"  # still only the recorded run


async def test_recording_grows_linearly_with_the_run(make_client, config, llm, effects, tmp_path):
    client = await make_client(config_dir=config)
    rounds = 8  # under max_tool_rounds (10)
    llm.script(*[ToolCalls([Call("lookup", {"topic": "t" * 2000 + str(i)})]) for i in range(rounds)],
               Text("done"))
    result = await client.run("many rounds")
    assert result.status == "completed"
    rows = await recorded_calls.rows(client.admin.store, result.message_id)
    calls = [r["data"] for r in rows if r["kind"] == "call"]
    assert len(calls) == rounds + 1
    # Every request after the first keeps the earlier ones and stores only its new messages.
    assert all(c["base"] is not None and len(c["append"]) == 2 for c in calls[1:])
    assert all(c.get("same_tools") for c in calls[1:])
    session = await client.runs.export(result.message_id)
    assert len(session.calls[-1].messages) == 2 + 2 * rounds


async def test_more_runs_at_once_than_the_recorder_remembers_record_every_call(
    make_client, config, llm, effects, tmp_path, monkeypatch
):
    # The recorder keeps the state of a bounded number of messages; a live run whose state it
    # dropped numbered its calls from 1 again: a duplicate row, and calls missing from its
    # export. Three runs at once with room for one must each record all of their calls.
    monkeypatch.setattr(recording, "MESSAGES", 1)
    client = await make_client(config_dir=config)

    def route(request: dict):
        done = sum(1 for m in request["messages"] if m["role"] == "tool")
        return ToolCalls([Call("lookup", {"topic": f"t{done}"})]) if done < 2 else Text("done")

    llm.route(route)
    results = await asyncio.gather(*(client.run(f"task {i}") for i in range(3)))
    assert [r.status for r in results] == ["completed"] * 3
    for result in results:
        rows = await recorded_calls.rows(client.admin.store, result.message_id)
        assert [(r["seq"], r["kind"]) for r in rows] == [
            (1, "config"), (2, "call"), (3, "call"), (4, "call")
        ]


async def record_simple_run(make_client, config: Path, llm, tmp_path: Path) -> tuple[Client, str]:
    client = await make_client(config_dir=config, data_dir=tmp_path / "data")
    llm.script(ToolCalls([Call("lookup", {"topic": "cats"}, id="c1")]), Text("Cats purr."))
    result = await client.run("tell me about cats")
    assert result.status == "completed"
    return client, result.message_id


async def test_eval_prints_a_table_and_fails_on_divergence_or_corruption(
    make_client, config, llm, effects, tmp_path, capsys
):
    client, mid = await record_simple_run(make_client, config, llm, tmp_path)
    golden = tmp_path / "golden"
    args = ["--config-dir", str(config), "--data-dir", str(tmp_path / "data")]
    assert await asyncio.to_thread(main, ["export", mid, "-o", str(golden / "a_same.jsonl"), *args]) == 0
    assert "2 model calls, 1 tool calls, 0 pauses" in capsys.readouterr().out
    lines = (golden / "a_same.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    header["task"] = "tell me about dogs"
    (golden / "b_diverged.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    (golden / "c_corrupt.jsonl").write_text('{"type": "session", "format": "artifactflow-session"\n')

    assert await asyncio.to_thread(main, ["eval", str(golden), *args]) == 1
    out = capsys.readouterr().out
    table = out.splitlines()
    assert table[0].split() == ["FILE", "RESULT"]
    assert table[1].split()[:3] == ["a_same.jsonl", "same", "(2"]
    assert table[2].startswith("b_diverged.jsonl  diverged at step 1: lead_agent sent different")
    assert table[3].startswith("c_corrupt.jsonl   failed: ") and "line 1: not JSON" in table[3]
    assert table[4] == "3 sessions: 1 same, 1 diverged, 1 failed"
    assert "-    tell me about cats" in out and "+    tell me about dogs" in out

    (golden / "b_diverged.jsonl").unlink()
    (golden / "c_corrupt.jsonl").unlink()
    assert await asyncio.to_thread(main, ["eval", str(golden), *args]) == 0
    assert "1 sessions: 1 same, 0 diverged, 0 failed" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["replay", str(golden / "a_same.jsonl"), *args]) == 0
    assert capsys.readouterr().out.startswith("same (2 steps)")
    assert await asyncio.to_thread(main, ["replay", str(tmp_path / "missing.jsonl"), *args]) == 2
    assert "cannot read the session file" in capsys.readouterr().err
    assert (effects / "lookups.txt").read_text() == "cats\n"  # the recorded run's only


async def test_live_model_sends_the_recorded_requests_and_reports_changes(
    make_client, config, llm, effects, tmp_path, capsys
):
    client, mid = await record_simple_run(make_client, config, llm, tmp_path)
    path = tmp_path / "run.jsonl"
    session = await client.runs.export(mid, path)
    settings = load_settings(config, tmp_path / "data")
    sent = llm.request_count

    llm.script(ToolCalls([Call("lookup", {"topic": "dogs"})]), Text("Cats purr."))
    report = await replay_session(path, settings, live_model=True)
    assert llm.request_count == sent + 2
    assert [m["content"] for m in llm.requests[sent]["messages"]] == [
        m["content"] for m in session.calls[0].messages]
    assert report.verdict == "diverged" and report.divergence.step == 1
    assert report.divergence.kind == "tool_calls"
    assert '-      "topic": "cats"' in report.divergence.diff
    assert '+      "topic": "dogs"' in report.divergence.diff
    assert [s.verdict for s in report.live] == ["tool calls changed", "same"]

    llm.script(ToolCalls([Call("lookup", {"topic": "cats"})]), Text("Cats purr loudly."))
    args = ["--config-dir", str(config), "--data-dir", str(tmp_path / "data")]
    assert await asyncio.to_thread(main, ["replay", str(path), "--live-model", *args]) == 0
    out = capsys.readouterr().out
    assert out.startswith("same (2 steps)")
    assert "step 2 lead_agent: text changed" in out
    assert (effects / "lookups.txt").read_text() == "cats\n"  # no tool ran


async def test_a_later_message_replays_with_the_history_artifacts_and_approvals_it_found(
    make_client, config, llm, effects, tmp_path
):
    """The second message of a conversation sees the first one's answer, its artifact and its
    always-allow decision; the replay rebuilds all three, so it is the same."""
    client = await make_client(config_dir=config, data_dir=tmp_path / "data")
    llm.script(
        ToolCalls([
            Call("create_artifact", {"id": "notes", "title": "Notes", "content": "one"}, id="a1"),
            Call("append_line", {"text": "first"}, id="w1"),
        ]),
        Text("Started the notes."),
    )
    first = await client.run("start notes")
    first = await client.run(Resume(first.message_id, "always"))
    assert first.status == "completed"
    llm.script(
        ToolCalls([
            Call("update_artifact", {"id": "notes", "old_str": "one", "new_str": "one two"}, id="u1"),
            Call("append_line", {"text": "second"}, id="w2"),  # always allowed: no pause
        ]),
        Text("Added to the notes."),
    )
    second = await client.run(Task("add to notes", first.conversation_id))
    assert second.status == "completed"
    path = tmp_path / "second.jsonl"
    session = await client.runs.export(second.message_id, path)
    assert [h["response"] for h in session.history] == ["Started the notes."]
    assert session.always_allowed == ["append_line"]
    assert [v["content"] for v in session.artifacts[0]["versions"]] == ["one"]
    lead_first = session.calls[0].messages
    assert {"role": "assistant", "content": "Started the notes."} in lead_first
    assert "notes" in lead_first[0]["content"]  # the artifact inventory in the system prompt

    report = await replay_session(path, load_settings(config, tmp_path / "data"))
    assert report.line() == "same (2 steps)", report.divergence
    assert (effects / "journal.txt").read_text() == "first\nsecond\n"

    # A replay that finds the artifact in another state diverges where the tool answers.
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["artifacts"][0]["versions"][0]["content"] = "zero"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    report = await replay_session(path, load_settings(config, tmp_path / "data"))
    assert report.divergence.step == 1 and report.divergence.kind == "messages"
    assert "-    - id `notes` (v1, text/markdown): Notes — one" in report.divergence.diff


async def test_a_recorded_model_error_is_replayed(make_client, config, llm, effects, tmp_path):
    from scripted_llm import Error

    client = await make_client(config_dir=config, data_dir=tmp_path / "data")
    by_agent(llm, {
        "lead": [
            ToolCalls([Call("call_subagent", {"agent_name": "search_agent", "instruction": "go"},
                            id="p1")]),
            Text("The search failed."),
        ],
        "search_agent": [Error(400, "bad request from the provider")],
    })
    result = await client.run("search")
    assert result.status == "completed"
    path = tmp_path / "run.jsonl"
    session = await client.runs.export(result.message_id, path)
    assert session.calls[1].error["kind"] == "FatalLLMError"
    report = await replay_session(path, load_settings(config, tmp_path / "data"))
    assert report.line() == "same (3 steps)", report.divergence


async def test_a_pause_the_recorded_run_did_not_have_is_a_divergence(
    make_client, config, llm, effects, tmp_path
):
    client, mid = await record_simple_run(make_client, config, llm, tmp_path)
    path = tmp_path / "run.jsonl"
    await client.runs.export(mid, path)
    text = (config / "artifactflow.yaml").read_text()
    (config / "artifactflow.yaml").write_text(text + "permissions: {lookup: confirm}\n")
    report = await replay_session(path, load_settings(config, tmp_path / "data"))
    assert report.divergence.step == 1 and report.divergence.kind == "permission"
    assert "asked for approval of lookup (call c1)" in report.divergence.summary


async def test_a_run_exported_while_paused_replays_to_the_same_pause(
    make_client, config, llm, effects, tmp_path
):
    client = await make_client(config_dir=config, data_dir=tmp_path / "data")
    llm.script(ToolCalls([Call("append_line", {"text": "later"}, id="w1")]))
    paused = await client.run("write later")
    assert paused.status == "waiting"
    path = tmp_path / "paused.jsonl"
    session = await client.runs.export(paused.message_id, path)
    assert session.status == "waiting" and session.permissions[0].decisions is None
    report = await replay_session(path, load_settings(config, tmp_path / "data"))
    assert report.line() == "same (1 step)", report.divergence
    assert not (effects / "journal.txt").exists()


async def test_recording_can_be_turned_off(make_client, config, llm, effects, tmp_path):
    text = (config / "artifactflow.yaml").read_text()
    (config / "artifactflow.yaml").write_text(text + "run:\n  record_requests: false\n")
    client, mid = await record_simple_run(make_client, config, llm, tmp_path)
    assert await recorded_calls.rows(client.admin.store, mid) == []
    with pytest.raises(UserError, match="run.record_requests off"):
        await client.runs.export(mid)
