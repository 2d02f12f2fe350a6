"""Budgets: cost from prices and budget verdicts, on the usage records a real run leaves."""

from __future__ import annotations

import pytest
from scripted_llm import Call, Text, ToolCalls

from artifactflow import tool
from artifactflow.agents.model import ResolvedModel
from artifactflow.agents.spec import AgentSpec
from artifactflow.core.window.budget import (
    Budget,
    Prices,
    check,
    cost_usd,
    tally,
    unpriced_message,
    unpriced_models,
)
from artifactflow.settings import BudgetSettings


@tool
def lookup(n: int) -> str:
    """Look a number up."""
    return f"value {n} " * 200


def test_cost_from_profile_prices():
    model = ResolvedModel("fast", "gpt-4o-mini", None, "k", {}, context_window=128_000, input_per_mtok=0.15, output_per_mtok=0.60)
    prices = Prices.of(model)
    assert prices.known and cost_usd(1_000_000, 0, prices) == pytest.approx(0.15)
    assert cost_usd(2_000, 500, prices) == pytest.approx((2_000 * 0.15 + 500 * 0.60) / 1e6)
    assert cost_usd(10, 10, Prices.of(ResolvedModel(None, "m", None, "k"))) is None
    assert cost_usd(10, 10, Prices(0.1, None)) is None  # half a price is no price


async def test_budgets_on_the_records_of_a_real_run(make_client, llm):
    client = await make_client(lead_tools=["lookup"], extra_tools=[lookup])
    llm.script(*(ToolCalls([Call("lookup", {"n": n})]) for n in range(3)), Text("done"))
    result = await client.run("look up three numbers")
    assert result.status == "completed"
    records = result.metrics["calls"]
    usage = tally(records, {"lead_agent": Prices(1.0, 2.0)})
    assert usage.calls == 4 and usage.tokens == result.metrics["tokens"]["total"]
    assert usage.by_agent == {"lead_agent": usage.tokens}
    assert usage.cost_usd == pytest.approx((usage.prompt_tokens * 1.0 + usage.completion_tokens * 2.0) / 1e6)
    assert usage.summary()["cost_complete"] is True
    # token budget: reached at the limit, named with the setting to raise
    assert check(usage, Budget(max_tokens=usage.tokens + 1)) is None
    verdict = check(usage, Budget(max_tokens=usage.tokens))
    assert verdict is not None and verdict.kind == "tokens" and "budget.max_tokens" in verdict.message
    assert "ARTIFACTFLOW_BUDGET__MAX_TOKENS" in verdict.message
    # cost budget
    verdict = check(usage, Budget(max_cost_usd=usage.cost_usd / 2))
    assert verdict is not None and verdict.kind == "cost" and "budget.max_cost_usd" in verdict.message
    assert check(usage, Budget(max_cost_usd=usage.cost_usd * 2)) is None
    # an agent's own budget, pointing at its file
    lead = client.admin.services.agents["lead_agent"]
    verdict = check(usage, Budget(agent_max_tokens={"lead_agent": 10}), agent_sources={"lead_agent": lead.source})
    assert verdict is not None and verdict.agent == "lead_agent" and lead.source in verdict.message
    assert verdict.event_data()["budget"] == "agent_tokens"


def test_unpriced_calls_are_reported_not_guessed():
    records = [
        {"kind": "llm", "agent": "lead_agent", "prompt_tokens": 1000, "completion_tokens": 100, "cost_usd": 0.5},
        {"kind": "llm", "agent": "helper", "prompt_tokens": 1000, "completion_tokens": 100},
        {"kind": "tool", "agent": "helper", "tool": "x", "success": True},
    ]
    usage = tally(records)
    assert usage.calls == 2 and usage.unpriced_calls == 1 and usage.cost_usd == 0.5
    assert usage.summary() == {"tokens": 2200, "prompt_tokens": 2000, "completion_tokens": 200,
                               "cost_usd": 0.5, "cost_complete": False}
    verdict = check(usage, Budget(max_cost_usd=0.4))
    assert verdict is not None and "1 call(s) without prices not counted" in verdict.message
    assert tally([records[1]]).summary()["cost_usd"] is None


def test_budget_from_settings_and_front_matter_and_missing_prices():
    agents = {"lead_agent": AgentSpec(name="lead_agent", role="lead", max_tokens=5000),
              "helper": AgentSpec(name="helper")}
    budget = Budget.from_config(BudgetSettings(max_tokens=100, max_cost_usd=1.0), agents)
    assert (budget.max_tokens, budget.max_cost_usd, dict(budget.agent_max_tokens)) == (100, 1.0, {"lead_agent": 5000})
    assert budget.active and not Budget().active
    models = {"lead_agent": ResolvedModel("p", "m", None, "k", {}, input_per_mtok=0.1, output_per_mtok=0.2),
              "helper": ResolvedModel(None, "m", None, "k")}
    missing = unpriced_models(models)
    assert missing == ["helper"]
    assert "input_per_mtok" in unpriced_message(missing) and "helper" in unpriced_message(missing)
