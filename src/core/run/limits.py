"""What bounds a run, as the run driver applies it: the graph's step limit and the budgets.

- Step limit: derived from the agents' `max_tool_rounds` (`window.limits.recursion_limit`,
  `run.recursion_limit` as a floor), so a round limit is always reached first and ends the run
  with outcome `max_tool_rounds`. Should LangGraph's `GraphRecursionError` still surface, it
  becomes `StepLimitReached`, whose message says what to change; LangGraph's text never
  reaches a user.
- Budgets: `Spending` tallies the message's model calls from its events (earlier segments
  from the log, this one as they are emitted, summary calls included). The driver asks
  `stop_after(update)` after each graph step: a crossed budget ends the run there, with outcome
  `budget_exceeded` and the lead's latest text as the partial answer, before the next step
  starts, so never inside a tool call. A step that finishes the run is let through.
- Time: `budget.max_seconds` bounds a segment's work by the clock (`time_limit`), a model call
  in progress included (a small local model may take minutes per call: measured 806 s before
  a run failed). The driver stops the graph where it is when the time is up; the run ends as
  at a crossed budget, with outcome `budget_exceeded` (`time_exceeded` says why).
- `preflight`: with `budget.max_cost_usd` set, every model must have prices, or the run
  refuses to start (a cost budget that cannot count a model's calls would not hold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import ArtifactFlowError, UserError
from ..metrics import records_from_events
from ..state import LEAD, ExecutionPhase
from ..window import Budget, BudgetExceeded, Usage, check, recursion_limit, tally
from ..window.budget import unpriced_message, unpriced_models

if TYPE_CHECKING:
    from ..context import Services
    from .runtime import Runtime


def time_limit(services: Services) -> float | None:
    """Seconds the segment may work (`budget.max_seconds`), or None."""
    return services.settings.budget.max_seconds


def time_exceeded(seconds: float) -> BudgetExceeded:
    return BudgetExceeded(
        "seconds", seconds, seconds,
        f"time budget reached: the run worked {seconds:g} s (budget.max_seconds) without "
        "finishing; the model may be too slow for the task (a small local model: a lower "
        "max_output_tokens or a bigger model), or raise budget.max_seconds "
        "(ARTIFACTFLOW_BUDGET__MAX_SECONDS) to allow longer runs",
    )


class StepLimitReached(ArtifactFlowError):
    """The graph took more steps than the run's step limit allows."""


def step_limit(services: Services) -> int:
    return recursion_limit(services.agents, floor=services.settings.run.recursion_limit)


def step_limit_error(limit: int) -> StepLimitReached:
    return StepLimitReached(
        f"the run stopped after {limit:,} graph steps without reaching an agent's "
        "max_tool_rounds (the step limit follows from the agents' max_tool_rounds, with "
        "run.recursion_limit as a floor); raise run.recursion_limit in "
        "config/artifactflow.yaml (or ARTIFACTFLOW_RUN__RECURSION_LIMIT) to allow longer runs"
    )


def preflight(services: Services) -> None:
    """Refuse a run that could not respect its configuration (raises `UserError`)."""
    settings = services.settings
    summary = settings.context.summary_model
    summary_target = services.models.resolve(summary) if summary else None  # credentials
    if settings.budget.max_cost_usd is None:
        return
    models = {name: services.models.resolve(a.model) for name, a in services.agents.items()}
    if summary_target is not None:
        models["context.summary_model"] = summary_target
    missing = unpriced_models(models)
    if missing:
        raise UserError(unpriced_message(missing))


def _finishes(update: Any) -> bool:
    """Whether a node's update (a dict, or a list of channel writes) ends the run."""
    done = ExecutionPhase.COMPLETED.value
    if isinstance(update, Mapping):
        return update.get("phase") == done
    if isinstance(update, list | tuple):
        return any(isinstance(w, tuple | list) and len(w) == 2 and tuple(w) == ("phase", done) for w in update)
    return False


class Spending:
    """Tokens and cost of one message's run, and its budget verdict."""

    COUNTED = frozenset({"llm_complete", "context_compacted"})  # the event types `add` reads

    def __init__(self, services: Services, events: Sequence[Mapping[str, Any]]) -> None:
        self.budget = Budget.from_config(services.settings.budget, services.agents)
        self.sources = {name: spec.source or "" for name, spec in services.agents.items()}
        self.usage = Usage()
        self.lead_text = ""
        for event in events:
            self.add(event["type"], event.get("agent"), event.get("data") or {})

    @classmethod
    async def load(cls, rt: Runtime, message_id: str) -> Spending:
        return cls(rt.services, await rt.store.events(message_id))

    def add(self, type_: str, agent: str | None, data: Mapping[str, Any]) -> None:
        if type_ not in self.COUNTED:
            return
        if type_ == "llm_complete" and data.get("invocation") == LEAD:
            self.lead_text = str(data.get("content") or "") or self.lead_text
        if self.budget.active and type_ in ("llm_complete", "context_compacted"):
            new = tally(records_from_events([{"type": type_, "agent": agent, "data": dict(data)}]))
            usage = self.usage
            usage.prompt_tokens += new.prompt_tokens
            usage.completion_tokens += new.completion_tokens
            usage.cost_usd += new.cost_usd
            usage.unpriced_calls += new.unpriced_calls
            usage.calls += new.calls
            for name, tokens in new.by_agent.items():
                usage.by_agent[name] = usage.by_agent.get(name, 0) + tokens

    def verdict(self) -> BudgetExceeded | None:
        if not self.budget.active:
            return None
        return check(self.usage, self.budget, agent_sources=self.sources)

    def stop_after(self, chunk: Mapping[str, Any]) -> BudgetExceeded | None:
        """After a graph step (`chunk`: its "updates" stream item): the budget crossed, if the
        run should stop here."""
        if any(_finishes(update) for update in chunk.values()):
            return None
        return self.verdict()

    def partial_answer(self, stopped: BudgetExceeded) -> str:
        return self.lead_text or f"(stopped before an answer: {stopped.message})"

