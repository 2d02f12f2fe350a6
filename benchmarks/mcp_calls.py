"""MCP tool-call overhead: server start-up and per-call latency through artifactflow's MCP
connection (owner task + queue + tapped transport) against the SDK's client used directly.

Uses the test suite's demo server (`tests/mcp_demo_server.py`) over stdio.

Run: `python benchmarks/mcp_calls.py [--calls 200]`
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from artifactflow.settings.mcp import McpServerConfig
from artifactflow.tools.mcp.connection import McpConnection

SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcp_demo_server.py"


async def timed_calls(call, count: int) -> list[float]:
    out = []
    for i in range(count):
        started = time.perf_counter()
        result = await call("echo", {"text": f"ping {i}"})
        out.append((time.perf_counter() - started) * 1000)
        if f"ping {i}" not in str(result):  # the outcome, not only the time
            raise AssertionError(f"echo {i} answered {str(result)[:200]}")
    return out


def report(label: str, start_ms: float, calls: list[float]) -> None:
    calls = sorted(calls)
    p95 = calls[int(len(calls) * 0.95) - 1]
    print(
        f"{label:<28} start {start_ms:7.0f} ms   call median {statistics.median(calls):6.2f} ms"
        f"   p95 {p95:6.2f} ms"
    )


async def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"AF_JOURNAL": str(Path(tmp) / "journal.txt")}
        started = time.perf_counter()
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=env)
        async with Client(stdio_client(params), cache=None) as client:
            start_ms = (time.perf_counter() - started) * 1000
            report("SDK client directly", start_ms, await timed_calls(client.call_tool, count))

        config = McpServerConfig(command=sys.executable, args=[str(SERVER)], env=env)
        connection = McpConnection("demo", config, config_dir=Path(tmp), log_dir=Path(tmp))
        started = time.perf_counter()
        await connection.start()
        start_ms = (time.perf_counter() - started) * 1000
        try:
            report(
                "artifactflow McpConnection", start_ms, await timed_calls(connection.call, count)
            )
        finally:
            await connection.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    asyncio.run(main(parser.parse_args().calls))
