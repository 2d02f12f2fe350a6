"""The Agent Protocol path against the native API: server CPU for the same conversation.

One `artifactflow serve` process (SQLite), the peers' fake model in its own process (50 ms
per answer, 4 KB tool results). The same scripted conversation (one agent, `fetch_page` × 5,
then "done") runs C at a time, either

- native:   `POST /api/v1/chat`, then every event of `GET /api/v1/stream/{id}`; or
- protocol: `POST /threads`, then `POST /threads/{id}/runs/stream` with a stream mode
            (`values`, what a LangGraph client asks by default; `updates`, `messages-tuple`),

the two alternating, repeats. Measured: the serve process's CPU (user + system, /proc) over
each batch, per conversation, and the protocol ÷ native ratio per repeat. Every batch must
make exactly C × 6 model calls with C final answers and intact tool results (the fake model
counts), every native stream must end with `complete` and every protocol run must be stored
as `success` with "done" as its thread's last message (read after the measured window), so a
change in behaviour fails instead of passing for a change in speed.

Run: `python benchmarks/protocol_overhead.py [--conversations 20] [--repeats 3]
[--modes values,updates]` (Linux: reads /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import concurrency as bench  # noqa: E402 - the fake model, the config, serve and /proc readers

LATENCY = 0.05


async def native(client: Any, url: str) -> str:
    return await bench.http_conversation(client, url, 0)


async def protocol(client: Any, url: str, mode: str) -> str:
    """One protocol run; its thread id (checked after the window), or a failure text."""
    try:
        created = await client.post(url + "/threads", json={})
        if created.status_code != 200:
            return f"!POST /threads {created.status_code}"
        thread_id = created.json()["thread_id"]
        body = {
            "assistant_id": "agent",
            "input": {"messages": [{"role": "user", "content": bench.TASK}]},
            "stream_mode": mode,
        }
        last = None
        async with client.stream("POST", f"{url}/threads/{thread_id}/runs/stream", json=body) as response:
            if response.status_code != 200:
                return f"!runs/stream {response.status_code}"
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    last = line[7:]
        if last in ("error", None):
            return f"!stream ended with {last}"
        return thread_id
    except Exception as exc:
        return f"!{type(exc).__name__}: {exc}"


async def check_protocol(client: Any, url: str, thread_ids: list[str]) -> list[str]:
    """The failures among protocol runs: a run not `success`, a thread not ending in "done"."""
    failures = []
    for thread_id in thread_ids:
        runs = (await client.get(f"{url}/threads/{thread_id}/runs")).json()
        state = (await client.get(f"{url}/threads/{thread_id}/state")).json()
        messages = state["values"].get("messages") or []
        answer = messages[-1].get("content") if messages else None
        if [r["status"] for r in runs] != ["success"] or answer != bench.ANSWER:
            failures.append(f"{thread_id}: runs {[r['status'] for r in runs]}, answer {answer!r}")
    return failures


async def batch(
    client: Any, url: str, pid: int, base_url: str, path: str, count: int
) -> dict[str, Any]:
    """`count` conversations at once through `path` ("native" or "protocol:<mode>"): the
    server's CPU seconds over the batch; fails on any wrong outcome."""
    before = bench.model_stats(base_url)
    cpu = bench.process_cpu(pid)
    if path == "native":
        outcomes = await asyncio.gather(*(native(client, url) for _ in range(count)))
    else:
        mode = path.split(":", 1)[1]
        outcomes = await asyncio.gather(*(protocol(client, url, mode) for _ in range(count)))
    spent = (bench.process_cpu(pid) or 0.0) - (cpu or 0.0)
    after = bench.model_stats(base_url)
    bench.check_model_saw(path, count, 0, before, after)
    if path == "native":
        failures = [o for o in outcomes if o != "completed"]
    else:
        failures = [o for o in outcomes if o.startswith("!")]
        failures += await check_protocol(client, url, [o for o in outcomes if not o.startswith("!")])
    if failures:
        raise AssertionError(f"{path}: {len(failures)} of {count} failed: {failures[:3]}")
    return {"cpu": spent}


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="values,updates", help="protocol stream modes")
    args = parser.parse_args()
    import httpx

    paths = ["native", *(f"protocol:{m}" for m in args.modes.split(","))]
    model = bench.spawn_model()
    cpus: dict[str, list[float]] = {p: [] for p in paths}
    try:
        base_url = model.stdout.readline().strip()  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as folder:
            config = bench.write_config(Path(folder), None)
            procs, urls = await bench.start_servers(config, Path(folder) / "data", base_url, 1)
            server, url = procs[0], urls[0]
            try:
                limits = httpx.Limits(max_connections=args.conversations * 2 + 10)
                async with httpx.AsyncClient(timeout=300, limits=limits) as client:
                    for path in paths:  # warm-up: every route's first call, at no latency
                        await batch(client, url, server.pid, base_url, path, 1)
                    bench.set_latency(base_url, LATENCY)
                    for repeat in range(args.repeats):
                        k = repeat % len(paths)
                        for path in paths[k:] + paths[:k]:
                            result = await batch(
                                client, url, server.pid, base_url, path, args.conversations
                            )
                            cpus[path].append(result["cpu"])
                            print(
                                f"  repeat {repeat + 1}, {path:<24} server CPU {result['cpu']:6.2f} s",
                                file=sys.stderr, flush=True,
                            )
            finally:
                server.terminate()
                try:
                    server.wait(60)
                except subprocess.TimeoutExpired:  # a busy machine: it gets a minute to stop
                    server.kill()
                    server.wait()
    finally:
        model.stdin.close()  # type: ignore[union-attr]  # the model server stops with its stdin
        model.wait(10)
    count = args.conversations
    print(
        f"\n{count} conversations at once × {bench.ROUNDS} tool rounds, {LATENCY * 1000:.0f} ms "
        f"model, one serve process (SQLite); server CPU per conversation, median of "
        f"{args.repeats} interleaved repeats (range), and ÷ native per repeat\n"
    )
    native_cpus = cpus["native"]
    for path in paths:
        per = [c * 1000 / count for c in cpus[path]]
        ratios = [c / n for c, n in zip(cpus[path], native_cpus, strict=True) if n > 0]
        ratio = (
            "" if path == "native"
            else f"  ÷ native {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"
        )
        print(f"  {path:<24} {statistics.median(per):7.1f} ms ({min(per):.1f}–{max(per):.1f}){ratio}")
    print(json.dumps({p: [round(c, 3) for c in v] for p, v in cpus.items()}), file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
