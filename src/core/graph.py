"""Graph wiring: three nodes and one routing function.

```
lead_agent ──► tool_execution ──► (lead_agent | subagents)
    │   ▲            ▲                  │
    │   └────────────┼──────────────────┘  (all subagents answered)
    ▼                └─── subagents ◄───┘  (a subagent needs another step)
   END (phase COMPLETED)
```
Compiled once per process with the process's checkpointer; per-request objects arrive as
runtime context (`RunContext`).
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from .agent_nodes import lead_agent, subagents
from .context import RunContext
from .state import AgentState, ExecutionPhase
from .tool_node import tool_execution


def route(state: AgentState) -> str:
    if state.get("phase") == ExecutionPhase.COMPLETED.value:
        return END
    if state.get("pending_tool_calls"):
        return "tool_execution"
    invocations = state.get("subagent_pending") or {}
    if any(rec.get("status") == "running" for rec in invocations.values()):
        return "subagents"
    return "lead_agent"


def build_graph(checkpointer: Any = None) -> Any:
    builder = StateGraph(AgentState, context_schema=RunContext)
    builder.add_node("lead_agent", lead_agent)
    builder.add_node("tool_execution", tool_execution)
    builder.add_node("subagents", subagents)
    builder.add_edge(START, "lead_agent")
    targets = ["lead_agent", "tool_execution", "subagents", END]
    for node in ("lead_agent", "tool_execution", "subagents"):
        builder.add_conditional_edges(node, route, targets)
    return builder.compile(checkpointer=checkpointer)
