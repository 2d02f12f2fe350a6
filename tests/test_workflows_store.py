"""Workflow runs and lineage in the app store, on SQLite and PostgreSQL, and a paused split
workflow resumed by a new client on PostgreSQL (app store and checkpoints)."""

from __future__ import annotations

from types import SimpleNamespace

from pg import fresh_database
from scripted_llm import Call, Text, ToolCalls
from test_workflows_pause import JOURNAL, PLUGIN
from wf_helpers import ByAgent, by_item, workflow_config

from artifactflow import Client, Resume, WorkflowTask, load_settings
from artifactflow.core.store.repository import AppStore
from artifactflow.workflows import lineage


async def test_runs_and_lineage_contract(store: AppStore):
    mine = await store.create_conversation(user_id="u1")
    theirs = await store.create_conversation(user_id="u2")
    first = await store.add_message(conversation_id=mine["id"], content="workflow w", parent_id=None)
    second = await store.add_message(conversation_id=theirs["id"], content="workflow w", parent_id=None)
    for message, conversation in ((first, mine), (second, theirs)):
        await store.add_workflow_run({"message_id": message["id"], "conversation_id": conversation["id"],
                                      "workflow": "w", "digest": "d", "definition": "name: w",
                                      "input": {"topic": "ü"}})
    run = await store.get_workflow_run(first["id"])
    assert run["input"] == {"topic": "ü"} and run["definition"] == "name: w"
    assert await store.get_workflow_run("nope") is None
    assert [r["message_id"] for r in await store.list_workflow_runs("w", user_id="u1")] == [first["id"]]
    assert {r["message_id"] for r in await store.list_workflow_runs("w")} == {first["id"], second["id"]}
    assert (await store.list_workflow_runs("w", user_id="u1"))[0]["status"] == "running"
    assert await store.list_workflow_runs("other") == []

    node = SimpleNamespace(id="work", role="linear", kind="agent")
    running = lineage.record(message_id=first["id"], execution="work#1[0]", node=node, iteration=1,
                             group="fan#1", index=0, parents=["fan#1"], status="running",
                             input={"item": "a"}, finished=False)
    await store.put_lineage(running)
    done = {**running, "status": "ok", "output": ["x", {"y": 1}], "started_at": running["started_at"] + 50,
            "finished_at": running["started_at"] + 60}
    await store.put_lineage(done)  # the same execution again (a node re-run on resume): replaced
    split = lineage.record(message_id=first["id"], execution="fan#1", node=SimpleNamespace(id="fan", role="split", kind=None),
                           iteration=1, group=None, index=None, parents=[], status="ok", output=["a"])
    split["started_at"] = running["started_at"] - 1
    await store.put_lineage(split)
    records = await store.lineage(first["id"])
    assert [r["execution_id"] for r in records] == ["fan#1", "work#1[0]"]
    work = records[1]
    assert work["status"] == "ok" and work["output"] == ["x", {"y": 1}] and work["parents"] == ["fan#1"]
    assert work["started_at"] == running["started_at"]  # the first start time stays
    assert work["input"] == {"item": "a"} and work["item_index"] == 0
    assert [r["execution_id"] for r in await store.lineage(first["id"], group_id="fan#1")] == ["work#1[0]"]
    await store.delete_conversation(mine["id"])
    assert await store.lineage(first["id"]) == [] and await store.get_workflow_run(first["id"]) is None
    assert await store.get_workflow_run(second["id"]) is not None


async def test_paused_split_on_postgres_resumes_in_a_new_client(tmp_path, make_client, llm, monkeypatch):
    journal = tmp_path / "journal.txt"
    monkeypatch.setenv("AF_JOURNAL", str(journal))
    config = workflow_config(tmp_path, {"journal": JOURNAL}, agents={"scribe": ["append_line"]},
                             yaml_text="plugins: [journal_tools]\n", plugin_files={"journal_tools.py": PLUGIN})
    ByAgent(llm, {"scribe": by_item({
        "Record a": [ToolCalls([Call("append_line", {"text": "a"})]), Text("ra")],
        "Record b": [ToolCalls([Call("append_line", {"text": "b"})]), Text("rb")],
    })})
    async with fresh_database() as url:
        settings = load_settings(config, tmp_path / "data", database_url=url)
        client = await Client.open(settings)
        try:
            events = [e async for e in await client.runs.start(WorkflowTask("journal", {"items": ["a", "b"]}))]
            assert events[-1].type == "permission_request" and len(events[-1].data.calls) == 2
            mid, thread = events[-1].message_id, events[-1].thread_id
        finally:
            await client.aclose()
        client = await Client.open(settings)
        try:
            stamped = await client.run(Resume(mid, "approve"))
            assert stamped.status == "waiting" and sorted(journal.read_text().split()) == ["a", "b"]
            done = await client.run(Resume(mid, "approve"))
            assert done.status == "completed" and done.response == "ra, rb"
            assert journal.read_text().splitlines()[2:] == ["summary: ra, rb"]
            assert not await client.admin.checkpoints.has_checkpoint(thread)
            assert [r["node_id"] for r in await client.admin.store.lineage(mid)].count("write") == 2
        finally:
            await client.aclose()
