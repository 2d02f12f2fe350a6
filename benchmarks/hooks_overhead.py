"""What the hooks cost per agent step, measured on the HookRunner alone.

One "step" is what the engine fires for an agent step with a two-call tool round:
agent start, model request and answer, `before_tool_call` ×2, agent end, round start,
tool start / `after_tool_call` ×2, round end — with the typed records built each time.
Compare with the orchestration floor (LangGraph ≈ 2 ms per step, DESIGN.md) to judge.

    .venv/bin/python benchmarks/hooks_overhead.py [--steps 20000]

Variants: no hooks (telemetry off); tracing on an SDK provider with no exporter and with
the in-memory exporter; the redaction and policy built-ins; a round-level hook keyed
through the app-store ledger (SQLite), the cost of exactly-once marks.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from artifactflow.core.store.repository import AppStore
from artifactflow.hooks import (
    AgentStep,
    AgentStepEnd,
    HookRunner,
    Hooks,
    ModelRequest,
    ModelResponse,
    RunEnd,
    RunInfo,
    StoreHookLedger,
    ToolCall,
    ToolOutcome,
    ToolRound,
)
from artifactflow.hooks.policy import ToolPolicyHooks
from artifactflow.hooks.redaction import RedactionHooks
from artifactflow.hooks.tracing import TracingHooks
from artifactflow.tools.base import ToolResult

MESSAGES = [{"role": "system", "content": "You are the lead agent. " * 20}] + [
    {"role": "user" if i % 2 else "tool", "content": "some earlier text " * 30, "tool_call_id": f"c{i}"}
    for i in range(20)
]
CALLS = [
    {"id": "c1", "name": "web_fetch", "arguments": '{"url_list": ["https://python.org/downloads"]}'},
    {"id": "c2", "name": "web_search", "arguments": '{"query": "python release"}'},
]


async def step(runner: HookRunner, run: RunInfo, n: int) -> None:
    agent = AgentStep("lead_agent", "lead", n, model="gpt-test", provider="openai")
    await runner.on_agent_start(run, agent)
    request = await runner.before_model_request(run, agent, ModelRequest(MESSAGES, [], "gpt-test"))
    response = await runner.after_model_request(
        run, agent, request, ModelResponse("", CALLS, "gpt-test", 1200, 40, "tool_calls")  # type: ignore[arg-type]
    )
    calls = [ToolCall.from_raw(c, agent="lead_agent", invocation="lead", round=n) for c in response.tool_calls]
    decided = await runner.before_tool_calls(run, calls)
    await runner.on_agent_end(run, agent, AgentStepEnd("", len(calls)))
    live = [c for c in decided if isinstance(c, ToolCall)]
    round_ = ToolRound("lead_agent", "lead", n, tuple(live))
    await runner.on_tool_round_start(run, round_)
    outcomes = []
    for call in live:
        await runner.on_tool_start(run, call)
        result = await runner.after_tool_call(run, call, ToolResult(True, "page text " * 200), 3.0)
        outcomes.append(ToolOutcome(call, result, 3.0))
    await runner.after_tool_round(run, dataclasses.replace(round_, outcomes=tuple(outcomes)))


async def measure(runner: HookRunner, steps: int, segments: int = 20) -> float:
    """Microseconds per step, over `segments` runs of steps/segments steps each."""
    per = max(1, steps // segments)
    total = 0.0
    for seg in range(segments):
        run = RunInfo("conv", f"msg-{seg}", f"thread-{seg}", "lead_agent", "task", resumed=seg % 2 == 1)
        started = time.perf_counter()
        await runner.on_run_start(run)
        for n in range(1, per + 1):
            await step(runner, run, n)
        await runner.on_run_end(run, RunEnd("completed"))
        total += time.perf_counter() - started
    return total / (per * segments) * 1e6


async def measure_guarded(steps: int) -> float:
    """The engine's fast path with no hooks: it checks `runner.empty` and builds nothing."""
    runner = HookRunner()
    run = RunInfo("conv", "msg", "thread", "lead_agent", "task")
    started = time.perf_counter()
    for n in range(1, steps + 1):
        if not runner.empty:  # pragma: no cover - never taken here
            await step(runner, run, n)
    return (time.perf_counter() - started) / steps * 1e6


class RoundReminder(Hooks):
    async def after_tool_round(self, run: RunInfo, round: ToolRound) -> str:
        return "cite your sources"


async def main(steps: int) -> None:
    exporter = InMemorySpanExporter()
    with_memory = TracerProvider()
    with_memory.add_span_processor(SimpleSpanProcessor(exporter))
    builtins = [
        RedactionHooks([r"sk-[A-Za-z0-9]{20,}", r"\b\d{3}-\d{2}-\d{4}\b"]),
        ToolPolicyHooks({"rules": [{"tool": "web_fetch", "argument": "url_list", "domains": ["python.org"]}]}),
    ]
    with tempfile.TemporaryDirectory() as folder:
        store = await AppStore.open(None, sqlite_path=Path(folder) / "app.db")
        variants: list[tuple[str, HookRunner, int]] = [
            ("no hooks (telemetry off)", HookRunner(), steps),
            ("tracing, SDK provider, no exporter", HookRunner([TracingHooks(TracerProvider())]), steps),
            ("tracing, in-memory exporter", HookRunner([TracingHooks(with_memory)]), steps),
            ("redaction + tool policy", HookRunner(builtins), steps),
            ("after_tool_round hook, SQLite ledger", HookRunner([RoundReminder()], ledger=StoreHookLedger(store)), max(200, steps // 50)),
        ]
        rows: list[tuple[str, float]] = [("no hooks, records skipped (runner.empty)", await measure_guarded(steps))]
        kept = 0
        for name, runner, count in variants:
            await measure(runner, max(20, count // 10))  # warm-up
            exporter.clear()
            rows.append((name, await measure(runner, count)))
            kept = kept or len(exporter.get_finished_spans())
        await store.close()
    base = rows[1][1]
    print(f"HookRunner cost per agent step (2 tool calls), {steps} steps")
    print(f"{'variant':42} {'µs/step':>10} {'vs built':>9}")
    for name, micros in rows:
        print(f"{name:42} {micros:10.1f} {micros - base:+9.1f}")
    print(f"spans exported per step with tracing on: {kept / max(1, steps):.1f}")


def cli(argv: list[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args(argv)
    asyncio.run(main(args.steps))


if __name__ == "__main__":
    cli()
