"""Validation before anything runs: every problem in a workflow, each with the file, the node
and the fix.

Checked: exactly one start and at least one exit; unique ids and edges between known nodes;
every node reachable and every path ending in an exit; the edge rules of each role (decision
edges labelled, unique, matching the choices; loops only as decision edges with
`max_iterations`, everything else acyclic); which fields each role and kind takes; agents and
tools that exist; schemas that are valid JSON Schema; split/branch scopes that end in one merge;
and every template reference: a known root, a node that has certainly run before (a dominator
in the forward graph), a field its output schema declares, and per-item values only inside
their scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .errors import WorkflowIssue, WorkflowValidationError
from .references import reference_problems, value_schema
from .schemas import enum_of, schema_problem
from .spec import NodeSpec, WorkflowSpec
from .state import RESERVED_IDS
from .templates import references
from .topology import Topology, analyse

# Fields each role/kind may use (beyond id, role, description, on_failure).
_KIND_FIELDS = {"agent": {"agent", "instruction", "output_schema", "memory_profile"},
                "tool": {"tool", "arguments", "output_schema"},
                "group": {"agents", "mode", "moderator", "max_turns", "instruction"}}
_ROLE_FIELDS = {
    "start": set(),
    "linear": set(),
    "decision": {"route_on", "fallback"},
    "split": {"over"},
    "branch": set(),
    "merge": {"strategy", "separator"},
    "exit": {"output"},
}
_BASE = {"id", "role", "description", "on_failure", "kind"}
NOT_TOOL_STEPS = {"call_subagent", "handoff"}


class _Issues(list[WorkflowIssue]):
    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def add(self, node: str | None, message: str, fix: str) -> None:
        self.append(WorkflowIssue(self.source, node, message, fix))


def validate_workflow(
    spec: WorkflowSpec, *, agents: Iterable[str] | Mapping[str, Any],
    tools: Iterable[str] | Mapping[str, Any],
) -> tuple[list[WorkflowIssue], Topology]:
    """Every problem found (empty when the workflow is valid) and the graph's topology.

    `agents` are names, or a mapping of names to `AgentSpec`s (then group members' handoffs
    are checked too); `tools` are names, or a mapping of names to argument JSON Schemas (then
    tool steps' argument names are checked too)."""
    issues = _Issues(spec.source or f"workflow '{spec.name}'")
    agent_names, tool_names = set(agents), set(tools)
    tool_schemas = tools if isinstance(tools, Mapping) else {}
    _check_ids_and_edges(spec, issues)
    topo = analyse(spec)
    _check_start_exit(spec, topo, issues)
    _check_shape(topo, issues)
    for node in spec.nodes:
        _check_fields(node, issues, agent_names, tool_names)
        if node.kind == "group":
            _check_group(node, issues, agents if isinstance(agents, Mapping) else {}, agent_names)
        if node.kind == "tool" and node.tool is not None and node.tool in tool_schemas:
            _check_arguments(node, tool_schemas[node.tool], issues)
    _check_schemas(spec, issues)
    _check_decisions(topo, issues)
    _check_scopes(topo, issues)
    if topo.cycle is None and topo.start is not None:
        for node in spec.nodes:
            if node.id in topo.reachable:
                _check_templates(node, topo, issues)
    return list(issues), topo


def check_workflow(
    spec: WorkflowSpec, *, agents: Iterable[str] | Mapping[str, Any],
    tools: Iterable[str] | Mapping[str, Any],
) -> Topology:
    """Validate and return the topology; raise `WorkflowValidationError` listing every problem."""
    issues, topo = validate_workflow(spec, agents=agents, tools=tools)
    if issues:
        raise WorkflowValidationError(issues)
    return topo


# --- structure -----------------------------------------------------------------------------


def _check_ids_and_edges(spec: WorkflowSpec, issues: _Issues) -> None:
    seen: set[str] = set()
    for node in spec.nodes:
        if node.id in RESERVED_IDS or node.id.startswith("wf_"):
            issues.add(node.id, "this id is reserved for the workflow's own state", "rename the node")
        if node.id in seen:
            issues.add(node.id, "this id is used by more than one node", "give each node its own id")
        seen.add(node.id)
    pairs: set[tuple[str, str, str | None]] = set()
    for edge in spec.edges:
        for end, name in ((edge.source, "from"), (edge.target, "to")):
            if end not in seen:
                issues.add(edge.source if name == "to" else None,
                           f"edge {edge.source} -> {edge.target}: '{name}' names an unknown node '{end}'",
                           f"use one of: {', '.join(sorted(seen))}")
        key = (edge.source, edge.target, edge.label)
        if key in pairs:
            issues.add(edge.source, f"edge {edge.source} -> {edge.target} is declared twice",
                       "remove the duplicate edge")
        pairs.add(key)


def _check_start_exit(spec: WorkflowSpec, topo: Topology, issues: _Issues) -> None:
    starts = [n.id for n in spec.nodes if n.role == "start"]
    if len(starts) != 1:
        issues.add(None, f"a workflow needs exactly one start node (found {len(starts)}"
                   + (f": {', '.join(starts)})" if starts else ")"),
                   "keep one node with role: start" if starts else "add a node with role: start")
    if not any(n.role == "exit" for n in spec.nodes):
        issues.add(None, "a workflow needs at least one exit node", "add a node with role: exit")
    for edge in spec.edges:
        if edge.target in starts:
            issues.add(edge.target, f"the start node has an incoming edge from '{edge.source}'",
                       "loop back to the node after start instead")


def _check_shape(topo: Topology, issues: _Issues) -> None:
    if topo.cycle is not None:
        back = f"{topo.cycle[-2]} -> {topo.cycle[-1]}"
        issues.add(topo.cycle[-2], f"the graph has a cycle: {' -> '.join(topo.cycle)} (edge {back} "
                   "goes back without max_iterations)",
                   f"give edge {back} max_iterations (only a decision edge may go back to an "
                   "earlier node), or remove it")
    if topo.start is not None:
        for node in topo.spec.nodes:
            if node.id not in topo.reachable:
                issues.add(node.id, "this node cannot be reached from the start node",
                           "add an edge to it, or remove it")
    for node in topo.spec.nodes:
        forward = topo.forward(node.id)
        outgoing = topo.out_edges.get(node.id, [])
        if node.role == "exit":
            if outgoing:
                issues.add(node.id, "an exit node has outgoing edges", "remove them: exit ends the run")
            continue
        if not forward:
            issues.add(node.id, "a path ends here without reaching an exit",
                       "add an edge from this node towards an exit node")
        if node.role in ("start", "linear", "merge", "split") and len(outgoing) > 1:
            issues.add(node.id, f"a {node.role} node must have exactly one outgoing edge "
                       f"(it has {len(outgoing)})",
                       "use a decision to choose between paths, or a branch to run them all")
        if node.role == "branch" and len(forward) < 2:
            issues.add(node.id, "a branch needs at least two outgoing paths",
                       "add another path, or use a linear node")
    for edge in topo.loop_edges:
        src = topo.nodes.get(edge.source)
        if src is not None and src.role != "decision":
            issues.add(edge.source, f"edge {edge.source} -> {edge.target} has max_iterations but "
                       f"'{edge.source}' is a {src.role} node",
                       "only decision edges may loop back; route the loop through a decision")
        elif edge.target in topo.nodes and topo.dominators and edge.target not in topo.dominators.get(edge.source, set()):
            issues.add(edge.source, f"edge {edge.source} -> {edge.target} has max_iterations but does "
                       "not go back to a node that always runs before it",
                       "remove max_iterations, or point the edge at an earlier node")
        if edge.target in topo.scope_of or edge.source in topo.scope_of:
            issues.add(edge.source, f"loop {edge.source} -> {edge.target} enters or leaves a split/branch",
                       "loop back to a node outside the split or branch")


# --- fields, agents and tools ----------------------------------------------------------------


def _check_fields(node: NodeSpec, issues: _Issues, agents: set[str], tools: set[str]) -> None:
    given = {k for k in node.model_fields_set if getattr(node, k) is not None}
    if node.role in ("start", "exit", "split", "branch") and node.kind:
        issues.add(node.id, f"a {node.role} node does not run an agent or tool (kind: {node.kind})",
                   f"remove kind, and put the step in a linear node {'after' if node.role != 'exit' else 'before'} it")
    if node.role == "linear" and not node.kind:
        issues.add(node.id, "a linear node needs kind: agent or kind: tool", "add kind and agent/tool")
    if node.role == "decision":
        if node.kind == "agent" and node.route_on:
            issues.add(node.id, "a decision either lets its agent choose or routes on a value, not both",
                       "remove route_on (the agent chooses) or kind: agent")
        if node.kind != "agent" and not node.route_on:
            issues.add(node.id, "a decision needs kind: agent (the agent chooses a label) or route_on",
                       "add route_on: \"{{ nodes.<id>.output.<field> }}\" or an agent")
        if node.kind == "agent" and node.output_schema is not None:
            issues.add(node.id, "a deciding agent answers with a choice; output_schema is not used",
                       "remove output_schema")
    if node.role == "merge":
        strategy = node.strategy
        if strategy == "agent" and node.kind != "agent":
            issues.add(node.id, "strategy: agent needs kind: agent with agent and instruction",
                       "add kind: agent, agent: and instruction: (it may use {{ results }})")
        if node.kind and strategy != "agent":
            issues.add(node.id, f"a merge with strategy {strategy or 'default'} runs no agent",
                       "set strategy: agent, or remove kind")
    if node.role == "split" and not node.over:
        issues.add(node.id, "a split needs over: the list to fan out over",
                   "add over: \"{{ nodes.<id>.output.<list field> }}\"")
    allowed = set(_BASE) | _ROLE_FIELDS[node.role]
    if node.kind:
        allowed |= _KIND_FIELDS[node.kind]
    for name in sorted(given - allowed):
        issues.add(node.id, f"field '{name}' does not apply to a {node.role} node"
                   + (f" of kind {node.kind}" if node.kind else ""), "remove it")
    if node.kind == "agent":
        if not node.agent:
            issues.add(node.id, "kind: agent needs agent: the name of an agent file", "add agent:")
        elif node.agent not in agents:
            issues.add(node.id, f"unknown agent '{node.agent}'",
                       f"use one of: {', '.join(sorted(agents)) or 'none'} (files in config/agents/)")
        if not node.instruction:
            issues.add(node.id, "kind: agent needs an instruction", "add instruction:")
    if node.kind == "tool":
        if not node.tool:
            issues.add(node.id, "kind: tool needs tool: the name of a tool", "add tool:")
        elif node.tool in NOT_TOOL_STEPS:
            issues.add(node.id, f"'{node.tool}' cannot be a workflow step", "use an agent node")
        elif node.tool not in tools:
            issues.add(node.id, f"unknown tool '{node.tool}'",
                       f"use one of: {', '.join(sorted(tools - NOT_TOOL_STEPS))}")


def _check_group(node: NodeSpec, issues: _Issues, specs: Mapping[str, Any], names: set[str]) -> None:
    if node.role != "linear":
        issues.add(node.id, f"a group runs as a step: it must be a linear node, not {node.role}",
                   "use role: linear (put a decision after it to route on its outcome)")
    members = list(node.agents or ())
    if not members:
        issues.add(node.id, "kind: group needs agents: the members, in speaking order", "add agents: [a, b]")
    for name in dict.fromkeys(members):
        if name not in names:
            issues.add(node.id, f"unknown agent '{name}' in agents",
                       f"use one of: {', '.join(sorted(names)) or 'none'} (files in config/agents/)")
    if not node.instruction:
        issues.add(node.id, "kind: group needs an instruction (what the group works on)", "add instruction:")
    mode = node.mode or "handoff"
    if mode == "moderator":
        if not node.moderator:
            issues.add(node.id, "mode: moderator needs moderator: the agent that picks the next speaker",
                       "add moderator:")
        elif node.moderator not in names:
            issues.add(node.id, f"unknown moderator '{node.moderator}'", f"use one of: {', '.join(sorted(names))}")
    elif node.moderator:
        issues.add(node.id, f"moderator is only used in mode: moderator (this group uses {mode})",
                   "remove moderator, or set mode: moderator")
    if mode in ("order", "moderator") and len(set(members)) < 2:
        issues.add(node.id, f"mode {mode} needs at least two different agents", "add members")
    for name in dict.fromkeys(members):
        agent = specs.get(name)
        if agent is None or not agent.handoffs:
            continue
        if "handoff" not in agent.tools:
            issues.add(node.id, f"'{name}' declares handoffs but cannot call the handoff tool",
                       f"add handoff to tools: in {agent.source or name}")
        for target in agent.handoffs:  # targets outside this group are simply not offered here
            if target not in names:
                issues.add(node.id, f"'{name}' may hand over to '{target}', which is not an agent",
                           f"fix handoffs: in {agent.source or name}")


def _check_arguments(node: NodeSpec, schema: Any, issues: _Issues) -> None:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return
    given = set(node.arguments or {})
    for name in sorted(given - set(props)):
        issues.add(node.id, f"tool '{node.tool}' has no argument '{name}'",
                   f"use its arguments: {', '.join(props)}")
    for name in schema.get("required") or []:
        if name not in given:
            issues.add(node.id, f"tool '{node.tool}' needs argument '{name}'",
                       f"add {name}: to arguments")


def _check_schemas(spec: WorkflowSpec, issues: _Issues) -> None:
    problem = schema_problem(spec.input)
    if problem:
        issues.add(None, f"field 'input': {problem}", "write a JSON Schema, e.g. {type: object}")
    for node in spec.nodes:
        if node.output_schema is not None:
            problem = schema_problem(node.output_schema)
            if problem:
                issues.add(node.id, f"field 'output_schema': {problem}", "write a valid JSON Schema")


def _check_decisions(topo: Topology, issues: _Issues) -> None:
    for node in topo.spec.nodes:
        edges = topo.out_edges.get(node.id, [])
        if node.role != "decision":
            for edge in edges:
                if edge.label is not None:
                    issues.add(node.id, f"edge {edge.source} -> {edge.target} has a label but "
                               f"'{node.id}' is not a decision", "remove the label")
            continue
        labels = [e.label for e in edges]
        for edge in edges:
            if edge.label is None:
                issues.add(node.id, f"decision edge {edge.source} -> {edge.target} has no label",
                           "label every edge of a decision with the choice that selects it")
        named = [x for x in labels if x is not None]
        for label in sorted({x for x in named if named.count(x) > 1}):
            issues.add(node.id, f"label '{label}' is used by more than one edge", "make labels unique")
        if len(edges) < 2:
            issues.add(node.id, "a decision needs at least two labelled edges",
                       "add another choice, or use a linear node")
        loops = [e for e in edges if e.max_iterations is not None]
        if node.fallback is not None:
            forward = [e.label for e in edges if e.max_iterations is None]
            if node.fallback not in forward:
                issues.add(node.id, f"fallback '{node.fallback}' is not the label of a forward edge",
                           f"use one of: {', '.join(str(x) for x in forward)}")
            if not loops:
                issues.add(node.id, "fallback is only used when a loop edge is exhausted, and "
                           "this decision has none", "remove fallback")
        if node.route_on and topo.cycle is None:
            enum = _route_enum(node, topo)
            if enum is not None:
                missing = [v for v in enum if v not in named]
                extra = [x for x in named if x not in enum]
                if missing:
                    issues.add(node.id, f"choice(s) {', '.join(missing)} of {node.route_on} have no edge",
                               "add an edge labelled with each value the output schema allows")
                if extra:
                    issues.add(node.id, f"label(s) {', '.join(extra)} can never be chosen: "
                               f"{node.route_on} is one of {', '.join(enum)}",
                               "label edges with the values of the enum")


def _route_enum(node: NodeSpec, topo: Topology) -> list[str] | None:
    refs = references(node.route_on)
    if len(refs) != 1 or refs[0][1] is None:
        return None
    path = refs[0][1]
    schema = value_schema(path, node, topo)
    return enum_of(schema)


def _check_scopes(topo: Topology, issues: _Issues) -> None:
    for opener, scope in topo.scopes.items():
        if scope.problem:
            issues.add(opener, f"{scope.kind} scope: {scope.problem}",
                       f"lead every path of the {scope.kind} through linear nodes to one merge node")
            continue
        merge = topo.nodes[scope.merge] if scope.merge else None
        if merge is None:
            continue
        if scope.kind == "branch" and any(not chain for chain in scope.chains):
            issues.add(opener, "a branch path goes straight to the merge", "put at least one node on each path")
        for chain in scope.chains:
            for node_id in chain:
                incoming = [e for e in topo.in_edges.get(node_id, []) if e.max_iterations is None]
                if len(incoming) != 1:
                    issues.add(node_id, f"a node inside a {scope.kind} must have exactly one incoming edge",
                               f"only the {scope.kind} '{opener}' (or the node before on the path) may lead here")
        ends = {chain[-1] if chain else opener for chain in scope.chains}
        strangers = [e.source for e in topo.in_edges.get(merge.id, []) if e.source not in ends]
        if strangers:
            issues.add(merge.id, f"merge has incoming edges from outside the {scope.kind} "
                       f"'{opener}': {', '.join(strangers)}", "a merge joins the paths of one split or branch")
        strategy = merge.strategy
        if scope.kind == "branch" and strategy not in (None, "first"):
            issues.add(merge.id, f"the merge of branch '{opener}' keeps the first successful path; "
                       f"strategy {strategy} does not apply", "use strategy: first (or leave it out)")
        if scope.kind == "split" and strategy == "first":
            issues.add(merge.id, "strategy first is for branches; a split's merge waits for all items",
                       "use list, concatenate or agent")
    openers = {s.merge: o for o, s in topo.scopes.items() if s.merge}
    for node in topo.spec.nodes:
        if node.role == "merge" and node.id not in openers and node.id in topo.reachable:
            issues.add(node.id, "this merge does not close a split or branch",
                       "reach it from the paths of a split or branch, or make it a linear node")


def _check_templates(node: NodeSpec, topo: Topology, issues: _Issues) -> None:
    for message, fix in reference_problems(node, topo):
        issues.add(node.id, message, fix)
