"""Template references: what each `{{ … }}` may name, and what a node's output looks like.

A reference is valid when its root exists where it is used (`item` only inside a split,
`results` only in an agent merge, …), the node it names has certainly run before (a dominator
in the forward graph, or an earlier node of the same split/branch path), and each field after
`output` is declared by that node's output schema (when it declares any).
"""

from __future__ import annotations

from typing import Any

from ..shapes import JsonObject  # JSON Schema
from .schemas import choice_schema, follow
from .spec import NodeSpec
from .templates import ROOTS, references
from .topology import Topology


def output_schema(node: NodeSpec, topo: Topology) -> JsonObject | None:
    """What a node's output looks like, as far as the file says."""
    if node.role == "start":
        return topo.spec.input
    if node.role == "decision" and node.kind == "agent":
        return choice_schema([e.label for e in topo.out_edges.get(node.id, []) if e.label])
    if node.role == "split":
        return {"type": "array"}
    if node.role == "merge":
        strategy = node.strategy or ("first" if _opener_kind(node, topo) == "branch" else "list")
        if strategy == "list":
            return {"type": "array"}
        if strategy == "concatenate":
            return {"type": "string"}
        if strategy == "agent":
            return node.output_schema
        return None
    return node.output_schema


def _opener_kind(node: NodeSpec, topo: Topology) -> str | None:
    for scope in topo.scopes.values():
        if scope.merge == node.id:
            return scope.kind
    return None


def template_fields(node: NodeSpec) -> list[tuple[str, Any]]:
    fields = [("instruction", node.instruction), ("arguments", node.arguments),
              ("over", node.over), ("route_on", node.route_on), ("output", node.output)]
    return [(name, value) for name, value in fields if value is not None]


def reference_problems(node: NodeSpec, topo: Topology) -> list[tuple[str, str]]:
    """(message, fix) for every template reference of `node` that cannot be resolved."""
    out = []
    for field_name, value in template_fields(node):
        for raw, path in references(value):
            if path is None:
                out.append((f"{field_name}: '{{{{ {raw} }}}}' is not a reference",
                            "write a dotted path such as {{ input.topic }} or {{ nodes.plan.output }}"))
                continue
            problem = _reference_problem(path, node, field_name, topo)
            if problem:
                out.append((f"{field_name}: {{{{ {raw} }}}}: {problem[0]}", problem[1]))
    return out


def _reference_problem(path: tuple[str, ...], node: NodeSpec, field_name: str, topo: Topology) -> tuple[str, str] | None:
    root = path[0]
    if root not in ROOTS:
        return (f"unknown root '{root}'", f"start the reference with one of: {', '.join(ROOTS)}")
    in_split = topo.scopes.get(topo.scope_of.get(node.id, ""), None)
    if root in ("item", "index"):
        if in_split is None or (root == "item" and in_split.kind != "split"):
            where = "a split" if root == "item" else "a split or branch"
            return (f"'{root}' exists only inside {where}", "reference it from a node between the split and its merge")
        return None
    if root == "results":
        if not (node.role == "merge" and node.strategy == "agent"):
            return ("'results' exists only in a merge with strategy agent",
                    "reference the merge's output instead: {{ nodes.<merge id>.output }}")
        return None
    if root == "output":
        if not (node.role == "decision" and node.kind == "tool" and field_name == "route_on"):
            return ("'output' (this node's own output) is only available to route_on of a tool decision",
                    "reference an earlier node: {{ nodes.<id>.output }}")
        return _schema_field(node.output_schema, path[1:], "this node's output")
    if root == "iteration":
        return None if len(path) == 1 else ("iteration is a number", "use {{ iteration }}")
    if root == "input":
        return _schema_field(topo.spec.input, path[1:], "the workflow input")
    # nodes.<id>.output...
    if len(path) < 3 or path[2] != "output":
        return ("node references look like nodes.<id>.output[.field]", "add .output after the node id")
    target = path[1]
    if target not in topo.nodes:
        return (f"unknown node '{target}'", f"use one of: {', '.join(sorted(topo.nodes))}")
    if target == node.id:
        return ("a node cannot reference its own output", "reference an earlier node")
    problem = _availability(target, node, topo)
    if problem:
        return problem
    return _schema_field(output_schema(topo.nodes[target], topo), path[3:], f"the output of '{target}'")


def _availability(target: str, node: NodeSpec, topo: Topology) -> tuple[str, str] | None:
    target_scope = topo.scope_of.get(target)
    if target_scope is not None:
        if target in topo.chain_before(node.id):
            return None
        merge = topo.scopes[target_scope].merge
        return (f"'{target}' runs once per item or path of '{target_scope}'; its value is not "
                "available here", f"reference the merge instead: {{{{ nodes.{merge}.output }}}}")
    if topo.nodes[target].role == "exit":
        return ("an exit node has no output to reference", "reference the node before it")
    anchor = topo.scope_of.get(node.id, node.id)
    if target not in topo.dominators.get(anchor, set()):
        return (f"'{target}' does not run before '{node.id}' on every path, so its output may be missing",
                "reference a node that runs on every path to this one (e.g. one before the decision)")
    return None


def _schema_field(schema: JsonObject | None, path: tuple[str, ...], what: str) -> tuple[str, str] | None:
    if not path:
        return None
    _, error = follow(schema, path)
    if error:
        return (error.replace("the output", what, 1), "use a declared field, or add it to the schema")
    return None


def value_schema(path: tuple[str, ...], node: NodeSpec, topo: Topology) -> JsonObject | None:
    if path[0] == "input":
        return follow(topo.spec.input, path[1:])[0]
    if path[0] == "output":
        return follow(node.output_schema, path[1:])[0]
    if path[0] == "nodes" and len(path) >= 3 and path[1] in topo.nodes:
        return follow(output_schema(topo.nodes[path[1]], topo), path[3:])[0]
    return None
