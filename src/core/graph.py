"""Graph wiring: three nodes and one routing function that reads only `phase`.

```
lead_agent ──► tool_execution ──► (lead_agent | subagents)
    │   ▲            ▲                  │
    │   └────────────┼──────────────────┘  (all subagents answered)
    ▼                └─── subagents ◄───┘  (a subagent needs another step)
   END (phase COMPLETED)
```

Every node ends by setting the phase it means, and `route` maps phase → node:

| node           | sets                                                               |
|----------------|--------------------------------------------------------------------|
| lead_agent     | TOOL_EXECUTING (it called tools), COMPLETED (it answered, or hit    |
|                | max_tool_rounds)                                                    |
| tool_execution | LEAD_EXECUTING (the lead's tool results are in), SUBAGENT_EXECUTING |
|                | (subagents were started or got their results)                      |
| subagents      | TOOL_EXECUTING (some invocation called tools), LEAD_EXECUTING (all  |
|                | invocations answered or failed: the lead closes its round)         |

A permission pause is not a phase: the tool node's `interrupt()` stops the run in
TOOL_EXECUTING and the resume re-enters the tool node.

Compiled once per process with the process's checkpointer; per-request objects arrive as
runtime context (`RunContext`).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import END, START, StateGraph

from .agent_nodes import lead_agent, subagents
from .context import RunContext
from .state import AgentState, ExecutionPhase
from .tool_node import tool_execution

_NEXT = {
    ExecutionPhase.LEAD_EXECUTING.value: "lead_agent",
    ExecutionPhase.TOOL_EXECUTING.value: "tool_execution",
    ExecutionPhase.SUBAGENT_EXECUTING.value: "subagents",
    ExecutionPhase.COMPLETED.value: END,
}


def route(state: AgentState) -> str:
    """The node that runs next, by `phase` alone."""
    phase = state.get("phase")
    try:
        return _NEXT[str(phase)]
    except KeyError:
        raise RuntimeError(
            f"graph state has unknown phase {phase!r}; expected one of {', '.join(_NEXT)}"
        ) from None


class _Route(Runnable[AgentState, str]):
    """`route` as a Runnable that answers on the event loop, untraced.

    LangGraph runs a plain-function branch on a worker thread when the graph runs async (its
    `coerce_to_runnable` wraps it in `run_in_executor`): a thread hop after every step for a
    dictionary lookup. A Runnable is used as it is, and this one's `ainvoke` does not leave
    the loop nor open a callback run."""

    name = "route"

    def invoke(self, input: AgentState, config: RunnableConfig | None = None, **kwargs: Any) -> str:
        return route(input)

    async def ainvoke(
        self, input: AgentState, config: RunnableConfig | None = None, **kwargs: Any
    ) -> str:
        return route(input)


_ROUTE = _Route()

_COMPILED: list[Any] = []  # the chat graph without a saver, compiled once per process


def build_graph(checkpointer: Any = None) -> Any:
    """The chat graph with `checkpointer`. Its nodes take everything per run or per engine
    (agents, tools, models) from the runtime context, so it is compiled once per process and
    each engine gets a copy bound to its own saver (a copy is ~20 µs, a compile ~7 ms)."""
    if not _COMPILED:
        _COMPILED.append(_compile())
    return _COMPILED[0].copy(update={"checkpointer": checkpointer})


def _compile() -> Any:
    builder = StateGraph(AgentState, context_schema=RunContext)
    builder.add_node("lead_agent", lead_agent)
    builder.add_node("tool_execution", tool_execution)
    builder.add_node("subagents", subagents)
    builder.add_edge(START, "lead_agent")
    targets = ["lead_agent", "tool_execution", "subagents", END]
    for node in ("lead_agent", "tool_execution", "subagents"):
        builder.add_conditional_edges(node, _ROUTE, targets)
    return builder.compile()
