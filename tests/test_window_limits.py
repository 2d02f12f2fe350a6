"""The graph's recursion limit derived from the agents' round limits: exact, so a configured
`max_tool_rounds` is always reached first. Checked against the real engine: the derived
worst case is enough, one step less is not (and then the user reads our message, not
LangGraph's)."""

from __future__ import annotations

from pathlib import Path

from conftest import make_config, write_agent
from scripted_llm import Call, ToolCalls

from artifactflow import tool
from artifactflow.agents.spec import AgentSpec
from artifactflow.core.window import limits
from artifactflow.core.window.limits import RECURSION_SLACK, lead_round_steps, recursion_limit


@tool
def lookup(n: int) -> str:
    """Look a number up."""
    return f"value {n}"


def set_recursion_limit(config: Path, value: int) -> None:
    path = config / "artifactflow.yaml"
    path.write_text(path.read_text() + f"run:\n  recursion_limit: {value}\n")


def always_call(llm, name: str, args: dict) -> None:
    llm.route(lambda req: ToolCalls([Call(name, args)]) if req["messages"][0]["content"].startswith("You are the lead") else None)


def test_limit_formula():
    lead = AgentSpec(name="lead", role="lead", tools=("lookup",), max_tool_rounds=1000)
    assert recursion_limit({"lead": lead}) == 2 * 1000 + 1 + 1 + RECURSION_SLACK  # + LangGraph's input step
    assert recursion_limit({"lead": lead}, floor=50_000) == 50_000
    delegating = lead.model_copy(update={"tools": ("call_subagent",), "max_tool_rounds": 20})
    fast = AgentSpec(name="fast", max_tool_rounds=3)
    slow = AgentSpec(name="slow", max_tool_rounds=30)
    assert lead_round_steps([fast, slow]) == 2 + 2 * 30 + 1
    assert recursion_limit({"lead": delegating, "fast": fast, "slow": slow}) == 20 * 63 + 2 + RECURSION_SLACK
    # only the subagents the lead may call count
    only_fast = delegating.model_copy(update={"subagents": ("fast",)})
    assert recursion_limit({"lead": only_fast, "fast": fast, "slow": slow}) == 20 * 9 + 2 + RECURSION_SLACK
    assert recursion_limit({"lead": lead}, extra_steps=100) == 2002 + 100 + RECURSION_SLACK


def exact_limit(monkeypatch, offset: int) -> None:
    """Run with the derived limit minus its slack, plus `offset` (a floor of 10 never wins)."""
    monkeypatch.setattr(limits, "RECURSION_SLACK", offset)


def assert_step_limit_error(result) -> None:
    assert result.status == "failed" and result.outcome is None
    assert "graph steps" in result.error and "run.recursion_limit" in result.error
    assert "GraphRecursionError" not in result.error and "Recursion limit of" not in result.error
    errors = [e for e in result.events if e.type == "error"]
    assert errors and errors[-1].data.message == result.error and errors[-1].data.kind == "StepLimitReached"


async def test_lead_reaches_max_tool_rounds_exactly_within_the_derived_limit(
    tmp_path: Path, make_client, llm, monkeypatch
):
    """The engine derives its step limit from max_tool_rounds (run.recursion_limit is only a
    floor): with the formula's exact figure the round limit wins; one step less and the run
    fails with our message, never LangGraph's."""
    exact_limit(monkeypatch, 0)
    config = make_config(tmp_path / "a", lead_tools=["lookup"], max_tool_rounds=25)
    set_recursion_limit(config, 10)
    client = await make_client(config, tmp_path / "a" / "data", extra_tools=[lookup])
    always_call(llm, "lookup", {"n": 1})
    result = await client.run("loop forever")
    assert (result.status, result.outcome) == ("completed", "max_tool_rounds"), result.error
    assert len(llm.requests) == 26  # 25 rounds, then the call that was stopped

    exact_limit(monkeypatch, -1)
    config = make_config(tmp_path / "b", lead_tools=["lookup"], max_tool_rounds=25)
    set_recursion_limit(config, 10)
    client = await make_client(config, tmp_path / "b" / "data", extra_tools=[lookup])
    assert_step_limit_error(await client.run("loop forever"))


async def test_subagent_rounds_are_counted_in_the_limit(tmp_path: Path, make_client, llm, monkeypatch):
    def build(root: Path) -> Path:
        config = make_config(root, lead_tools=["call_subagent"], max_tool_rounds=2)
        write_agent(config / "agents", "helper", tools=["lookup"], max_tool_rounds=3,
                    prompt="You are helper, a subagent.")
        set_recursion_limit(config, 10)
        return config

    llm.route(lambda req: ToolCalls([Call("lookup", {"n": 2})]) if req["messages"][0]["content"].startswith("You are helper") else None)
    always_call(llm, "call_subagent", {"agent_name": "helper", "instruction": "look it up"})
    exact_limit(monkeypatch, 0)
    client = await make_client(build(tmp_path / "a"), tmp_path / "a" / "data", extra_tools=[lookup])
    result = await client.run("delegate forever")
    assert (result.status, result.outcome) == ("completed", "max_tool_rounds"), result.error
    helper_calls = [r for r in llm.requests if r["messages"][0]["content"].startswith("You are helper")]
    assert len(helper_calls) == 2 * 4  # two lead rounds, each helper used its 3 rounds and was stopped
    exact_limit(monkeypatch, -1)
    client = await make_client(build(tmp_path / "b"), tmp_path / "b" / "data", extra_tools=[lookup])
    assert_step_limit_error(await client.run("delegate forever"))
