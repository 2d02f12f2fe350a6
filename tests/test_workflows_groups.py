"""Agent groups and handoffs: direct handoff, fixed order, a moderator, the turn limit's
explicit outcome, and the validation of members and handoff targets."""

from __future__ import annotations

from pathlib import Path

from conftest import write_agent
from scripted_llm import Call, Text, ToolCalls
from wf_helpers import ByAgent, as_json, instruction_of, workflow_config

from artifactflow import WorkflowTask
from artifactflow.workflows import load_workflow_file, validate_workflow


def group_workflow(mode: str, agents: list[str], extra: str = "") -> str:
    return f"""
name: desk
input: {{type: object, properties: {{request: {{type: string}}}}}}
nodes:
  - {{id: start, role: start}}
  - id: talk
    role: linear
    kind: group
    mode: {mode}
    agents: [{", ".join(agents)}]
    instruction: "Customer request: {{{{ input.request }}}}"
    {extra}
  - {{id: done, role: exit, output: "{{{{ nodes.talk.output.answer }}}}"}}
edges:
  - {{from: start, to: talk}}
  - {{from: talk, to: done}}
"""


def desk(tmp_path: Path, text: str) -> Path:
    config = workflow_config(tmp_path, {"desk": text}, agents={"writer": [], "critic": [], "mod": []})
    agents = config / "agents"
    write_agent(agents, "triager", tools=["handoff"], prompt="You are triager.",
                extra="handoffs: [billing, support]\n")
    write_agent(agents, "billing", tools=["handoff"], prompt="You are billing.", extra="handoffs: [triager]\n")
    write_agent(agents, "support", prompt="You are support.")
    return config


async def run(client, request="my invoice is wrong"):
    events = [e async for e in await client.runs.start(WorkflowTask("desk", {"request": request}))]
    records = {r["execution_id"]: r for r in await client.admin.store.lineage(events[0].message_id)}
    return events, records["talk#1"]


async def test_direct_handoff_passes_the_conversation(make_client, tmp_path, llm):
    config = desk(tmp_path, group_workflow("handoff", ["triager", "billing", "support"]))
    client = await make_client(config_dir=config)
    answers = ByAgent(llm, {
        "triager": [ToolCalls([Call("handoff", {"agent": "ghost"}, id="h0")]),
                    ToolCalls([Call("handoff", {"agent": "billing", "message": "invoice 42 is wrong"}, id="h1")])],
        "billing": [Text("Invoice 42 is corrected.")],
    })
    events, record = await run(client)
    assert events[-1].type == "complete" and events[-1].data.response == "Invoice 42 is corrected."
    output = record["output"]
    assert (output["speaker"], output["turns"], output["outcome"]) == ("billing", 2, "completed")
    assert [t["agent"] for t in output["transcript"]] == ["triager", "billing"]
    refusal = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert refusal[0]["tool_call_id"] == "h0" and "billing, support" in refusal[0]["content"]
    billing_prompt = next(text for agent, text in answers.seen if agent == "billing")
    assert "triager handed the conversation to you: invoice 42 is wrong" in billing_prompt
    assert "handoff tool with one of: triager" in billing_prompt
    handoffs = [e.data.to_dict() for e in events if e.type == "handoff"]
    assert handoffs == [{"execution": "talk#1", "node": "talk", "from_agent": "triager", "to_agent": "billing",
                         "message": "invoice 42 is wrong", "by": "handoff", "turn": 1}]
    triager_prompt = answers.seen[0][1]
    assert "handoff tool with one of: billing" in triager_prompt and "support" in triager_prompt


async def test_handoff_ping_pong_stops_at_max_turns_with_an_explicit_outcome(make_client, tmp_path, llm):
    config = desk(tmp_path, group_workflow("handoff", ["triager", "billing"], "max_turns: 3"))
    client = await make_client(config_dir=config)
    ByAgent(llm, {
        "triager": [ToolCalls([Call("handoff", {"agent": "billing"})]), ToolCalls([Call("handoff", {"agent": "billing"})])],
        "billing": [ToolCalls([Call("handoff", {"agent": "triager", "message": "yours"}, id="b1")])],
    })
    events, record = await run(client)
    assert events[-1].type == "complete"
    assert record["output"]["outcome"] == "max_turns" and record["output"]["turns"] == 3
    done = next(e.data for e in events if e.type == "workflow_node_complete" and e.data.node == "talk")
    assert done.outcome == "max_turns" and done.status == "ok"
    assert [e.data.to_agent for e in events if e.type == "handoff"] == ["billing", "triager", "billing"]


