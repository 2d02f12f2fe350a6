"""A workflow as a Mermaid flowchart (`artifactflow workflow graph NAME`).

Shapes follow the role: start and exit are stadiums, decisions rhombi, split/branch/merge
hexagons, steps rectangles (agent) or subroutines (tool). The nodes between a split or branch
and its merge are drawn inside a subgraph box; loop edges are dotted and say their bound.
"""

from __future__ import annotations

import re

from .spec import NodeSpec, WorkflowSpec
from .topology import Topology, analyse

_UNSAFE = re.compile(r'["\[\]{}()<>|#;`]')


def _text(value: str) -> str:
    return _UNSAFE.sub(" ", value).strip() or "-"


def _mid(node_id: str) -> str:
    """Mermaid ids: keep them plain (ids like `end` are reserved words there)."""
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", node_id)


def _label(node: NodeSpec) -> str:
    detail = ""
    if node.kind == "agent":
        detail = f"agent {node.agent}"
    elif node.kind == "tool":
        detail = f"tool {node.tool}"
    elif node.role == "merge":
        detail = f"merge: {node.strategy or 'default'}"
    elif node.role in ("split", "branch", "decision", "start", "exit"):
        detail = node.role
    return f"{_text(node.id)}<br/><small>{_text(detail)}</small>" if detail else _text(node.id)


def _shape(node: NodeSpec) -> str:
    label = _label(node)
    mid = _mid(node.id)
    if node.role in ("start", "exit"):
        return f'{mid}(["{label}"])'
    if node.role == "decision":
        return f'{mid}{{"{label}"}}'
    if node.role in ("split", "branch", "merge"):
        return f'{mid}{{{{"{label}"}}}}'
    if node.kind == "tool":
        return f'{mid}[["{label}"]]'
    return f'{mid}["{label}"]'


def to_mermaid(spec: WorkflowSpec, topo: Topology | None = None) -> str:
    topo = topo or analyse(spec)
    lines = ["flowchart TD"]
    scoped = set(topo.scope_of)
    for node in spec.nodes:
        if node.id not in scoped:
            lines.append(f"    {_shape(node)}")
    for opener, scope in topo.scopes.items():
        members = [n for chain in scope.chains for n in chain]
        if not members:
            continue
        title = "per item" if scope.kind == "split" else "first path to succeed wins"
        lines.append(f'    subgraph {_mid(opener)}_scope["{_text(opener)}: {title}"]')
        for member in members:
            lines.append(f"        {_shape(topo.nodes[member])}")
        lines.append("    end")
    for edge in spec.edges:
        if edge.source not in topo.nodes or edge.target not in topo.nodes:
            continue
        src, dst = _mid(edge.source), _mid(edge.target)
        if edge.max_iterations is not None:
            text = f"{edge.label}, max {edge.max_iterations}" if edge.label else f"max {edge.max_iterations}"
            lines.append(f'    {src} -. "{_text(text)}" .-> {dst}')
        elif edge.label is not None:
            lines.append(f'    {src} -- "{_text(edge.label)}" --> {dst}')
        else:
            lines.append(f"    {src} --> {dst}")
    return "\n".join(lines) + "\n"
