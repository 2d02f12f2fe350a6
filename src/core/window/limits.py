"""Limits that follow from configuration: a model's context window, the graph's step limit.

Both are pure functions of settings and specs so the run driver can compute them once per run.

The step limit exists because LangGraph stops a run with a raw `GraphRecursionError` after
`recursion_limit` super-steps. A fixed number (400) killed an agent allowed
`max_tool_rounds: 1000` after about 200 rounds with LangGraph's text as the reason. Here the
limit is derived from the agents' round limits (and any extra steps a workflow adds), so the
configured round limit is always reached first and ends the run with outcome
`max_tool_rounds`; `run.recursion_limit` only acts as a floor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...agents.model import ResolvedModel
    from ...agents.spec import AgentSpec
    from ...settings import ContextSettings

# LangGraph counts the input as a step: a run of n node steps needs recursion_limit >= n + 1
# (measured on LangGraph 1.2 against this graph).
INPUT_STEP = 1
# Steps the derived limit adds on top of the worst case (resume bookkeeping, future nodes).
RECURSION_SLACK = 16


def context_window(model: ResolvedModel, settings: ContextSettings) -> int:
    """The model's window in tokens: its profile's `context_window`, else the setting
    `context.default_window`."""
    return model.context_window or settings.default_window


def lead_round_steps(subagents: Iterable[AgentSpec]) -> int:
    """Graph steps one lead round can take at most.

    `lead_agent` → `tool_execution` is 2 steps. A round that calls subagents adds their
    phase: they run concurrently inside one `subagents` node, so the longest one counts:
    `subagents` once per step and `tool_execution` after each tool round, i.e.
    2 × max_tool_rounds + 1.
    """
    longest = max((a.max_tool_rounds for a in subagents), default=None)
    return 2 if longest is None else 2 + 2 * longest + 1


def recursion_limit(
    agents: Mapping[str, AgentSpec],
    *,
    floor: int = 0,
    extra_steps: int = 0,
) -> int:
    """The graph's recursion limit for a run, so that every `max_tool_rounds` is hit first.

    Worst case: the lead uses all `max_tool_rounds` rounds, each calling its slowest
    subagent, plus the lead's final step that is stopped by the round limit. `floor` is the
    configured `run.recursion_limit`; `extra_steps` is what a workflow adds.
    """
    lead = next((a for a in agents.values() if a.role == "lead"), None)
    if lead is None:
        return max(floor, INPUT_STEP + RECURSION_SLACK + extra_steps)
    callable_subagents = []
    if "call_subagent" in lead.tools:
        callable_subagents = [
            a
            for a in agents.values()
            if a.role == "subagent" and (lead.subagents is None or a.name in lead.subagents)
        ]
    worst = lead.max_tool_rounds * lead_round_steps(callable_subagents) + 1 + INPUT_STEP
    return max(floor, worst + extra_steps + RECURSION_SLACK)
