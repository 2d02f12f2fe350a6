"""Workflows from the command line and over HTTP: list, validate, graph, run (pause in one
process, approve from another), lineage, runs listing and the SSE stream."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest
from cli_fork import fork_cli
from scripted_llm import Call, Text, ToolCalls
from test_api import events_of, parse_sse
from waiting import ceiling
from wf_helpers import ByAgent, as_json, workflow_config

from artifactflow.api.app import create_app
from artifactflow.cli.main import main

API = "/api/v1"
CONFIG = Path(__file__).resolve().parent.parent / "config" / "workflows"
TRIAGE_AGENTS = {"classifier": [], "bug_triager": ["note"], "billing_agent": [], "support_agent": []}
PLUGIN = '''
import os
import re
from artifactflow import tool

@tool(permission="confirm")
def note(text: str) -> str:
    """File a note for engineering."""
    with open(os.environ["AF_NOTES"], "a", encoding="utf-8") as handle:
        handle.write(text + "\\n")
    return "filed"
'''
BROKEN = """
name: broken
nodes:
  - {id: start, role: start}
  - {id: ask, role: linear, kind: agent, agent: ghost, instruction: "{{ nodes.later.output }}"}
  - {id: done, role: exit}
edges:
  - {from: start, to: ask}
  - {from: ask, to: done}
