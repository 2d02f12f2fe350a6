"""Lineage: every node execution with its parents, its split/branch and its inputs and outputs.

Execution ids read like `search#2[0]`: node `search`, iteration 2 (of the loop around it),
item 0 of its split (or path 0 of its branch). Records are written to the app store
(`af_workflow_nodes`) when a node starts and again when it finishes, keyed by execution id,
so a node that LangGraph re-runs on resume rewrites its own record instead of adding one.

`provenance()` answers "where did this value come from": the tree of an execution's parents,
from the final output back to the input.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.store.rows import LineageRow

SUMMARY_CHARS = 200


def summary(value: Any, limit: int = SUMMARY_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def node_of(execution: str) -> str:
    return execution.split("#", 1)[0]


def record(
    *,
    message_id: str,
    execution: str,
    node: Any,
    iteration: int,
    group: str | None,
    index: int | None,
    parents: list[str],
    status: str,
    input: Any = None,
    output: Any = None,
    error: str | None = None,
    finished: bool = True,
) -> LineageRow:
    now = time.time()
    return {  # a LineageRow
        "message_id": message_id,
        "execution_id": execution,
        "node_id": node.id,
        "role": node.role,
        "kind": node.kind,
        "iteration": iteration,
        "group_id": group,
        "item_index": index,
        "parents": parents,
        "status": status,
        "input": input,
        "output": output,
        "error": error,
        "started_at": now,
        "finished_at": now if finished else None,
    }


def provenance(records: Sequence[Mapping[str, Any]], root: str | None = None) -> dict[str, Any] | None:
    """The parent tree of `root` (default: the run's exit, else its last execution)."""
    by_id = {r["execution_id"]: r for r in records}
    if not by_id:
        return None
    if root is None:
        exits = [r for r in records if r["role"] == "exit"]
        root = (exits or records)[-1]["execution_id"]
    if root is None or root not in by_id:
        return None
    seen: set[str] = set()

    def build(execution: str) -> dict[str, Any]:
        rec = by_id[execution]
        node = {"execution_id": execution, "record": rec, "parents": [], "repeated": execution in seen}
        if execution in seen:
            return node
        seen.add(execution)
        node["parents"] = [build(p) for p in rec.get("parents") or [] if p in by_id]
        return node

    return build(root)


def tree_lines(tree: dict[str, Any] | None) -> list[str]:
    """The provenance tree as indented text lines (for the CLI)."""
    if tree is None:
        return []
    lines: list[str] = []

    def walk(node: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        rec = node["record"]
        where = []
        if rec.get("kind"):
            where.append(rec["kind"])
        if rec.get("group_id"):
            where.append(f"{'joins' if rec['role'] == 'merge' else 'in'} {rec['group_id']}")
        label = f"{node['execution_id']} [{rec['role']}{', ' + ', '.join(where) if where else ''}] {rec['status']}"
        if node["repeated"]:
            text = f"{label} (shown above)"
        elif rec.get("error"):
            text = f"{label}: {summary(rec['error'], 100)}"
        else:
            text = f"{label} → {summary(rec.get('output'), 80)}"
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.append(prefix + branch + text)
        children = node["parents"]
        deeper = prefix + ("" if top else ("   " if last else "│  "))
        for i, child in enumerate(children):
            walk(child, deeper, i == len(children) - 1, False)

    walk(tree, "", True, True)
    return lines
