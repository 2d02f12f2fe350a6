"""What hooks and tracing cost: on real runs through the engine, and on the HookRunner alone.

1. Real runs (`--runs`): a lead agent makes `--rounds` tool rounds of two parallel calls,
   then answers, through the whole engine (client, graph, checkpoints in SQLite, event
   log) with the in-process `ScriptedModel` (no sockets, no model latency: the worst case
   for relative overhead). Variants, one client and data folder each, run interleaved
   (variant order rotates every repetition) and repeated; the table shows per agent step
   the fastest and the median wall time and the median CPU time, and the difference from
   "off":
   - off: no hooks (`telemetry.exporter: none`, the default);
   - tracing: `TracingHooks` on an SDK provider with an in-memory exporter (spans built,
     ended and exported synchronously);
   - the redaction and tool-policy built-ins (redaction turns token streaming off);
   - an `after_tool_round` hook that adds a message (one hook-mark write per round).
2. The runner alone (`--steps`): what the engine fires for an agent step with a two-call
   tool round — agent start, model request and answer, `before_tool_call` ×2, agent end,
   round start, tool start / `after_tool_call` ×2, round end — typed records built each time.

    .venv/bin/python benchmarks/hooks_overhead.py [--runs 12] [--rounds 20] [--steps 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
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
    {
        "role": "user" if i % 2 else "tool",
        "content": "some earlier text " * 30,
        "tool_call_id": f"c{i}",
    }
    for i in range(20)
]
CALLS = [
    {
        "id": "c1",
        "name": "web_fetch",
        "arguments": '{"url_list": ["https://python.org/downloads"]}',
    },
    {"id": "c2", "name": "web_search", "arguments": '{"query": "python release"}'},
]


async def step(runner: HookRunner, run: RunInfo, n: int) -> None:
    agent = AgentStep("lead_agent", "lead", n, model="gpt-test", provider="openai")
    await runner.on_agent_start(run, agent)
    request = await runner.before_model_request(run, agent, ModelRequest(MESSAGES, [], "gpt-test"))
    response = await runner.after_model_request(
        run,
        agent,
        request,
        ModelResponse("", CALLS, "gpt-test", 1200, 40, "tool_calls"),  # type: ignore[arg-type]
    )
    calls = [
        ToolCall.from_raw(c, agent="lead_agent", invocation="lead", round=n)
        for c in response.tool_calls
    ]
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
        run = RunInfo(
            "conv", f"msg-{seg}", f"thread-{seg}", "lead_agent", "task", resumed=seg % 2 == 1
        )
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


# --- 1. real runs through the engine --------------------------------------------------------------

LEAD = """---
name: lead_agent
description: lead
role: lead
tools: [lookup]
max_tool_rounds: 1000
---
You are the lead agent.
"""


def engine_lookup() -> Any:
    from artifactflow import tool

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"facts about {topic}: " + "text " * 200

    return lookup


def scripted(rounds: int) -> Any:
    from artifactflow.agents.model import Reply, ScriptedModel
    from artifactflow.agents.model import ToolCall as Call

    def answer(request: Any) -> Any:
        done = sum(
            1 for m in request.messages if m.get("role") == "assistant" and m.get("tool_calls")
        )
        if done >= rounds:
            return Reply("done")
        return Reply(
            tool_calls=[
                Call("lookup", {"topic": f"a{done}"}),
                Call("lookup", {"topic": f"b{done}"}),
            ]
        )

    return ScriptedModel(function=answer)


class RoundNote(Hooks):
    async def after_tool_round(self, run: RunInfo, round: ToolRound) -> str:
        return "cite your sources"


async def open_variant(root: Path, name: str, hooks: list[Any], yaml_text: str, rounds: int) -> Any:
    from artifactflow import Client, load_settings

    config = root / name / "config"
    (config / "agents").mkdir(parents=True)
    (config / "agents" / "lead_agent.md").write_text(LEAD, encoding="utf-8")
    # The in-process ScriptedModel declares no window: give it one no run comes near, so no
    # compaction call ever joins the measured steps (each run's calls are counted too).
    window = "context:\n  default_window: 1000000\n"
    (config / "artifactflow.yaml").write_text(window + yaml_text, encoding="utf-8")
    client = await Client.open(
        load_settings(config, root / name / "data"), extra_tools=[engine_lookup()], hooks=hooks
    )
    model = scripted(rounds)
    client.admin.services.use_model(model)
    return client, model


async def real_runs(runs: int, rounds: int) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    builtins = """hooks:
  redaction: {patterns: ['sk-[A-Za-z0-9]{20,}']}
  tool_policy: {rules: [{tool: lookup, argument: topic, deny: ['^forbidden']}]}