"""


@pytest.fixture
def config(tmp_path: Path, llm_env, monkeypatch) -> Path:
    monkeypatch.setenv("AF_NOTES", str(tmp_path / "notes.txt"))
    return workflow_config(tmp_path, {"triage": (CONFIG / "triage.yaml").read_text()},
                           agents=TRIAGE_AGENTS, yaml_text="plugins: [note_tools]\n",
                           plugin_files={"note_tools.py": PLUGIN})


def cli(config: Path, data: Path, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--config-dir", str(config), "--data-dir", str(data), *args])
    out, err = capsys.readouterr()
    return code, out, err


def sub(config: Path, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own (forked from the server that imported it
    once: tests/cli_fork.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIFACTFLOW_")}
    env.update(NO_COLOR="1", PYTHONUNBUFFERED="1", COLUMNS="200")
    argv = ["--config-dir", str(config), "--data-dir", str(data), *args]
    code, out, err = fork_cli(argv, env, ceiling(300))
    return subprocess.CompletedProcess(argv, code, out, err)


def test_cli_list_validate_and_graph(config, tmp_path, capsys):
    data = tmp_path / "data"
    (config / "workflows" / "broken.yaml").write_text(BROKEN)
    code, out, _ = cli(config, data, capsys, "workflows")
    assert code == 0
    assert "✓ triage" in out and "✗ broken" in out and "2 problem(s)" in out
    code, out, _ = cli(config, data, capsys, "workflows", "--json")
    listed = {w["name"]: w for w in json.loads(out)}
    assert listed["triage"]["valid"] and not listed["broken"]["valid"]
    code, out, _ = cli(config, data, capsys, "workflow", "validate", str(config / "workflows" / "broken.yaml"))
    assert code == 2
    assert "node 'ask': unknown agent 'ghost'" in out and "fix: use one of:" in out
    assert "unknown node 'later'" in out
    code, out, _ = cli(config, data, capsys, "workflow", "validate", str(config / "workflows" / "triage.yaml"))
    assert code == 0 and "workflow 'triage' is valid (7 nodes)" in out
    code, out, _ = cli(config, data, capsys, "workflow", "validate", str(tmp_path / "missing.yaml"), "--json")
    assert code == 2 and "cannot read the file" in json.loads(out)["issues"][0]["message"]
    code, out, _ = cli(config, data, capsys, "workflow", "graph", "triage")
    assert code == 0 and out.startswith("flowchart TD\n") and 'n_route -- "bug" --> n_bug' in out
    code, _, err = cli(config, data, capsys, "workflow", "graph", "nope")
    assert code == 2 and "workflow 'nope' not found" in err


def test_cli_run_pauses_then_another_process_approves_then_lineage(config, tmp_path, llm, capsys):
    data = tmp_path / "data"
    ByAgent(llm, {
        "classifier": [Text(as_json({"category": "bug", "summary": "crash on save"}))],
        "bug_triager": [ToolCalls([Call("note", {"text": "crash on save"}, id="n1")]),
                        Text("Thanks, we are on it.")],
    })
    paused = sub(config, data, "workflow", "run", "triage", "--input", "ticket=It crashes", "--no-input")
    assert paused.returncode == 3, paused.stdout + paused.stderr
    assert "▶ classify#1 [linear]" in paused.stdout and "✓ route#1 ok" in paused.stdout
    mid = re.search(r"paused: message ([0-9a-f]{32}) waits", paused.stdout).group(1)
    assert not (tmp_path / "notes.txt").exists()
    resumed = sub(config, data, "resume", mid, "--approve")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "✓ done" in resumed.stdout and "Thanks, we are on it." in resumed.stdout
    assert (tmp_path / "notes.txt").read_text() == "crash on save\n"
    code, out, _ = cli(config, data, capsys, "lineage", mid)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("done#1 [exit] ok → Thanks, we are on it.")
    assert "└─ bug#1 [linear, agent] ok" in lines[1]
    assert any("start#1 [start] ok" in line for line in lines)
    code, out, _ = cli(config, data, capsys, "lineage", mid, "--json")
    assert [r["execution_id"] for r in json.loads(out)][:2] == ["start#1", "classify#1"]
    code, _, err = cli(config, data, capsys, "lineage", "nope")
    assert code == 2 and "message nope not found" in err


def test_cli_inputs_from_file_and_bad_input(config, tmp_path, llm, capsys):
    data = tmp_path / "data"
    ByAgent(llm, {"classifier": [Text(as_json({"category": "question", "summary": "s"}))],
                  "support_agent": [Text("Here is how.")]})
    (tmp_path / "in.yaml").write_text("ticket: How do I export?\n")
    code, out, _ = cli(config, data, capsys, "workflow", "run", "triage", "--input-file",
                       str(tmp_path / "in.yaml"), "--json")
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and events[-1]["type"] == "complete"
    assert events[0]["data"]["input"] == {"ticket": "How do I export?"}
    code, _, err = cli(config, data, capsys, "workflow", "run", "triage", "--input", "subject=x")
    assert code == 2 and "does not match its schema" in err and "ticket" in err


async def test_http_list_run_stream_runs_and_lineage(config, tmp_path, llm, make_client):
    af = await make_client(config_dir=config)
    ByAgent(llm, {"classifier": [Text(as_json({"category": "billing", "summary": "s"}))],
                  "billing_agent": [Text("Refund requested.")]})
    app = create_app(client=af)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        listed = (await client.get(f"{API}/workflows")).json()["items"]
        assert [w["name"] for w in listed] == ["triage"] and listed[0]["valid"]
        detail = (await client.get(f"{API}/workflows/triage")).json()
        assert detail["mermaid"].startswith("flowchart TD") and detail["input"]["required"] == ["ticket"]
        assert (await client.get(f"{API}/workflows/nope")).status_code == 404
        bad = await client.post(f"{API}/workflows/triage/runs", json={"input": {"ticket": 3}})
        assert bad.status_code == 422 and "does not match its schema" in bad.json()["error"]["message"]
        started = await client.post(f"{API}/workflows/triage/runs", json={"input": {"ticket": "charged twice"}})
        assert started.status_code == 202, started.text
        ids = started.json()
        assert ids["workflow"] == "triage" and ids["stream_url"] == f"{API}/stream/{ids['message_id']}"
        frames = events_of(parse_sse((await client.get(ids["stream_url"])).text))
        types = [f["event"] for f in frames if f["event"] != "llm_chunk"]
        assert types[0] == "metadata" and types[-1] == "complete"
        assert types.count("workflow_node_start") == 5 and types.count("workflow_node_complete") == 5
        runs = (await client.get(f"{API}/workflows/triage/runs")).json()["items"]
        assert [(r["message_id"], r["status"]) for r in runs] == [(ids["message_id"], "completed")]
        lineage = (await client.get(f"{API}/messages/{ids['message_id']}/lineage")).json()
        assert lineage["tree"]["execution_id"] == "done#1"
        assert lineage["tree"]["parents"][0]["execution_id"] == "billing#1"
        by_id = {r["execution_id"]: r for r in lineage["records"]}
        assert by_id["route#1"]["output"] == {"choice": "billing"}
        assert (await client.get(f"{API}/messages/nope/lineage")).status_code == 404
