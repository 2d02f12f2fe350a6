"""Running workflows: each role's semantics against the scripted model, the shipped examples
end to end, output-schema repair, failure policies, branch cancellation and lineage."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from scripted_llm import Error, Text
from waiting import wait_until
from wf_helpers import ByAgent, as_json, by_item, instruction_of, workflow_config

from artifactflow import NotFoundError, UserError, WorkflowTask
from artifactflow.agents.model import ScriptedModel
from artifactflow.workflows.lineage import provenance, tree_lines

CONFIG = Path(__file__).resolve().parent.parent / "config" / "workflows"
TRIAGE_AGENTS = {"classifier": [], "bug_triager": [], "billing_agent": [], "support_agent": []}
RESEARCH_AGENTS = {"planner": [], "search_agent": [], "reviewer": [], "writer": []}
# A model answer that streams for a minute unless the client goes away (which it counts).
SLOW = Text("z" * 1200, chunk_size=1, chunk_delay=0.05)


def shipped(name: str) -> str:
    return (CONFIG / f"{name}.yaml").read_text()


def kinds(events) -> list[str]:
    return [e.type for e in events if e.type != "llm_chunk"]


def node_events(events, type_="workflow_node_complete") -> dict[str, dict]:
    return {e.data.execution: e.data for e in events if e.type == type_}


async def run(client, name, value):
    async with await client.runs.start(WorkflowTask(name, value)) as handle:
        return [e async for e in handle]


@pytest.mark.parametrize("category,agent", [("bug", "bug_triager"), ("billing", "billing_agent"),
                                            ("question", "support_agent")])
async def test_triage_example_routes_each_category(make_client, tmp_path, llm, category, agent):
    config = workflow_config(tmp_path, {"triage": shipped("triage")}, agents=TRIAGE_AGENTS)
    client = await make_client(config_dir=config)
    answers = ByAgent(llm, {"classifier": [Text(as_json({"category": category, "summary": "s"}))],
                            agent: [Text(f"answer from {agent}")]})
    events = await run(client, "triage", {"ticket": "help"})
    assert events[-1].type == "complete" and events[-1].data.response == f"answer from {agent}"
    assert answers.agents() == ["classifier", agent]
    done = node_events(events)
    assert done["route#1"].choice == category and done["route#1"].status == "ok"
    assert done["done#1"].parents == [f"{category}#1"]
    assert events[0].type == "metadata" and events[0].data.workflow == "triage"
    message = await client.admin.store.get_message(events[0].message_id)
    assert message["status"] == "completed" and message["response"] == f"answer from {agent}"
    assert not llm.unexpected


async def test_workflow_runs_on_an_in_process_model(make_client, tmp_path, monkeypatch):
    """Workflow steps call models through the Model seam: a ScriptedModel serves every agent,
    with no socket and no API key."""
    monkeypatch.delenv("OPENAI_API_KEY")
    config = workflow_config(tmp_path, {"triage": shipped("triage")}, agents=TRIAGE_AGENTS)
    client = await make_client(config_dir=config)
    answers = {"classifier": as_json({"category": "billing", "summary": "s"}), "billing_agent": "refunded"}
    model = ScriptedModel(function=lambda request: answers.get(request.agent))
    client.admin.services.use_model(model)
    events = await run(client, "triage", {"ticket": "charged twice"})
    assert events[-1].type == "complete" and events[-1].data.response == "refunded"
    assert [r.agent for r in model.requests] == ["classifier", "billing_agent"]
    assert node_events(events)["route#1"].choice == "billing"
    with pytest.raises(UserError, match="run of workflow 'triage'; export and replay cover chat runs only"):
        await client.runs.export(events[0].message_id)  # rather than a replay that diverges


@pytest.mark.parametrize("budget,outcome,agents", [(1, "budget_exceeded", ["classifier"]),
                                                    (100_000, "completed", ["classifier", "billing_agent"])])
async def test_a_run_budget_stops_a_workflow_between_nodes(make_client, tmp_path, llm, budget, outcome, agents):
    config = workflow_config(tmp_path, {"triage": shipped("triage")}, agents=TRIAGE_AGENTS,
                             yaml_text=f"budget:\n  max_tokens: {budget}\n")
    client = await make_client(config_dir=config)
    answers = ByAgent(llm, {"classifier": [Text(as_json({"category": "billing", "summary": "s"}))],
                            "billing_agent": [Text("refunded")]})
    events = await run(client, "triage", {"ticket": "charged twice"})
    assert events[-1].type == "complete" and events[-1].data.outcome == outcome
    assert answers.agents() == agents


async def test_research_example_end_to_end(make_client, tmp_path, llm):
    """plan → split over questions → search each → merge → review loops once → draft →
    publish (artifact tool) → exit; the second 'more' exhausts the loop and takes the fallback."""
    config = workflow_config(tmp_path, {"research": shipped("research")}, agents=RESEARCH_AGENTS)
    client = await make_client(config_dir=config)
    answers = ByAgent(llm, {
        "planner": [Text(as_json({"questions": ["Q-alpha", "Q-beta"]})),
                    Text(as_json({"questions": ["Q-gamma"]}))],
        "search_agent": by_item({"Q-alpha": Text("alpha facts [a.org]"),
                                 "Q-beta": Text("beta facts [b.org]"),
                                 "Q-gamma": Text("gamma facts [c.org]")}),
        "reviewer": [Text(as_json({"choice": "more", "reason": "thin"})),
                     Text(as_json({"choice": "more", "reason": "still thin"}))],
        "writer": [Text("# Report\nalpha, beta and gamma.")],
    })
    events = await run(client, "research", {"topic": "greek letters"})
    assert events[-1].type == "complete", events[-1].data
    mid = events[0].message_id
    artifact = await client.admin.store.get_artifact(events[0].conversation_id, "report")
    assert artifact["content"] == "# Report\nalpha, beta and gamma." and artifact["title"] == "Report: greek letters"
    assert "artifact_created" in kinds(events)
    done = node_events(events)
    assert done["review#1"].choice == "more"
    assert done["review#2"].choice == "enough" and done["review#2"].exhausted == "more"
    assert done["fan_out#2"].count == 1
    records = {r["execution_id"]: r for r in await client.admin.store.lineage(mid)}
    assert records["findings#1"]["output"] == ["alpha facts [a.org]", "beta facts [b.org]"]
    assert records["findings#1"]["parents"] == ["search#1[0]", "search#1[1]"]
    assert records["findings#2"]["output"] == ["gamma facts [c.org]"]
    assert records["search#1[1]"]["group_id"] == "fan_out#1" and records["search#1[1]"]["item_index"] == 1
    assert records["search#1[1]"]["input"]["item"] == "Q-beta"
    assert records["plan#2"]["parents"] == ["review#1"] and records["plan#2"]["iteration"] == 2
    assert records["publish#1"]["output"]["artifact_id"] == "report"
    assert records["done#1"]["parents"] == ["publish#1"]
    # the planner saw its round number; the writer saw the latest findings only
    plans = [text for agent, text in answers.seen if agent == "planner"]
    assert "Planning round 1" in plans[0] and "Planning round 2" in plans[1]
    writer = next(text for agent, text in answers.seen if agent == "writer")
    assert "gamma facts" in writer and "alpha facts" not in writer
    assert not llm.unexpected


SPLIT = """
name: fanout
input:
  type: object
  properties: {items: {type: array, items: {type: string}}}
  required: [items]
