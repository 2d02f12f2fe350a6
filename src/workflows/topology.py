"""The shape of a workflow graph, computed once and shared by validation, compilation and
Mermaid rendering.

- Loop edges are the edges that declare `max_iterations`; without them the graph must be a
  DAG (the *forward* graph), in which dominators say which nodes have certainly run before a
  node (the only outputs its templates may reference).
- Scopes: the nodes between a `split` or `branch` and its `merge` run once per item (split)
  or once per path (branch). A scope is a set of chains of `linear` nodes, one chain for a
  split, one per outgoing edge for a branch, all ending at the same merge.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from .spec import EdgeSpec, NodeSpec, WorkflowSpec


@dataclass
class Scope:
    """A split or branch, its chains of per-item / per-path nodes, and its merge."""

    opener: str
    kind: str  # "split" | "branch"
    chains: list[list[str]] = field(default_factory=list)
    merge: str | None = None
    problem: str | None = None  # why the scope is malformed (validation reports it)


@dataclass
class Topology:
    spec: WorkflowSpec
    nodes: dict[str, NodeSpec]
    out_edges: dict[str, list[EdgeSpec]]
    in_edges: dict[str, list[EdgeSpec]]
    loop_edges: list[EdgeSpec]
    order: list[str]  # topological order of the forward graph (reachable nodes first)
    cycle: list[str] | None  # a cycle of the forward graph, if any
    reachable: set[str]
    dominators: dict[str, set[str]]
    scopes: dict[str, Scope]  # opener id -> scope
    scope_of: dict[str, str]  # chain node id -> opener id
    chain_index: dict[str, int]  # chain node id -> which chain (branch path) it is on
    start: str | None

    def forward(self, node_id: str) -> list[EdgeSpec]:
        return [e for e in self.out_edges.get(node_id, []) if e.max_iterations is None]

    def chain_before(self, node_id: str) -> list[str]:
        """Nodes earlier on the same chain as `node_id` (within its scope)."""
        opener = self.scope_of.get(node_id)
        if opener is None:
            return []
        chain = self.scopes[opener].chains[self.chain_index[node_id]]
        return chain[: chain.index(node_id)]

    def next_in_chain(self, node_id: str) -> str | None:
        opener = self.scope_of[node_id]
        chain = self.scopes[opener].chains[self.chain_index[node_id]]
        at = chain.index(node_id)
        return chain[at + 1] if at + 1 < len(chain) else None


def analyse(spec: WorkflowSpec) -> Topology:
    nodes = {n.id: n for n in spec.nodes}
    out_edges: dict[str, list[EdgeSpec]] = defaultdict(list)
    in_edges: dict[str, list[EdgeSpec]] = defaultdict(list)
    for edge in spec.edges:
        if edge.source in nodes and edge.target in nodes:
            out_edges[edge.source].append(edge)
            in_edges[edge.target].append(edge)
    loops = [e for e in spec.edges if e.max_iterations is not None]
    starts = [n.id for n in spec.nodes if n.role == "start"]
    start = starts[0] if len(starts) == 1 else None
    reachable = _reach(start, out_edges) if start else set()
    order, cycle = _toposort(nodes, out_edges)
    if cycle is not None and start is not None:
        cycle = _from_nearest(cycle, start, out_edges)
    dominators = _dominators(start, order, in_edges, reachable) if start and cycle is None else {}
    topo = Topology(spec, nodes, dict(out_edges), dict(in_edges), loops, order, cycle, reachable,
                    dominators, {}, {}, {}, start)
    _scopes(topo)
    return topo


def _from_nearest(cycle: list[str], start: str, out_edges: dict[str, list[EdgeSpec]]) -> list[str]:
    """`cycle` (`a -> b -> a`) rotated to begin at its node nearest the start, so that its
    last edge is the one going back: the edge a user meant as a loop."""
    distance = {start: 0}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for edge in out_edges.get(node, []):
                if edge.target not in distance:
                    distance[edge.target] = distance[node] + 1
                    nxt.append(edge.target)
        frontier = nxt
    ring = cycle[:-1]
    first = min(range(len(ring)), key=lambda i: distance.get(ring[i], len(distance) + 1))
    rotated = ring[first:] + ring[:first]
    return [*rotated, rotated[0]]


def _reach(start: str, out_edges: dict[str, list[EdgeSpec]]) -> set[str]:
    seen = {start}
    stack = [start]
    while stack:
        for edge in out_edges.get(stack.pop(), []):
            if edge.target not in seen:
                seen.add(edge.target)
                stack.append(edge.target)
    return seen


def _toposort(
    nodes: dict[str, NodeSpec], out_edges: dict[str, list[EdgeSpec]]
) -> tuple[list[str], list[str] | None]:
    """Kahn's algorithm on the forward graph; on failure, one cycle to report."""
    indegree = dict.fromkeys(nodes, 0)
    for edges in out_edges.values():
        for e in edges:
            if e.max_iterations is None:
                indegree[e.target] += 1
    ready = [n for n in nodes if indegree[n] == 0]
    order: list[str] = []
    while ready:
        current = ready.pop(0)
        order.append(current)
        for e in out_edges.get(current, []):
            if e.max_iterations is None:
                indegree[e.target] -= 1
                if indegree[e.target] == 0:
                    ready.append(e.target)
    if len(order) == len(nodes):
        return order, None
    return order, _cycle_in([n for n in nodes if n not in order], out_edges)


