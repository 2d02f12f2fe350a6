"""Long runs: prompt size, request bytes and time per round, compaction off vs on.

One agent fetches a 4 KB page per round for N rounds (default 300) against the scripted
OpenAI-compatible server over real HTTP, with no model latency. Two runs side by side:
- off: `context.compaction: false`, no window enforced: the prompt grows linearly;
- on: `context.compaction: true` and the server enforces `--window` tokens the way providers
  do (HTTP 400 above it): the prompt should stay bounded, with one extra model call per
  compaction.

The engine derives the graph's step limit from the agents' `max_tool_rounds`, so 300 rounds
run to the end. Per round: the prompt tokens the server counted, the request's bytes, and the
wall time per round since the previous row (the engine, the HTTP round trip and, with
compaction on, the summary calls in between). The closing lines count summary calls: one per
compaction.

Run: `python benchmarks/long_run.py [--rounds 300] [--window 8192] [--modes off,on]`
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from scripted_llm import Call, ScriptedLLM, Text, ToolCalls, request_tokens  # noqa: E402

from artifactflow import Client, load_settings, tool  # noqa: E402
from artifactflow.core.window.rounds import rounds_in  # noqa: E402
from artifactflow.core.window.summary import SUMMARY_SYSTEM  # noqa: E402

PAYLOAD_BYTES = 4096
CHARS_PER_TOKEN = 4.0
UNLIMITED = 10**9


@tool
def fetch_page(n: int) -> str:
    """Return a 4 KB page."""
    words = " ".join(f"w{(n * 31 + i) % 9973}" for i in range(PAYLOAD_BYTES // 4))
    return f"page {n}: {words}"[:PAYLOAD_BYTES]


def write_config(root: Path, *, compaction: bool, window: int) -> Path:
    config = root / "config"
    agents = config / "agents"
    agents.mkdir(parents=True)
    (agents / "lead_agent.md").write_text(
        "---\nname: lead_agent\nrole: lead\ntools: [fetch_page]\nmax_tool_rounds: 1000\n---\n"
        "You are the lead agent. Read the pages one by one.\n"
    )
    (config / "artifactflow.yaml").write_text(  # no run.recursion_limit: the engine derives it
        f"context:\n  compaction: {'true' if compaction else 'false'}\n  default_window: {window}\n"
        "checkpoints:\n  keep_completed: false\n"
    )
    return config


def script(llm: ScriptedLLM, rounds: int) -> None:
    def answer(request: dict[str, Any]) -> Any:
        messages = request.get("messages") or []
        if messages and messages[0].get("content") == SUMMARY_SYSTEM:
            return Text("Notes: pages read so far; nothing unusual found.")
        done = rounds_in(messages)
        if done >= rounds:
            return Text("done")
        return ToolCalls([Call("fetch_page", {"n": done + 1})])

    llm.route(answer)


async def run(mode: str, rounds: int, window: int) -> dict[str, Any]:
    compaction = mode == "on"
    server_window = window if compaction else UNLIMITED
    with (
        tempfile.TemporaryDirectory() as folder,
        ScriptedLLM(context_window=server_window, chars_per_token=CHARS_PER_TOKEN) as llm,
    ):
        root = Path(folder)
        os.environ["OPENAI_BASE_URL"] = llm.base_url
        os.environ["OPENAI_API_KEY"] = "benchmark-no-network"
        script(llm, rounds)
        started = time.perf_counter()
        config = write_config(root, compaction=compaction, window=window)
        client = await Client.open(load_settings(config, root / "data"), extra_tools=[fetch_page])
        try:
            result = await client.run(f"Read pages 1 to {rounds}.")
        finally:
            await client.aclose()
        status, outcome, error = result.status, result.outcome, result.error
        wall = time.perf_counter() - started
        requests, sizes, times = llm.requests, llm.request_sizes, llm.request_times
    per_round: dict[int, dict[str, Any]] = {}
    summaries = rejected = rounds_done = 0
    for body, size, at in zip(requests, sizes, times, strict=True):
        messages = body.get("messages") or []
        tokens = request_tokens(body, CHARS_PER_TOKEN)
        is_summary = bool(messages) and messages[0].get("content") == SUMMARY_SYSTEM
        if not is_summary:
            rounds_done = max(rounds_done, rounds_in(messages))  # results present in the request
        if tokens > server_window:
            rejected += 1
        elif is_summary:
            summaries += 1
        else:
            per_round[rounds_in(messages) + 1] = {"tokens": tokens, "bytes": size, "at": at}
    # the outcome and the number of calls: every round once, plus (with compaction) one summary
    # call per compaction and one refused request per overflow that triggered it
    expected = rounds + 1 + summaries + rejected
    if status != "completed" or rounds_done != rounds or len(requests) != expected:
        raise AssertionError(
            f"compaction {mode}: {status} ({error}) after {rounds_done} of {rounds} rounds; "
            f"{len(requests)} model calls, want {expected}"
        )
    if mode == "off" and (summaries or rejected):
        raise AssertionError(
            f"compaction off, yet {summaries} summary calls and {rejected} refusals"
        )
    return {
        "status": status,
        "outcome": outcome,
        "error": error,
        "wall_s": wall,
        "rounds_done": rounds_done,
        "per_round": per_round,
        "summaries": summaries,
        "rejected": rejected,
        "requests": len(requests),
    }


def cells(data: dict[str, Any], row: int, previous: int) -> str:
    per_round = data["per_round"]
    if row not in per_round:
        return f"{'—':>9} {'—':>9} {'—':>9}"
    now = per_round[row]
    before = per_round.get(previous)
    ms = f"{(now['at'] - before['at']) * 1000 / (row - previous):.1f}" if before else "—"
    return f"{now['tokens']:>9,} {now['bytes'] / 1024:>8.1f}K {ms:>9}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--modes", default="off,on")
    args = parser.parse_args()
    logging.disable(logging.ERROR)  # a failed run is reported in the table's closing lines
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    results = {mode: await run(mode, args.rounds, args.window) for mode in modes}
    print(
        f"{args.rounds} rounds, {PAYLOAD_BYTES}-byte tool results, no model latency; "
        f"'on' enforces a {args.window:,}-token window (HTTP 400 above it)\n"
    )
    head = " | ".join(
        f"{mode + ': prompt tok':>16} {'req bytes':>9} {'ms/round':>9}" for mode in modes
    )
    print(f"{'round':>5} | {head}")
    print("-" * (8 + len(head)))
    rows = sorted(
        {r for r in (1, 10, 25, 50, 100, 150, 200, 250, 300) if r <= args.rounds} | {args.rounds}
    )
    previous = 0
    for row in rows:
        line = " | ".join(f"{'':>7}{cells(results[mode], row, previous)}" for mode in modes)
        print(f"{row:>5} | {line}")
        previous = row
    print()
    for mode in modes:
        data = results[mode]
        extra = f", error: {data['error']}" if data["error"] else ""
        largest = max((r["tokens"] for r in data["per_round"].values()), default=0)
        print(
            f"{mode:>7}: {data['status']} ({data['outcome']}) after {data['rounds_done']} rounds in "
            f"{data['wall_s']:.1f} s; {data['requests']} requests, {data['summaries']} summary calls, "
            f"{data['rejected']} refused as over the window; largest prompt {largest:,} tokens{extra}"
        )


if __name__ == "__main__":
    asyncio.run(main())