nodes:
  - {id: start, role: start}
  - {id: fan, role: split, over: "{{ input.items }}"}
  - {id: work, role: linear, kind: agent, agent: worker, instruction: "Do {{ item }}", on_failure: POLICY}
  - {id: join, role: merge, strategy: concatenate, separator: " | "}
  - {id: done, role: exit}
edges:
  - {from: start, to: fan}
  - {from: fan, to: work}
  - {from: work, to: join}
  - {from: join, to: done}
"""


async def test_split_with_a_failing_item_continue(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"fanout": SPLIT.replace("POLICY", "continue")}, agents={"worker": []})
    client = await make_client(config_dir=config)
    ByAgent(llm, {"worker": by_item({"Do a": Text("A done"), "Do b": Error(400, "bad item"),
                                     "Do c": Text("C done")})})
    events = await run(client, "fanout", {"items": ["a", "b", "c"]})
    assert events[-1].type == "complete"
    assert events[-1].data.response == "A done | C done"
    done = node_events(events)
    assert done["work#1[1]"].status == "failed" and "bad item" in done["work#1[1]"].error
    assert done["join#1"].failed_items == [1]
    records = {r["execution_id"]: r for r in await client.admin.store.lineage(events[0].message_id)}
    assert records["join#1"]["parents"] == ["work#1[0]", "work#1[1]", "work#1[2]"]
    assert records["join#1"]["input"]["failed"] == [1]


async def test_split_with_a_failing_item_fail(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"fanout": SPLIT.replace("POLICY", "fail")}, agents={"worker": []})
    client = await make_client(config_dir=config)
    c_started = threading.Event()

    def worker(request):
        text = instruction_of(request)
        if "Do c" in text:
            c_started.set()
            return SLOW
        if "Do b" in text:
            c_started.wait(10)  # fail while the sibling's model call is streaming
            return Error(400, "bad item")
        return Text("A done")

    ByAgent(llm, {"worker": worker})
    events = await run(client, "fanout", {"items": ["a", "b", "c"]})
    assert events[-1].type == "error"
    text = events[-1].data.message
    assert "workflow node 'work' (item 1) failed" in text and "on_failure: continue" in text
    message = await client.admin.store.get_message(events[0].message_id)
    assert message["status"] == "failed"
    assert "join" not in {r["node_id"] for r in await client.admin.store.lineage(events[0].message_id)}
    await wait_until(lambda: llm.disconnects >= 1)  # the slow sibling's call was cancelled


async def test_split_over_an_empty_list_and_non_list(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"fanout": SPLIT.replace("POLICY", "fail")}, agents={"worker": []})
    client = await make_client(config_dir=config)
    events = await run(client, "fanout", {"items": []})
    assert events[-1].type == "complete" and events[-1].data.response == ""
    assert llm.requests == []


BRANCH = """
name: race
nodes:
  - {id: start, role: start}
  - {id: fork, role: branch}
  - {id: quick, role: linear, kind: agent, agent: fast, instruction: "path {{ index }}"}
  - {id: ponder, role: linear, kind: agent, agent: slow, instruction: "path {{ index }}"}
  - {id: polish, role: linear, kind: agent, agent: slow, instruction: "polish {{ nodes.ponder.output }}"}
  - {id: first, role: merge, strategy: first}
  - {id: done, role: exit}
