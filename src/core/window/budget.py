"""Cost from prices, and whether a run has crossed a budget.

Budgets are per run (one message, all its agents and resumes): `budget.max_tokens` (prompt
plus completion), `budget.max_cost_usd`, and an agent's `max_tokens` from its front matter.
The run driver checks between graph steps, never inside a tool call; a crossed budget ends
the run with outcome `budget_exceeded` and keeps the partial answer.

Usage records are the metrics records built from `llm_complete` events (`core/metrics.py`:
kind "llm", agent, model, prompt_tokens, completion_tokens), optionally with `cost_usd`
written at call time from the profile's prices. The model name a provider reports may differ
from the profile's (dated snapshots), so cost is best computed when the call is made, with
`Prices.of(resolved_model)`, and stored on the event; records without it can be priced by
agent with `prices_by_agent`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

TOKENS_HINT = "budget.max_tokens (config/artifactflow.yaml or ARTIFACTFLOW_BUDGET__MAX_TOKENS)"
COST_HINT = "budget.max_cost_usd (config/artifactflow.yaml or ARTIFACTFLOW_BUDGET__MAX_COST_USD)"


@dataclass(frozen=True)
class Prices:
    """USD per million tokens; unknown when either is missing."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None

    @classmethod
    def of(cls, model: Any) -> Prices:
        """From a `ResolvedModel` (or anything with the two attributes)."""
        return cls(getattr(model, "input_per_mtok", None), getattr(model, "output_per_mtok", None))

    @property
    def known(self) -> bool:
        return self.input_per_mtok is not None and self.output_per_mtok is not None


def cost_usd(prompt_tokens: int, completion_tokens: int, prices: Prices) -> float | None:
    """The cost of one call, or None when the model has no prices."""
    if not prices.known:
        return None
    assert prices.input_per_mtok is not None and prices.output_per_mtok is not None
    return (prompt_tokens * prices.input_per_mtok + completion_tokens * prices.output_per_mtok) / 1_000_000


@dataclass
class Usage:
    """Totals over a run's model calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0  # calls whose cost is unknown (no prices): not in cost_usd
    calls: int = 0
    by_agent: dict[str, int] = field(default_factory=dict)  # agent -> tokens

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def summary(self) -> dict[str, Any]:
        """Tokens and cost for `complete`, `history` and the API. `cost_usd` is None when no
        call was priced; `cost_complete` says whether every call was."""
        priced = self.calls - self.unpriced_calls
        return {
            "tokens": self.tokens,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6) if priced else None,
            "cost_complete": self.unpriced_calls == 0,
        }


def tally(
    records: Iterable[Mapping[str, Any]],
    prices_by_agent: Mapping[str, Prices] | None = None,
) -> Usage:
    """Sum the "llm" records; a record's own `cost_usd` wins over its agent's prices."""
    usage = Usage()
    for record in records:
        if record.get("kind", "llm") != "llm":
            continue
        prompt = int(record.get("prompt_tokens") or 0)
        completion = int(record.get("completion_tokens") or 0)
        agent = str(record.get("agent") or "?")
        usage.calls += 1
        usage.prompt_tokens += prompt
        usage.completion_tokens += completion
        usage.by_agent[agent] = usage.by_agent.get(agent, 0) + prompt + completion
        cost = record.get("cost_usd")
        if cost is None and prices_by_agent and agent in prices_by_agent:
            cost = cost_usd(prompt, completion, prices_by_agent[agent])
        if cost is None:
            usage.unpriced_calls += 1
        else:
            usage.cost_usd += float(cost)
    return usage


@dataclass(frozen=True)
class Budget:
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    agent_max_tokens: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_config(cls, settings: Any, agents: Mapping[str, Any]) -> Budget:
        """From `BudgetSettings` and the agent specs (their `max_tokens`)."""
        return cls(
            max_tokens=settings.max_tokens,
            max_cost_usd=settings.max_cost_usd,
            agent_max_tokens={
                name: spec.max_tokens for name, spec in agents.items() if spec.max_tokens is not None
            },
        )

    @property
    def active(self) -> bool:
        return bool(self.max_tokens or self.max_cost_usd or self.agent_max_tokens)


@dataclass(frozen=True)
class BudgetExceeded:
    """Which budget was crossed; `message` is what the user sees as the run's reason."""

    kind: str  # "tokens" | "cost" | "agent_tokens" | "seconds" (run/limits.time_exceeded)
    limit: float
    used: float
    message: str
    agent: str | None = None

    def event_data(self) -> dict[str, Any]:
        return {"budget": self.kind, "limit": self.limit, "used": self.used, "agent": self.agent,
                "message": self.message}


def check(usage: Usage, budget: Budget, *, agent_sources: Mapping[str, str] | None = None) -> BudgetExceeded | None:
    """The first budget the usage has reached, or None. A budget is reached at its limit
    (`used >= limit`): the next model call would go over it."""
    if budget.max_tokens is not None and usage.tokens >= budget.max_tokens:
        return BudgetExceeded(
            "tokens",
            budget.max_tokens,
            usage.tokens,
            f"token budget reached: {usage.tokens:,} tokens used of {budget.max_tokens:,}; "
            f"raise {TOKENS_HINT} to allow more",
        )
    if budget.max_cost_usd is not None and usage.cost_usd >= budget.max_cost_usd:
        unpriced = (
            f" ({usage.unpriced_calls} call(s) without prices not counted)" if usage.unpriced_calls else ""
        )
        return BudgetExceeded(
            "cost",
            budget.max_cost_usd,
            round(usage.cost_usd, 6),
            f"cost budget reached: ${usage.cost_usd:.4f} spent of ${budget.max_cost_usd:.4f}{unpriced}; "
            f"raise {COST_HINT} to allow more",
        )
    for agent, limit in budget.agent_max_tokens.items():
        used = usage.by_agent.get(agent, 0)
        if used >= limit:
            where = (agent_sources or {}).get(agent) or f"config/agents/{agent}.md"
            return BudgetExceeded(
                "agent_tokens",
                limit,
                used,
                f"agent '{agent}' reached its token budget: {used:,} tokens used of {limit:,}; "
                f"raise max_tokens in the front matter of {where} to allow more",
                agent=agent,
            )
    return None


def unpriced_models(models: Mapping[str, Any]) -> list[str]:
    """Agents whose model has no prices (name → `ResolvedModel`); with `budget.max_cost_usd`
    set, their calls cannot count towards it, so the run should refuse to start."""
    return sorted(name for name, model in models.items() if not Prices.of(model).known)


def unpriced_message(agents: list[str]) -> str:
    return (
        f"budget.max_cost_usd is set but the model of {', '.join(agents)} has no prices: add "
        "input_per_mtok and output_per_mtok (USD per million tokens) to its profile in "
        "config/models.yaml, or unset budget.max_cost_usd"
    )
