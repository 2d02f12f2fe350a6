"""Workflow files: parsing, every validation error (with file, node and fix), Mermaid."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from artifactflow.workflows import (
    WorkflowValidationError,
    check_workflow,
    load_workflow_file,
    to_mermaid,
    validate_workflow,
)

AGENTS = {"writer", "classifier", "planner"}
TOOLS = {
    "create_artifact": {"type": "object", "properties": {"id": {}, "title": {}, "content": {}},
                        "required": ["id", "title", "content"]},
    "call_subagent": {"type": "object", "properties": {}},
}
CONFIG = Path(__file__).resolve().parent.parent / "config"

BASE: dict[str, Any] = {
    "name": "sample",
    "input": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
    "nodes": [
        {"id": "start", "role": "start"},
        {"id": "classify", "role": "linear", "kind": "agent", "agent": "classifier",
         "instruction": "Classify {{ input.topic }}",
         "output_schema": {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}}},
        {"id": "route", "role": "decision", "route_on": "{{ nodes.classify.output.kind }}"},
        {"id": "left", "role": "linear", "kind": "agent", "agent": "writer", "instruction": "A"},
        {"id": "right", "role": "linear", "kind": "tool", "tool": "create_artifact",
         "arguments": {"id": "r", "title": "T", "content": "{{ nodes.classify.output }}"}},
        {"id": "done", "role": "exit"},
    ],
    "edges": [
        {"from": "start", "to": "classify"},
        {"from": "classify", "to": "route"},
        {"from": "route", "to": "left", "label": "a"},
        {"from": "route", "to": "right", "label": "b"},
        {"from": "left", "to": "done"},
        {"from": "right", "to": "done"},
    ],
}


def write(tmp_path: Path, data: dict[str, Any] | str, name: str = "sample.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def issues_of(tmp_path: Path, data: dict[str, Any]) -> list[Any]:
    spec = load_workflow_file(write(tmp_path, data))
    return validate_workflow(spec, agents=AGENTS, tools=TOOLS)[0]


def mutated(change) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    change(data)
    return data


def node(data: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in data["nodes"] if n["id"] == node_id)


def one(issues: list[Any], node_id: str | None, *words: str) -> Any:
    """The single issue about `node_id` whose message contains every word."""
    found = [i for i in issues if i.node == node_id and all(w in i.message for w in words)]
    assert len(found) == 1, [str(i) for i in issues]
    assert found[0].fix and found[0].file.endswith("sample.yaml")
    return found[0]


def test_base_and_shipped_examples_are_valid(tmp_path):
    assert issues_of(tmp_path, BASE) == []
    registry_agents = {p.stem for p in (CONFIG / "agents").glob("*.md")}
    for path in sorted((CONFIG / "workflows").glob("*.yaml")):
        spec = load_workflow_file(path)
        issues, _ = validate_workflow(spec, agents=registry_agents, tools=TOOLS)
        assert issues == [], [str(i) for i in issues]
    assert {p.stem for p in (CONFIG / "workflows").glob("*.yaml")} == {"research", "triage"}


def test_parse_errors_name_file_field_and_fix(tmp_path):
    with pytest.raises(WorkflowValidationError) as bad_yaml:
        load_workflow_file(write(tmp_path, "nodes: [\n"))
    assert "invalid YAML" in str(bad_yaml.value) and "sample.yaml" in str(bad_yaml.value)
    data = mutated(lambda d: node(d, "left").update(rol="linear", colour="red"))
    with pytest.raises(WorkflowValidationError) as extra:
        load_workflow_file(write(tmp_path, data))
    messages = [(i.node, i.message) for i in extra.value.issues]
    assert ("left", "field 'colour': Extra inputs are not permitted") in messages
    assert all(i.fix for i in extra.value.issues)
    data = mutated(lambda d: node(d, "left").update(role="middle"))
    with pytest.raises(WorkflowValidationError) as role:
        load_workflow_file(write(tmp_path, data))
    assert role.value.issues[0].node == "left" and "role" in role.value.issues[0].message
    data = mutated(lambda d: d["edges"][2].update(label=True))
    with pytest.raises(WorkflowValidationError) as boolean:
        load_workflow_file(write(tmp_path, data))
    assert "quote it" in str(boolean.value)


def test_exactly_one_start_and_an_exit(tmp_path):
    issues = issues_of(tmp_path, mutated(lambda d: node(d, "start").update(role="linear", kind="agent",
                                                                          agent="writer", instruction="x")))
    one(issues, None, "exactly one start node (found 0)")
    def two_starts(d):
        d["nodes"].append({"id": "start2", "role": "start"})
        d["edges"].append({"from": "start2", "to": "classify"})
    one(issues_of(tmp_path, mutated(two_starts)), None, "exactly one start node (found 2: start, start2)")
    issues = issues_of(tmp_path, mutated(lambda d: node(d, "done").update(role="linear", kind="agent",
                                                                         agent="writer", instruction="x")))
    one(issues, None, "at least one exit")
    one(issues, "done", "a path ends here")


def test_reachability_dead_ends_and_exit_edges(tmp_path):
    def orphan(d):
        d["nodes"].append({"id": "lost", "role": "linear", "kind": "agent", "agent": "writer",
                           "instruction": "x"})
        d["edges"].append({"from": "lost", "to": "done"})
    assert one(issues_of(tmp_path, mutated(orphan)), "lost", "cannot be reached").fix == "add an edge to it, or remove it"
    def dead_end(d):
        d["edges"] = [e for e in d["edges"] if e["from"] != "left"]
    one(issues_of(tmp_path, mutated(dead_end)), "left", "without reaching an exit")
    def exit_out(d):
        d["edges"].append({"from": "done", "to": "left"})
    issues = issues_of(tmp_path, mutated(exit_out))
    one(issues, "done", "outgoing edges")
    one(issues, "done", "cycle: left -> done -> left", "edge done -> left")


def test_edges_to_unknown_nodes_and_duplicates(tmp_path):
    issues = issues_of(tmp_path, mutated(lambda d: d["edges"].append({"from": "left", "to": "nowhere"})))
    issue = one(issues, "left", "unknown node 'nowhere'")
    assert "classify" in issue.fix
    issues = issues_of(tmp_path, mutated(lambda d: node(d, "left").update(id="left2")))
    assert any("unknown node 'left'" in i.message for i in issues)
    dup = mutated(lambda d: d["nodes"].append({"id": "left", "role": "exit"}))
    one(issues_of(tmp_path, dup), "left", "more than one node")


def test_decision_edges_labelled_and_matching_choices(tmp_path):
    issues = issues_of(tmp_path, mutated(lambda d: d["edges"][2].pop("label")))
    one(issues, "route", "has no label")
    one(issues, "route", "choice(s) a of", "have no edge")
    issues = issues_of(tmp_path, mutated(lambda d: d["edges"][3].update(label="c")))
    one(issues, "route", "label(s) c can never be chosen")
    one(issues, "route", "choice(s) b")
    issues = issues_of(tmp_path, mutated(lambda d: d["edges"][3].update(label="a")))
    one(issues, "route", "label 'a' is used by more than one edge")
    issues = issues_of(tmp_path, mutated(lambda d: d["edges"][0].update(label="go")))
    one(issues, "start", "has a label but 'start' is not a decision")
    issues = issues_of(tmp_path, mutated(lambda d: node(d, "route").pop("route_on")))
    one(issues, "route", "needs kind: agent")
    def both(d):
        node(d, "route").update(kind="agent", agent="writer", instruction="pick")
    one(issues_of(tmp_path, mutated(both)), "route", "not both")


def test_unknown_agents_and_tools(tmp_path):
    issue = one(issues_of(tmp_path, mutated(lambda d: node(d, "left").update(agent="ghost"))),
                "left", "unknown agent 'ghost'")
    assert "writer" in issue.fix and "config/agents" in issue.fix
    issue = one(issues_of(tmp_path, mutated(lambda d: node(d, "right").update(tool="rm_rf"))),
                "right", "unknown tool 'rm_rf'")
    assert "create_artifact" in issue.fix
    one(issues_of(tmp_path, mutated(lambda d: node(d, "right").update(tool="call_subagent"))),
        "right", "cannot be a workflow step")
    def bad_args(d):
        node(d, "right")["arguments"] = {"id": "r", "titel": "x", "content": "c"}
    issues = issues_of(tmp_path, mutated(bad_args))
    one(issues, "right", "has no argument 'titel'")
    one(issues, "right", "needs argument 'title'")
    issues = issues_of(tmp_path, mutated(lambda d: node(d, "left").pop("instruction")))
    one(issues, "left", "needs an instruction")
    issues = issues_of(tmp_path, mutated(lambda d: node(d, "left").update(kind="tool")))
    one(issues, "left", "field 'agent' does not apply")
    one(issues, "left", "kind: tool needs tool")


def test_template_references(tmp_path):
    def ref(text):
        return mutated(lambda d: node(d, "left").update(instruction=text))
    one(issues_of(tmp_path, ref("{{ nodes.ghost.output }}")), "left", "unknown node 'ghost'")
    issue = one(issues_of(tmp_path, ref("{{ nodes.classify.output.colour }}")), "left", "has no field 'colour'")
    assert "declared" in issue.message
    one(issues_of(tmp_path, ref("{{ input.title }}")), "left", "the workflow input has no field 'title'")
    issue = one(issues_of(tmp_path, ref("{{ nodes.right.output }}")), "left", "does not run before 'left'")
    assert "every path" in issue.fix
    one(issues_of(tmp_path, ref("{{ item }}")), "left", "'item' exists only inside a split")
    one(issues_of(tmp_path, ref("{{ results }}")), "left", "'results' exists only in a merge")
    one(issues_of(tmp_path, ref("{{ secrets.key }}")), "left", "unknown root 'secrets'")
    one(issues_of(tmp_path, ref("{{ nodes.classify }}")), "left", "nodes.<id>.output")
    one(issues_of(tmp_path, ref("{{ 1 + 2 }}")), "left", "is not a reference")
    one(issues_of(tmp_path, ref("{{ nodes.left.output }}")), "left", "its own output")
    assert issues_of(tmp_path, ref("{{ nodes.classify.output.kind }} {{ iteration }} {{ input.topic }}")) == []


def split_workflow() -> dict[str, Any]:
    return {
        "name": "sample",
        "nodes": [
            {"id": "start", "role": "start"},
            {"id": "plan", "role": "linear", "kind": "agent", "agent": "planner", "instruction": "p",
             "output_schema": {"type": "object", "properties": {"qs": {"type": "array"}}}},
            {"id": "fan", "role": "split", "over": "{{ nodes.plan.output.qs }}"},
            {"id": "work", "role": "linear", "kind": "agent", "agent": "writer", "instruction": "{{ item }}"},
            {"id": "join", "role": "merge", "strategy": "list"},
            {"id": "check", "role": "decision", "kind": "agent", "agent": "writer",
             "instruction": "{{ nodes.join.output }}", "fallback": "ok"},
            {"id": "done", "role": "exit", "output": "{{ nodes.join.output }}"},
        ],
        "edges": [
            {"from": "start", "to": "plan"}, {"from": "plan", "to": "fan"},
            {"from": "fan", "to": "work"}, {"from": "work", "to": "join"},
            {"from": "join", "to": "check"},
            {"from": "check", "to": "plan", "label": "again", "max_iterations": 2},
            {"from": "check", "to": "done", "label": "ok"},
        ],
    }


def test_scopes_loops_and_per_item_values(tmp_path):
    assert issues_of(tmp_path, split_workflow()) == []
    data = split_workflow()
    node(data, "done")["output"] = "{{ nodes.work.output }}"
    issue = one(issues_of(tmp_path, data), "done", "runs once per item")
    assert "nodes.join.output" in issue.fix
    data = split_workflow()
    data["edges"][5].pop("max_iterations")
    issue = one(issues_of(tmp_path, data), "check", "cycle: plan -> fan -> work -> join -> check -> plan")
    assert "max_iterations" in issue.fix
    data = split_workflow()
    data["edges"][5]["to"] = "done"
    data["edges"][5]["label"] = "again"
    one(issues_of(tmp_path, data), "check", "does not go back")
    data = split_workflow()
    node(data, "check")["fallback"] = "again"
    one(issues_of(tmp_path, data), "check", "fallback 'again' is not the label of a forward edge")
    data = split_workflow()
    data["edges"][3] = {"from": "work", "to": "check"}
    data["edges"][4] = {"from": "join", "to": "done"}
    issues = issues_of(tmp_path, data)
    one(issues, "fan", "reaches a decision node ('check') instead of a merge")
    data = split_workflow()
    node(data, "join")["strategy"] = "first"
    one(issues_of(tmp_path, data), "join", "strategy first is for branches")
    data = split_workflow()
    node(data, "fan").pop("over")
    one(issues_of(tmp_path, data), "fan", "needs over")
    data = split_workflow()
    node(data, "fan").update(kind="agent")
    one(issues_of(tmp_path, data), "fan", "does not run an agent or tool")
    data = split_workflow()
    node(data, "plan")["output_schema"] = {"type": "objekt"}
    one(issues_of(tmp_path, data), "plan", "not a valid JSON Schema")
    data = split_workflow()
    data["edges"].append({"from": "plan", "to": "join"})
    issues = issues_of(tmp_path, data)
    one(issues, "join", "incoming edges from outside the split 'fan': plan")


def test_branch_rules(tmp_path):
    data = {
        "name": "sample",
        "nodes": [
            {"id": "start", "role": "start"},
            {"id": "race", "role": "branch"},
            {"id": "fast", "role": "linear", "kind": "agent", "agent": "writer", "instruction": "{{ index }}"},
            {"id": "slow", "role": "linear", "kind": "agent", "agent": "writer", "instruction": "s"},
            {"id": "first", "role": "merge", "strategy": "list"},
            {"id": "done", "role": "exit"},
        ],
        "edges": [
            {"from": "start", "to": "race"}, {"from": "race", "to": "fast"},
            {"from": "race", "to": "slow"}, {"from": "fast", "to": "first"},
            {"from": "slow", "to": "first"}, {"from": "first", "to": "done"},
        ],
    }
    one(issues_of(tmp_path, data), "first", "keeps the first successful path")
    node(data, "first")["strategy"] = "first"
    assert issues_of(tmp_path, data) == []
    node(data, "fast")["instruction"] = "{{ item }}"
    one(issues_of(tmp_path, data), "fast", "'item' exists only inside a split")


def test_check_workflow_raises_with_every_problem(tmp_path):
    data = mutated(lambda d: (node(d, "left").update(agent="ghost"), node(d, "right").update(tool="nope")))
    spec = load_workflow_file(write(tmp_path, data))
    with pytest.raises(WorkflowValidationError) as info:
        check_workflow(spec, agents=AGENTS, tools=TOOLS)
    text = str(info.value)
    assert "2 problems" in text and "node 'left'" in text and "node 'right'" in text and "Fix:" in text


def test_mermaid_shapes_scopes_and_loops(tmp_path):
    spec = load_workflow_file(write(tmp_path, split_workflow()))
    chart = to_mermaid(spec)
    assert chart.startswith("flowchart TD\n")
    assert 'n_start(["start<br/><small>start</small>"])' in chart
    assert 'n_check{"check<br/><small>agent writer</small>"}' in chart
    assert 'n_fan{{"fan<br/><small>split</small>"}}' in chart
    assert 'subgraph n_fan_scope["fan: per item"]\n        n_work[' in chart
    assert 'n_check -. "again, max 2" .-> n_plan' in chart
    assert 'n_check -- "ok" --> n_done' in chart
    base = to_mermaid(load_workflow_file(write(tmp_path, BASE)))
    assert 'n_right[["right<br/><small>tool create_artifact</small>"]]' in base