edges:
  - {from: start, to: fork}
  - {from: fork, to: quick}
  - {from: fork, to: ponder}
  - {from: ponder, to: polish}
  - {from: quick, to: first}
  - {from: polish, to: first}
  - {from: first, to: done}
"""


async def test_branch_first_success_wins_and_cancels_the_rest(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"race": BRANCH}, agents={"fast": [], "slow": []})
    client = await make_client(config_dir=config)
    slow_started = threading.Event()

    def fast(request):
        slow_started.wait(10)  # answer only once the slow path's model call is streaming
        return Text("quick answer")

    def slow(request):
        slow_started.set()
        return SLOW

    answers = ByAgent(llm, {"fast": fast, "slow": slow})
    events = await run(client, "race", {})
    assert events[-1].type == "complete" and events[-1].data.response == "quick answer"
    done = node_events(events)
    assert done["quick#1[0]"].status == "ok"
    assert done["ponder#1[1]"].status == "cancelled"
    assert "polish#1[1]" not in done  # the lost path stopped: its next node never ran
    assert answers.agents().count("slow") == 1
    await wait_until(lambda: llm.disconnects == 1)  # the slow call was cancelled mid-stream
    # ... and its tokens count: its llm_complete is stored with estimated usage.
    calls = {e.data.finish_reason: e.data for e in events if e.type == "llm_complete"}
    assert set(calls) == {"stop", "cancelled"} and calls["cancelled"].usage_estimated is True
    assert events[-1].data.metrics["llm_calls"] == 2
    records = {r["execution_id"]: r for r in await client.admin.store.lineage(events[0].message_id)}
    assert records["first#1"]["parents"] == ["quick#1[0]"]
    assert records["first#1"]["group_id"] == "fork#1"
    assert records["ponder#1[1]"]["status"] == "cancelled"


async def test_branch_every_path_failing_fails_the_merge(make_client, tmp_path, llm):
    text = BRANCH.replace('instruction: "path {{ index }}"}', 'instruction: "path {{ index }}", on_failure: continue}')
    config = workflow_config(tmp_path, {"race": text}, agents={"fast": [], "slow": []})
    client = await make_client(config_dir=config)
    ByAgent(llm, {"fast": [Error(400, "fast broke")], "slow": [Error(400, "slow broke")]})
    events = await run(client, "race", {})
    assert events[-1].type == "error" and "every path of the branch failed" in events[-1].data.message
    done = node_events(events)
    assert done["polish#1[1]"].status == "skipped"


REPAIR = """
name: repair
nodes:
  - {id: start, role: start}
  - id: classify
    role: linear
    kind: agent
    agent: classifier
    instruction: "Classify it"
    output_schema: {type: object, properties: {category: {enum: [x, y]}}, required: [category]}
  - {id: done, role: exit, output: "{{ nodes.classify.output.category }}"}