def _cycle_in(left: list[str], out_edges: dict[str, list[EdgeSpec]]) -> list[str]:
    """One cycle among the nodes Kahn's algorithm could not order, as `a -> b -> a`.

    Walks *backwards*: each of those nodes kept an incoming forward edge from another of them
    (that is why it was left), so a predecessor always exists and the walk must repeat a node.
    Walking forwards may not: a node after the cycle can have no edge back into it."""
    remaining = set(left)
    before: dict[str, str] = {}
    for source in left:
        for edge in out_edges.get(source, []):
            if edge.max_iterations is None and edge.target in remaining:
                before.setdefault(edge.target, source)
    path = [left[0]]
    while path[-1] in before and before[path[-1]] not in path:
        path.append(before[path[-1]])
    if path[-1] not in before:  # unreachable by the argument above; never crash validation
        return [*reversed(path)]
    start = before[path[-1]]
    cycle = path[path.index(start):]
    cycle.reverse()
    return [*cycle, cycle[0]]


def _dominators(
    start: str, order: list[str], in_edges: dict[str, list[EdgeSpec]], reachable: set[str]
) -> dict[str, set[str]]:
    dom: dict[str, set[str]] = {}
    for node in order:
        if node not in reachable:
            continue
        if node == start:
            dom[node] = {node}
            continue
        preds = [e.source for e in in_edges.get(node, [])
                 if e.max_iterations is None and e.source in dom]
        common = set.intersection(*(dom[p] for p in preds)) if preds else set()
        dom[node] = common | {node}
    return dom


def _scopes(topo: Topology) -> None:
    for node in topo.spec.nodes:
        if node.role not in ("split", "branch"):
            continue
        scope = Scope(node.id, node.role)
        topo.scopes[node.id] = scope
        firsts = [e.target for e in topo.forward(node.id)]
        merges: set[str] = set()
        for index, first in enumerate(firsts):
            chain: list[str] = []
            current = first
            while current in topo.nodes and topo.nodes[current].role == "linear":
                if current in chain or current in topo.scope_of:
                    scope.problem = f"node '{current}' is on more than one path"
                    break
                chain.append(current)
                topo.scope_of[current] = node.id
                topo.chain_index[current] = index
                nxt = topo.forward(current)
                if len(nxt) != 1:
                    scope.problem = (
                        f"node '{current}' inside the {node.role} must have exactly one "
                        f"outgoing edge (it has {len(nxt)})"
                    )
                    break
                current = nxt[0].target
            if scope.problem:
                break
            end = topo.nodes.get(current)
            if end is None or end.role != "merge":
                what = f"a {end.role} node ('{current}')" if end is not None else "nothing"
                scope.problem = (
                    f"the path from '{node.id}' through {', '.join(chain) or 'no nodes'} "
                    f"reaches {what} instead of a merge"
                )
                break
            scope.chains.append(chain)
            merges.add(current)
        if not scope.problem:
            if len(merges) > 1:
                scope.problem = f"its paths end at different merges ({', '.join(sorted(merges))})"
            elif merges:
                scope.merge = merges.pop()
