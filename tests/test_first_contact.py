"""Bugs a new user met in the first hour (issue 23), each through the path they took."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from pg import ADMIN_URL, create_database, drop_database
from wf_helpers import workflow_config

from artifactflow.api.app import create_app
from artifactflow.cli.main import main

API = "/api/v1"
CONFIG = Path(__file__).resolve().parent.parent / "config" / "workflows"
# A review loop whose back edge lacks `max_iterations`: the forward graph has a cycle, and the
# first leftover node in name order ("done") lies after it, not on it.
LOOP = """
name: loop
nodes:
  - {id: start, role: start}
  - {id: write, role: linear, kind: agent, agent: classifier, instruction: "Write"}
  - {id: review, role: decision, route_on: "{{ nodes.write.output }}"}
  - {id: done, role: exit}
edges:
  - {from: start, to: write}
  - {from: write, to: review}
  - {from: review, to: write, label: again}
  - {from: review, to: done, label: ok}
"""


def _config(tmp_path: Path) -> Path:
    agents = {"classifier": [], "bug_triager": [], "billing_agent": [], "support_agent": []}
    return workflow_config(
        tmp_path, {"triage": (CONFIG / "triage.yaml").read_text(), "loop": LOOP}, agents=agents
    )


def cli(config: Path, data: Path, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--config-dir", str(config), "--data-dir", str(data), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_loop_edge_without_max_iterations_is_reported_not_a_crash(tmp_path, llm_env, capsys):
    config, data = _config(tmp_path), tmp_path / "data"
    path = config / "workflows" / "loop.yaml"
    code, out, err = cli(config, data, capsys, "workflows", "--json")
    assert code == 0, err
    listed = {w["name"]: w for w in json.loads(out)}
    assert listed["triage"]["valid"]
    assert not listed["loop"]["valid"] and listed["loop"]["file"] == str(path)
    messages = " | ".join(i["message"] for i in listed["loop"]["issues"])
    assert "write -> review -> write" in messages and "review -> write" in messages
    code, out, _ = cli(config, data, capsys, "workflows")
    assert code == 0 and "✓ triage" in out and "✗ loop" in out
    code, out, _ = cli(config, data, capsys, "workflow", "validate", str(path))
    assert code == 2 and str(path) in out and "max_iterations" in out


async def test_the_api_lists_valid_workflows_and_an_error_entry_per_bad_one(
    tmp_path, llm_env, make_client
):
    config = _config(tmp_path)
    (config / "workflows" / "garbled.yaml").write_text("name: [unclosed\n")
    client = await make_client(config_dir=config)
    app = create_app(client=client)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        response = await http.get(f"{API}/workflows")
        assert response.status_code == 200, response.text
        listed = {w["name"]: w for w in response.json()["items"]}
        assert set(listed) == {"triage", "loop", "garbled"}
        assert (
            listed["triage"]["valid"]
            and not listed["loop"]["valid"]
            and not listed["garbled"]["valid"]
        )
        assert listed["garbled"]["file"].endswith("garbled.yaml") and listed["garbled"]["issues"]
        # Another file's problem does not hide a valid workflow; the bad one answers its problem.
        assert (await http.get(f"{API}/workflows/triage")).status_code == 200
        bad = (await http.get(f"{API}/workflows/loop")).json()["error"]
        assert bad["code"] == "config_error" and "loop.yaml" in bad["message"]
        assert "edge review -> write goes back without max_iterations" in bad["message"]


def test_a_missing_postgresql_database_is_one_line_and_exit_2(
    tmp_path, llm_env, capsys, monkeypatch
):
    # The server must be there (tests/pg.py fails under CI otherwise); only the database is not.
    existing = asyncio.run(create_database())
    asyncio.run(drop_database(existing))
    name = existing.rsplit("/", 1)[1]
    monkeypatch.setenv("ARTIFACTFLOW_DATABASE_URL", f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}")
    config, data = _config(tmp_path), tmp_path / "data"
    for args in (["conversations"], ["run", "hello"]):
        code, out, err = cli(config, data, capsys, *args)
        assert code == 2, (args, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and f"PostgreSQL database '{name}' does not exist" in lines[0], err
        assert (
            "Background on this error" not in err
            and "sqlalche" not in err
            and "DBAPIError" not in err
        )


STAMP = '''
from artifactflow import tool

@tool
def stamp() -> str:
    """Return a stamp."""
    return "stamped"
'''


async def test_tokens_of_a_cancelled_run_are_counted_in_the_totals(tmp_path, make_client, llm):
    from conftest import make_config
    from scripted_llm import Call, Text, ToolCalls

    from artifactflow import Task
    from artifactflow.core.window.tokens import text_tokens

    config = make_config(
        tmp_path,
        lead_tools=["stamp"],
        yaml_text="plugins: [stamp_tools]\n",
        plugin_files={"stamp_tools.py": STAMP},
    )
    client = await make_client(config_dir=config)
    llm.script(ToolCalls([Call("stamp", {})]), Text("z" * 400, chunk_size=1, chunk_delay=0.05))
    run = await client.runs.start(Task("stamp it"))
    spent = None
    async for event in run:
        if event.type == "llm_complete":
            spent = event.data.usage.prompt_tokens + event.data.usage.completion_tokens
        if event.type == "llm_chunk":  # the second model call is streaming
            break
    assert spent
    assert await run.cancel() is True
    cancelled = await run.result()
    assert cancelled.status == "cancelled"
    # The call cut off mid-stream is stored too, its usage estimated (no provider reported it).
    calls = [e.data for e in await client.runs.events(run.message_id) if e.type == "llm_complete"]
    assert [c.finish_reason for c in calls] == ["tool_calls", "cancelled"]
    cut = calls[1]
    assert cut.usage_estimated is True and calls[0].usage_estimated is None
    assert cut.content and set(cut.content) == {"z"} and cut.content.startswith(cancelled.response)
    assert cut.usage.prompt_tokens > 0 and cut.usage.completion_tokens == text_tokens(cut.content)
    spent += cut.usage.prompt_tokens + cut.usage.completion_tokens
    message = await client.conversations.message(run.message_id)
    assert message["metrics"]["tokens"]["total"] == spent  # both calls of the cancelled run
    assert message["metrics"]["llm_calls"] == 2
    llm.script(Text("next"))
    events = [e async for e in await client.runs.start(Task("again", cancelled.conversation_id))]
    complete = events[-1]
    own = complete.data.metrics["tokens"]["total"]
    assert complete.data.metrics["conversation"]["tokens"]["total"] == own + spent


async def test_a_failed_attempt_and_its_retry_both_count(tmp_path, make_client, llm):
    from conftest import make_config
    from scripted_llm import Call, Error, Text, ToolCalls

    from artifactflow import Retry, Task

    config = make_config(
        tmp_path,
        lead_tools=["stamp"],
        yaml_text="plugins: [stamp_tools]\n",
        plugin_files={"stamp_tools.py": STAMP},
    )
    client = await make_client(config_dir=config)
    llm.script(ToolCalls([Call("stamp", {})]), Error(400, "bad request"))
    failed = await client.run(Task("stamp it"))
    assert failed.status == "failed"
    events = await client.runs.events(failed.message_id)
    usage = next(e.data.usage for e in events if e.type == "llm_complete")
    spent = usage.prompt_tokens + usage.completion_tokens
    message = await client.conversations.message(failed.message_id)
    assert message["metrics"]["tokens"]["total"] == spent
    llm.script(Text("done"))
    retried = await client.run(Retry(failed.message_id))
    assert retried.status == "completed"
    own = retried.metrics["tokens"]["total"]
    assert retried.metrics["conversation"]["tokens"]["total"] == own + spent


def test_validation_never_crashes_on_random_graphs():
    """Random node roles and edges (loops with and without max_iterations): validation
    answers a list of issues for every one, and a cycle is always named by a real edge."""
    import random

    import yaml

    from artifactflow.workflows import validate_workflow
    from artifactflow.workflows.spec import parse_workflow

    roles = ["linear", "linear", "decision", "split", "merge", "branch", "exit"]
    rng = random.Random(23)
    for case in range(300):
        ids = ["start", *(f"n{i}" for i in range(rng.randint(1, 7)))]
        nodes = [{"id": "start", "role": "start"}]
        for node_id in ids[1:]:
            role = rng.choice(roles)
            node = {"id": node_id, "role": role}
            if role == "linear":
                node.update(kind="agent", agent="writer", instruction="x")
            elif role == "decision":
                node["route_on"] = "{{ input.x }}"
            nodes.append(node)
        edges = []
        for _ in range(rng.randint(1, 12)):
            edge = {"from": rng.choice(ids), "to": rng.choice(ids), "label": f"l{len(edges)}"}
            if rng.random() < 0.2:
                edge["max_iterations"] = 2
            edges.append(edge)
        text = yaml.safe_dump({"name": f"case{case}", "nodes": nodes, "edges": edges})
        spec = parse_workflow(text, source=f"case{case}.yaml")
        issues, topo = validate_workflow(spec, agents={"writer"}, tools={})
        if topo.cycle is not None:
            pairs = {(e["from"], e["to"]) for e in edges if "max_iterations" not in e}
            assert all(
                pair in pairs for pair in zip(topo.cycle[:-1], topo.cycle[1:], strict=True)
            ), (
                text,
                topo.cycle,
            )
            assert any("cycle" in i.message for i in issues)
