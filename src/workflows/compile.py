"""Compile a validated workflow into a LangGraph `StateGraph`.

How each role maps onto LangGraph:

| role     | graph node does                         | edge after it                              |
|----------|-----------------------------------------|--------------------------------------------|
| start    | validates the input                     | plain edge                                 |
| linear   | one step (nested agent/tool graph)      | plain edge; inside a split/branch: `Send`  |
| decision | picks a label (agent choice / route_on) | conditional edges, one per label           |
| split    | evaluates `over`                        | one `Send` per item to the first item node |
| branch   | clones its input                        | one `Send` per path                        |
| merge    | joins `wf_groups` (reducer) by strategy | plain next node, or nothing while waiting  |
| exit     | sets the output (`graph_response`)      | `END`                                      |

Agent and tool steps run the chat graph's subagent step and shared tool node inside a nested
graph (see `step.py`), so CONFIRM tools pause a workflow exactly as they pause a chat run. The
graph is compiled with the controller's checkpointer and takes `RunContext` as runtime context.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from ..core.context import RunContext
from .nodes import WorkflowNode
from .references import template_fields
from .spec import WorkflowSpec
from .state import WorkflowState, WorkflowStep
from .templates import references
from .topology import Topology

# The routers take a `Mapping`, not `WorkflowState`: given a class, LangGraph would read their
# input by that schema instead of passing the node's own writes through (the task-local read
# each Send task's router relies on to see its own `wf_step`).


def _step(state: Mapping[str, Any]) -> WorkflowStep:
    return state.get("wf_step") or {}


def _label(state: Mapping[str, Any]) -> str:
    label = _step(state).get("label")
    assert label is not None  # a decision always writes the label it chose
    return label


def _dispatch(state: Mapping[str, Any]) -> Any:
    step = _step(state)
    sends = step.get("sends")
    if sends:
        return [Send(target, payload) for target, payload in sends]
    return step.get("goto") or END


def scope_refs(topo: Topology) -> dict[str, set[str]]:
    """Per split/branch: the top-level nodes whose outputs its item nodes' templates use (the
    only values copied into each `Send`)."""
    out: dict[str, set[str]] = {}
    for opener, scope in topo.scopes.items():
        refs: set[str] = set()
        for chain in scope.chains:
            for node_id in chain:
                for _, value in template_fields(topo.nodes[node_id]):
                    for _, path in references(value):
                        if path and path[0] == "nodes" and len(path) > 1 and path[1] not in topo.scope_of:
                            refs.add(path[1])
        out[opener] = refs
    return out


def compile_workflow(spec: WorkflowSpec, topo: Topology, checkpointer: Any = None) -> Any:
    builder = StateGraph(WorkflowState, context_schema=RunContext)
    refs = scope_refs(topo)
    for node in spec.nodes:
        builder.add_node(node.id, WorkflowNode(topo, node, refs))
    assert topo.start is not None
    builder.add_edge(START, topo.start)
    for node in spec.nodes:
        forward = topo.forward(node.id)
        if node.role == "exit":
            builder.add_edge(node.id, END)
        elif node.role == "decision":
            targets: dict[Hashable, str] = {
                e.label: e.target for e in topo.out_edges.get(node.id, []) if e.label
            }
            builder.add_conditional_edges(node.id, _label, targets)
        elif node.id in topo.scope_of or node.role in ("split", "branch", "merge"):
            destinations = sorted({e.target for e in forward} | {END})
            if node.role == "split":
                destinations = sorted({*destinations, topo.scopes[node.id].merge or END})
            builder.add_conditional_edges(node.id, _dispatch, destinations)
        else:
            builder.add_edge(node.id, forward[0].target)
    return builder.compile(checkpointer=checkpointer, name=f"workflow:{spec.name}")