async def test_fixed_order_runs_the_list(make_client, tmp_path, llm):
    config = desk(tmp_path, group_workflow("order", ["writer", "critic", "writer"]))
    client = await make_client(config_dir=config)
    answers = ByAgent(llm, {"writer": [Text("draft 1"), Text("draft 2")], "critic": [Text("shorter please")]})
    events, record = await run(client)
    assert events[-1].data.response == "draft 2"
    assert answers.agents() == ["writer", "critic", "writer"]
    assert record["output"]["outcome"] == "completed" and record["output"]["turns"] == 3
    last_prompt = answers.seen[-1][1]
    assert "**writer**: draft 1" in last_prompt and "**critic**: shorter please" in last_prompt


async def test_moderator_picks_the_next_speaker_and_finishes(make_client, tmp_path, llm):
    config = desk(tmp_path, group_workflow("moderator", ["writer", "critic"], "moderator: mod"))
    client = await make_client(config_dir=config)
    answers = ByAgent(llm, {
        "writer": [Text("draft")],
        "critic": [Text("approved")],
        "mod": [Text("critic please"), Text(as_json({"choice": "critic", "reason": "needs review"})),
                Text(as_json({"choice": "finish"}))],
    })
    events, record = await run(client)
    assert events[-1].data.response == "approved"
    assert answers.agents() == ["writer", "mod", "mod", "critic", "mod"]  # one repair round
    assert record["output"]["outcome"] == "completed" and record["output"]["speaker"] == "critic"
    moderated = [e.data for e in events if e.type == "handoff"]
    assert moderated[0].by == "moderator" and moderated[0].message == "needs review"
    mod_prompt = next(instruction_of(r) for r in llm.requests if "moderate" in instruction_of(r))
    assert '"writer", "critic", "finish"' in mod_prompt


async def test_moderator_turn_limit(make_client, tmp_path, llm):
    config = desk(tmp_path, group_workflow("moderator", ["writer", "critic"], "moderator: mod\n    max_turns: 2"))
    client = await make_client(config_dir=config)
    ByAgent(llm, {"writer": [Text("draft")], "critic": [Text("again")],
                  "mod": [Text(as_json({"choice": "critic"})), Text(as_json({"choice": "writer"}))]})
    events, record = await run(client)
    assert record["output"]["outcome"] == "max_turns" and record["output"]["answer"] == "again"


def test_group_validation(tmp_path):
    from artifactflow.agents.spec import AgentSpec

    agents = {
        "triager": AgentSpec(name="triager", tools=("handoff",), handoffs=("billing", "legal")),
        "billing": AgentSpec(name="billing", handoffs=("triager",)),
        "writer": AgentSpec(name="writer"),
    }

    def issues(text: str) -> list[str]:
        path = tmp_path / "desk.yaml"
        path.write_text(text)
        return [f"{i.node}: {i.message} | {i.fix}" for i in validate_workflow(load_workflow_file(path), agents=agents, tools={"handoff"})[0]]

    found = issues(group_workflow("handoff", ["triager", "billing", "ghost"]))
    assert any("unknown agent 'ghost' in agents" in i for i in found)
    assert any("'triager' may hand over to 'legal', which is not an agent" in i for i in found)
    assert any("'billing' declares handoffs but cannot call the handoff tool" in i and "add handoff" in i for i in found)
    found = issues(group_workflow("moderator", ["writer", "triager"]))
    assert any("mode: moderator needs moderator" in i for i in found)
    found = issues(group_workflow("order", ["writer", "writer"], "moderator: writer"))
    assert any("moderator is only used in mode: moderator" in i for i in found)
    assert any("needs at least two different agents" in i for i in found)
    assert issues(group_workflow("handoff", ["writer"])) == []
