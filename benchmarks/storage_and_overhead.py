"""Storage and orchestration overhead, against a deliberately naive design in the same run.

With a zero-latency in-process model and a tool returning 4 KB, for N tool rounds:
- checkpoint-store bytes (after a WAL checkpoint), bytes per payload byte, ms per graph step,
  for artifactflow's graph and for a naive graph whose nodes return the whole state;
- app-store bytes per payload byte (the event log is the durable record);
- total data-folder bytes after M completed messages (growth must be linear).

Run: `python benchmarks/storage_and_overhead.py [--rounds 10,50,100,200] [--messages 100]`
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

os.environ.setdefault("OPENAI_API_KEY", "benchmark-no-network")

from pages import PAYLOAD_BYTES  # noqa: E402
from pages import page as payload

from artifactflow import Client, load_settings, tool  # noqa: E402
from artifactflow.agents.model import ModelRequest, Reply, ScriptedModel, ToolCall, Usage  # noqa: E402


@tool
def fetch_page(n: int) -> str:
    """Return a 4 KB page."""
    return payload(n)


def instant_model(rounds: int) -> ScriptedModel:
    """Answers at once: `rounds` tool calls, then a final text."""

    def answer(request: ModelRequest) -> Reply:
        n = sum(1 for m in request.messages if m.get("role") == "tool")
        if n < rounds:
            call = ToolCall("fetch_page", {"n": n}, id=f"call_{n}")
            return Reply(tool_calls=[call], usage=Usage(10, 5), model="instant")
        return Reply("done", usage=Usage(10, 1), model="instant")

    return ScriptedModel(function=answer)


def write_config(root: Path) -> Path:
    agents = root / "config" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead_agent.md").write_text(
        "---\nname: lead_agent\nrole: lead\ntools: [fetch_page]\nmax_tool_rounds: 1000\n---\nBenchmark lead.\n"
    )
    # The in-process ScriptedModel declares no context window, so the default one (32k tokens)
    # would apply and compaction would turn a 200-round run into summary rounds: give it a
    # long-context window instead (`checked` also counts the model calls).
    (root / "config" / "artifactflow.yaml").write_text(
        "run:\n  recursion_limit: 5000\ncontext:\n  default_window: 4000000\n"
    )
    return root / "config"


async def checked(client: Client, rounds: int, text: str) -> None:
    """One message of `rounds` tool rounds, which must answer "done" after rounds + 1 calls."""
    model = instant_model(rounds)
    client.admin.services.use_model(model)
    result = await client.run(text)
    if (
        result.status != "completed"
        or result.response != "done"
        or len(model.requests) != rounds + 1
    ):
        raise AssertionError(
            f"{rounds}-round message: {result.status} ({result.error}), answer {result.response!r}, "
            f"{len(model.requests)} model calls (want {rounds + 1})"
        )


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def ours(rounds: int, root: Path) -> dict[str, float]:
    config = write_config(root)
    settings = load_settings(config, root / "data")
    client = await Client.open(settings, extra_tools=[fetch_page])
    # warm up connections and code paths; its checkpoints are deleted as usual
    await checked(client, 1, "warm-up")
    settings.checkpoints.keep_completed = True  # measure what a run leaves before cleanup
    data = root / "data"
    async with client.admin.store.engine.connect() as conn:
        await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    empty_app = size_of(data / "artifactflow.db")  # schema + warm-up: not this run's payload
    try:
        started = time.perf_counter()
        await checked(client, rounds, "benchmark")
        elapsed = time.perf_counter() - started
        await client.admin.checkpoints.wal_checkpoint()
        async with client.admin.store.engine.connect() as conn:
            await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        await client.aclose()
    steps = 2 * rounds + 1
    return {
        "checkpoint_bytes": size_of(data / "checkpoints.db"),
        "app_bytes": size_of(data / "artifactflow.db") - empty_app,
        "ms_per_step": elapsed * 1000 / steps,
    }


class NaiveState(TypedDict):
    messages: list[dict[str, Any]]
    rounds: int
    target: int


async def naive(rounds: int, root: Path) -> dict[str, float]:
    """Nodes return the whole state; message history is a plain channel."""

    async def agent(state: NaiveState) -> NaiveState:
        messages = list(state["messages"])
        if state["rounds"] < state["target"]:
            messages.append({"role": "assistant", "tool_calls": [{"id": str(state["rounds"])}]})
        else:
            messages.append({"role": "assistant", "content": "done"})
        return {**state, "messages": messages}

    async def tools(state: NaiveState) -> NaiveState:
        messages = [*state["messages"], {"role": "tool", "content": payload(state["rounds"])}]
        return {**state, "messages": messages, "rounds": state["rounds"] + 1}

    def route(state: NaiveState) -> str:
        return "tools" if state["messages"][-1].get("tool_calls") else END

    builder = StateGraph(NaiveState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    path = root / "naive.db"
    async with aiosqlite.connect(path) as conn:
        await conn.execute("PRAGMA journal_mode=WAL")
        saver = AsyncSqliteSaver(conn)
        graph = builder.compile(checkpointer=saver)
        started = time.perf_counter()
        final = await graph.ainvoke(
            {"messages": [{"role": "user", "content": "go"}], "rounds": 0, "target": rounds},
            {"configurable": {"thread_id": "t"}, "recursion_limit": 10_000},
            durability="sync",
        )
        elapsed = time.perf_counter() - started
        if final["rounds"] != rounds or final["messages"][-1].get("content") != "done":
            raise AssertionError(f"naive graph: {final['rounds']} rounds, want {rounds}")
        await conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"checkpoint_bytes": size_of(path), "ms_per_step": elapsed * 1000 / (2 * rounds + 1)}


async def growth(messages: int, rounds: int, root: Path) -> list[tuple[int, int]]:
    config = write_config(root)
    client = await Client.open(load_settings(config, root / "data"), extra_tools=[fetch_page])
    points: list[tuple[int, int]] = []
    try:
        for i in range(1, messages + 1):
            await checked(client, rounds, f"message {i}")
            if i % max(1, messages // 4) == 0:
                await client.admin.checkpoints.wal_checkpoint()
                async with client.admin.store.engine.connect() as conn:
                    await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                total = sum(p.stat().st_size for p in (root / "data").iterdir())
                points.append((i, total))
    finally:
        await client.aclose()
    return points


async def as_left(rounds: int, messages: int, root: Path) -> dict[str, int]:
    """The data folder as the engine leaves it (no checkpoint forced by this script): the
    largest WAL files seen while one `rounds`-round message runs (sampled every 5 ms), and
    the folder after it and after `messages` more five-round messages."""
    config = write_config(root)
    data = root / "data"
    client = await Client.open(load_settings(config, data), extra_tools=[fetch_page])
    peak = {"checkpoints.db-wal": 0, "artifactflow.db-wal": 0}
    running = True

    async def sample() -> None:
        while running:
            for name in peak:
                path = data / name
                if path.exists():
                    peak[name] = max(peak[name], path.stat().st_size)
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    try:
        await checked(client, rounds, "long")
        running = False
        await sampler
        after_long = sum(p.stat().st_size for p in data.iterdir())
        for i in range(messages):
            await checked(client, 5, f"short {i}")
        after_all = sum(p.stat().st_size for p in data.iterdir())
    finally:
        running = False
        await client.aclose()
    return {
        "ckpt_wal_peak": peak["checkpoints.db-wal"],
        "app_wal_peak": peak["artifactflow.db-wal"],
        "after_long": after_long,
        "after_all": after_all,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", default="10,50,100,200")
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--rounds-per-message", type=int, default=5)
    args = parser.parse_args()
    counts = [int(x) for x in args.rounds.split(",")]
    print(f"payload per tool result: {PAYLOAD_BYTES} bytes; zero-latency in-process model\n")
    header = (
        f"{'rounds':>6} | {'ckpt bytes':>11} {'x payload':>9} {'ms/step':>8} | "
        f"{'app growth':>10} {'x payload':>9} | {'naive bytes':>12} {'x payload':>9} {'ms/step':>8} | "
        f"{'bytes ratio':>11} {'time ratio':>10}"
    )
    print(header)
    print("-" * len(header))
    for n in counts:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            mine = await ours(n, Path(a))
            base = await naive(n, Path(b))
        load = n * PAYLOAD_BYTES
        print(
            f"{n:>6} | {mine['checkpoint_bytes']:>11,} {mine['checkpoint_bytes'] / load:>9.2f} "
            f"{mine['ms_per_step']:>8.2f} | {mine['app_bytes']:>10,} {mine['app_bytes'] / load:>9.2f} | "
            f"{base['checkpoint_bytes']:>12,} {base['checkpoint_bytes'] / load:>9.2f} "
            f"{base['ms_per_step']:>8.2f} | {base['checkpoint_bytes'] / mine['checkpoint_bytes']:>10.1f}x "
            f"{base['ms_per_step'] / mine['ms_per_step']:>9.2f}x"
        )
        sys.stdout.flush()
    with tempfile.TemporaryDirectory() as d:
        left = await as_left(max(counts), args.messages, Path(d))
    long_load = max(counts) * PAYLOAD_BYTES
    all_load = long_load + args.messages * 5 * PAYLOAD_BYTES
    print(
        f"\nas the engine leaves it (no forced WAL checkpoint): one {max(counts)}-round message, "
        f"then {args.messages} five-round messages\n"
        f"  peak WAL during the long run: checkpoints {left['ckpt_wal_peak']:,} bytes, "
        f"app store {left['app_wal_peak']:,} bytes\n"
        f"  data folder after the long run: {left['after_long']:,} bytes "
        f"({left['after_long'] / long_load:.2f}x its payload)\n"
        f"  data folder after all: {left['after_all']:,} bytes ({left['after_all'] / all_load:.2f}x the payload)"
    )
    print(
        f"\ndata folder after completed messages ({args.rounds_per_message} rounds of 4 KB each; "
        "checkpoints deleted on completion):"
    )
    with tempfile.TemporaryDirectory() as c:
        points = await growth(args.messages, args.rounds_per_message, Path(c))
    per_message_payload = args.rounds_per_message * PAYLOAD_BYTES
    previous = (0, 0)
    for count, total in points:
        step = (total - previous[1]) / (count - previous[0])
        print(
            f"  {count:>4} messages: {total:>11,} bytes  (+{step:>8,.0f} per message since the "
            f"last line = {step / per_message_payload:.2f}x its payload)"
        )
        previous = (count, total)


if __name__ == "__main__":
    asyncio.run(main())
