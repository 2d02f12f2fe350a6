"""Workflows: YAML DAGs of agent and tool steps, compiled to LangGraph.

A workflow file (`config/workflows/*.yaml`) declares nodes with one of seven roles and the
edges between them. It is parsed (`spec`, `templates`), checked as a whole before anything
runs (`validate`, `references`, on the shape computed by `topology`), drawn (`mermaid`), and
compiled to a LangGraph `StateGraph` (`compile`; role semantics in `nodes` on the shared
`execution` machinery, with `decision`, `merge` and `scoped` for split items and branch
paths; branch races in `race`; channels and plain-data shapes in `state`) whose agent, tool
and group steps are nested graphs on the chat graph's subagent step and shared tool node
(`step`, `group`). `launch` starts runs on the core run engine (`core/run/`), so pauses,
resumes, checkpoints and the event log work as for a chat run. Every node
execution is recorded with its parents (`lineage`).
"""

from __future__ import annotations

from .errors import WorkflowIssue, WorkflowNodeError, WorkflowValidationError
from .mermaid import to_mermaid
from .spec import EdgeSpec, NodeSpec, WorkflowSpec, load_workflow_file, parse_workflow
from .validate import check_workflow, validate_workflow

__all__ = [
    "EdgeSpec",
    "NodeSpec",
    "WorkflowIssue",
    "WorkflowNodeError",
    "WorkflowSpec",
    "WorkflowValidationError",
    "check_workflow",
    "load_workflow_file",
    "parse_workflow",
    "to_mermaid",
    "validate_workflow",
]