edges:
  - {from: start, to: classify}
  - {from: classify, to: done}
"""


async def test_output_schema_gets_one_repair_round(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"repair": REPAIR}, agents={"classifier": []})
    client = await make_client(config_dir=config)
    ByAgent(llm, {"classifier": [Text("it is x, I think"), Text('```json\n{"category": "x"}\n```')]})
    events = await run(client, "repair", {})
    assert events[-1].type == "complete" and events[-1].data.response == "x"
    assert node_events(events)["classify#1"].repaired is True
    first, second = llm.requests
    assert "matches this JSON Schema" in first["messages"][1]["content"]
    note = second["messages"][-1]
    assert note["role"] == "user" and "could not be used" in note["content"] and "not JSON" in note["content"]


async def test_output_schema_fails_after_the_repair_round(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"repair": REPAIR}, agents={"classifier": []})
    client = await make_client(config_dir=config)
    ByAgent(llm, {"classifier": [Text('{"category": "z"}'), Text('{"category": "w"}')]})
    events = await run(client, "repair", {})
    assert events[-1].type == "error"
    assert "after one repair round" in events[-1].data.message and "category" in events[-1].data.message
    assert len(llm.requests) == 2


DECIDE = """
name: decide
nodes:
  - {id: start, role: start}
  - {id: judge, role: decision, kind: agent, agent: judge, instruction: "Is {{ input.n }} big?"}
  - {id: big, role: exit, output: "big"}
  - {id: small, role: exit, output: "small"}
edges:
  - {from: start, to: judge}
  - {from: judge, to: big, label: "yes"}
  - {from: judge, to: small, label: "no"}