"""
    specs = [
        ("off (no hooks)", [], ""),
        ("tracing (in-memory exporter)", [TracingHooks(provider)], ""),
        ("redaction + tool policy (config)", [], builtins),
        ("after_tool_round hook (keyed in SQLite)", [RoundNote()], ""),
    ]
    with tempfile.TemporaryDirectory() as folder:
        opened = [
            await open_variant(Path(folder), f"v{i}", hooks, yaml_text, rounds)
            for i, (_, hooks, yaml_text) in enumerate(specs)
        ]
        clients = [client for client, _ in opened]
        times: list[list[float]] = [[] for _ in specs]
        cpu: list[list[float]] = [[] for _ in specs]
        try:
            for client in clients:  # warm-up: imports, caches, first SQLite pages
                await client.run("warm up")
            for rep in range(runs):
                order = list(range(len(specs)))
                order = order[rep % len(order) :] + order[: rep % len(order)]
                for i in order:
                    exporter.clear()
                    calls = len(opened[i][1].requests)
                    started, cpu_started = time.perf_counter(), time.process_time()
                    result = await clients[i].run(f"run {rep}")
                    times[i].append((time.perf_counter() - started) * 1000)
                    cpu[i].append((time.process_time() - cpu_started) * 1000)
                    calls = len(opened[i][1].requests) - calls
                    if (
                        result.status != "completed"
                        or result.response != "done"
                        or calls != rounds + 1
                    ):
                        raise AssertionError(
                            f"{specs[i][0]}: {result.status} ({result.error}), answer {result.response!r}, "
                            f"{calls} model calls (want {rounds + 1})"
                        )
        finally:
            for client in clients:
                await client.aclose()
    steps = rounds + 1  # agent steps per run: one per tool round, then the answer
    print(
        f"Real runs: {rounds} rounds of 2 parallel tool calls + answer ({steps} agent steps), "
        f"{runs} runs per variant, interleaved"
    )
    print("Per agent step, in ms. wall: elapsed (min is the least disturbed by other processes;")
    print("the median shows the load); cpu: this process's CPU time, all threads (median).")
    print(
        f"{'variant':44} {'wall min':>9} {'vs off':>7} {'wall med':>9} {'cpu med':>8} {'vs off':>7}"
    )
    base, cpu_base = min(times[0]), statistics.median(cpu[0])
    for (name, _, _), values, used in zip(specs, times, cpu, strict=True):
        low, med, spent = min(values), statistics.median(values), statistics.median(used)
        print(
            f"{name:44} {low / steps:9.2f} {(low - base) / steps:+7.2f} {med / steps:9.2f}"
            f" {spent / steps:8.2f} {(spent - cpu_base) / steps:+7.2f}"
        )
    print(
        f"spans per run with tracing: {1 + steps + 2 * rounds} "
        "(1 invoke_agent, 1 chat per step, 1 execute_tool per call)"
    )


# --- 2. the runner alone ----------------------------------------------------------------------


async def main(steps: int) -> None:
    exporter = InMemorySpanExporter()
    with_memory = TracerProvider()
    with_memory.add_span_processor(SimpleSpanProcessor(exporter))
    builtins = [
        RedactionHooks([r"sk-[A-Za-z0-9]{20,}", r"\b\d{3}-\d{2}-\d{4}\b"]),
        ToolPolicyHooks(
            {"rules": [{"tool": "web_fetch", "argument": "url_list", "domains": ["python.org"]}]}
        ),
    ]
    with tempfile.TemporaryDirectory() as folder:
        store = await AppStore.open(None, sqlite_path=Path(folder) / "app.db")
        variants: list[tuple[str, HookRunner, int]] = [
            ("no hooks (telemetry off)", HookRunner(), steps),
            (
                "tracing, SDK provider, no exporter",
                HookRunner([TracingHooks(TracerProvider())]),
                steps,
            ),
            ("tracing, in-memory exporter", HookRunner([TracingHooks(with_memory)]), steps),
            ("redaction + tool policy", HookRunner(builtins), steps),
            (
                "after_tool_round hook, SQLite ledger",
                HookRunner([RoundReminder()], ledger=StoreHookLedger(store)),
                max(200, steps // 50),
            ),
        ]
        rows: list[tuple[str, float]] = [
            ("no hooks, records skipped (runner.empty)", await measure_guarded(steps))
        ]
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
    parser.add_argument("--runs", type=int, default=12, help="real runs per variant (0: skip)")
    parser.add_argument("--rounds", type=int, default=20, help="tool rounds per real run")
    parser.add_argument("--steps", type=int, default=20_000, help="runner-only steps (0: skip)")
    args = parser.parse_args(argv)
    if args.runs:
        asyncio.run(real_runs(args.runs, args.rounds))
    if args.steps:
        print()
        asyncio.run(main(args.steps))


if __name__ == "__main__":
    cli()