"""


async def test_decision_agent_chooses_from_the_labels(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"decide": DECIDE}, agents={"judge": []})
    client = await make_client(config_dir=config)
    ByAgent(llm, {"judge": [Text(as_json({"choice": "maybe"})), Text(as_json({"choice": "no", "reason": "3 < 10"}))]})
    events = await run(client, "decide", {"n": 3})
    assert events[-1].data.response == "small"
    prompt = llm.requests[0]["messages"][1]["content"]
    assert '"yes", "no"' in prompt and "choice" in prompt
    records = {r["execution_id"]: r for r in await client.admin.store.lineage(events[0].message_id)}
    assert records["judge#1"]["output"] == {"choice": "no", "reason": "3 < 10"}
    assert records["small#1"]["parents"] == ["judge#1"]


async def test_bad_input_and_unknown_workflow_fail_before_anything_runs(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"triage": shipped("triage")}, agents=TRIAGE_AGENTS)
    client = await make_client(config_dir=config)
    with pytest.raises(UserError, match="does not match its schema.*ticket"):
        await run(client, "triage", {"ticket": 5})
    with pytest.raises(NotFoundError, match="available: triage"):
        await run(client, "nope", {})
    assert await client.admin.store.list_conversations() == []


async def test_lineage_tree_of_a_split_and_merge(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"fanout": SPLIT.replace("POLICY", "fail")}, agents={"worker": []})
    client = await make_client(config_dir=config)
    ByAgent(llm, {"worker": by_item({"Do a": Text("A"), "Do b": Text("B")})})
    events = await run(client, "fanout", {"items": ["a", "b"]})
    records = await client.admin.store.lineage(events[0].message_id)
    tree = provenance(records)
    assert tree["execution_id"] == "done#1"
    join = tree["parents"][0]
    assert join["execution_id"] == "join#1"
    assert [p["execution_id"] for p in join["parents"]] == ["work#1[0]", "work#1[1]"]
    assert [p["execution_id"] for p in join["parents"][0]["parents"]] == ["fan#1"]
    assert join["parents"][1]["parents"][0]["repeated"] is True  # fan#1 is shown once
    lines = tree_lines(tree)
    assert lines[0] == 'done#1 [exit] ok → A | B'
    assert lines[1] == '└─ join#1 [merge, joins fan#1] ok → A | B'
    assert lines[2] == '   ├─ work#1[0] [linear, agent, in fan#1] ok → A'
    assert lines[-1] == '      └─ fan#1 [split] ok (shown above)'
    assert any(line.endswith('start#1 [start] ok → {"items": ["a", "b"]}') for line in lines)


TOOL_DECISION = """
name: gate
nodes:
  - {id: start, role: start}
  - id: check
    role: decision
    kind: tool
    tool: measure
    arguments: {text: "{{ input.text }}"}
    output_schema: {type: object, properties: {size: {enum: [short, long]}}, required: [size]}
    route_on: "{{ output.size }}"
  - {id: brief, role: linear, kind: agent, agent: writer, instruction: "Expand {{ input.text }}", on_failure: continue}
  - {id: summary, role: linear, kind: agent, agent: writer, instruction: "Shorten {{ input.text }}"}
  - {id: done, role: exit}
edges:
  - {from: start, to: check}
  - {from: check, to: brief, label: short}
  - {from: check, to: summary, label: long}
  - {from: brief, to: done}
  - {from: summary, to: done}
"""


async def test_tool_decision_routes_on_its_output_and_continue_on_failure(make_client, tmp_path, llm):
    from artifactflow import tool

    @tool
    def measure(text: str) -> dict:
        """Say whether a text is short or long."""
        return {"size": "short" if len(text) < 10 else "long", "chars": len(text)}

    config = workflow_config(tmp_path, {"gate": TOOL_DECISION}, agents={"writer": []})
    client = await make_client(config_dir=config, extra_tools=[measure])
    ByAgent(llm, {"writer": [Error(400, "model refused")]})
    events = await run(client, "gate", {"text": "hi"})
    assert events[-1].type == "complete" and events[-1].data.response == ""
    records = {r["execution_id"]: r for r in await client.admin.store.lineage(events[0].message_id)}
    assert records["check#1"]["output"] == {"choice": "short"}
    assert records["check#1"]["input"]["arguments"] == {"text": "hi"} and records["check#1"]["input"]["value"] == "short"
    assert records["brief#1"]["status"] == "failed" and "model refused" in records["brief#1"]["error"]
    assert records["done#1"]["parents"] == ["brief#1"] and records["done#1"]["output"] is None
    assert [e.data.tool for e in events if e.type == "tool_start"] == ["measure"]


async def test_leaving_the_stream_cancels_the_run_and_its_items(make_client, tmp_path, llm):
    config = workflow_config(tmp_path, {"fanout": SPLIT.replace("POLICY", "fail")}, agents={"worker": []})
    client = await make_client(config_dir=config)
    ByAgent(llm, {"worker": lambda request: SLOW})
    async with await client.runs.start(WorkflowTask("fanout", {"items": ["a", "b"]})) as handle:
        async for event in handle:
            if event.type == "llm_chunk":
                break  # both items are streaming (or about to): leave early
    message = await client.admin.store.get_message(event.message_id)
    assert message["status"] == "cancelled"
    assert (await client.runs.events(event.message_id))[-1].type == "cancelled"
    await wait_until(lambda: llm.disconnects >= 1)
    assert [t for t in asyncio.all_tasks() if t.get_name() == "agent"] == []  # no nested step left
