"""Throughput under load: C conversations × 5 tool rounds against a 50 ms model, at once.

Every conversation makes 6 model calls (5 tool rounds, then the answer), so the ideal wall
time is 0.3 s whatever C is; `× ideal` says how far the engine is from it. Each setup runs in
fresh processes on a fresh data folder (or PostgreSQL database):

- api:  the Python API (`Client.run`), C runs concurrently in one process;
        with 2 workers, two processes take half the conversations each (started together);
        worker CPU s is the workers' own CPU time (every thread) over the measured window,
        worker walls each worker's own wall time from its start to its last conversation's end;
- http: `artifactflow serve` processes (1 or 2 workers, each its own port); this script posts
        `POST /api/v1/chat` and reads every event of `GET /api/v1/stream/{id}` to the end.

The model is `fake_model.py` (the peers benchmark's raw-asyncio OpenAI-compatible server) in its
own process, answering each request after 50 ms; the task is "Read pages 1 to 5.", each
round one `fetch_page` call returning 4 KB. The run fails unless the model saw exactly 6 calls,
one final answer and intact tool results per conversation. Everything shares the 2-core
machine, the model server and (for http) this client included. An error is a conversation that did
not end `completed` (or a failed request). All rows are measured in one run, so their ratios are
comparable; with `--repeats N` the setups run N times, interleaved: each row shows its median
run, and each ratio is the median (and range) of the ratios within one repeat.

Where the CPU goes (Linux, from /proc, over each measured window): `pg CPU s` is every PostgreSQL
process of the machine (its server, backends and background workers, ended backends included),
`model CPU s` the fake model's. Two workers can only beat one by as much as the cores they have
left over allow: `2 × wall(1) ÷ CPU of everyone(2)` bounds the 2 ÷ 1 ratio, and the `machine`
row measures the machine itself: the same pure-Python work in one process, then in two at once
(on a shared virtual machine two busy processes often get well under two cores' worth).

Run: `python benchmarks/concurrency.py [--conversations 1,10,50,100] [--setups ...] [--repeats N]`
(setups: api-sqlite-1, api-pg-1, api-pg-2, http-sqlite-1, http-pg-1, http-pg-2; the pg ones
need PostgreSQL at `ARTIFACTFLOW_TEST_PG_URL`, default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROUNDS = 5
LATENCY = 0.05
IDEAL = (ROUNDS + 1) * LATENCY
ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("ARTIFACTFLOW_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
SETUPS = ["api-sqlite-1", "api-pg-1", "api-pg-2", "http-sqlite-1", "http-pg-1", "http-pg-2"]

BENCHMARKS = Path(__file__).resolve().parent
TOOLS_PY = f'''
import sys

sys.path.insert(0, {str(BENCHMARKS)!r})
from fake_model import page

from artifactflow import tool


@tool
def fetch_page(n: int) -> str:
    """Fetch one page.

    Args:
        n: Page number.
    """
    return page(n)
'''
TASK = f"Read pages 1 to {ROUNDS}."
ANSWER = "done"


# --- the model server (its own process) ---------------------------------------------------


def spawn_model() -> subprocess.Popen[str]:
    """`fake_model.py` in its own process: raw asyncio, HTTP/1.1 keep-alive, so the model's
    own CPU and connection churn stay small beside what is measured (the scripted test server
    opened a thread and a TCP connection per request: 14 % of a core at 100 conversations)."""
    return subprocess.Popen(
        [sys.executable, str(BENCHMARKS / "fake_model.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def model_stats(base_url: str) -> dict[str, Any]:
    """The fake model's counters: requests, final answers, damaged tool results."""
    import httpx

    return httpx.get(base_url.removesuffix("/v1") + "/stats").json()


def set_latency(base_url: str, seconds: float) -> None:
    import httpx

    url = base_url.removesuffix("/v1") + "/delay"
    httpx.post(url, json={"seconds": seconds}).raise_for_status()


# --- where the CPU goes (Linux /proc) ------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: str) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on: the command name may hold spaces and brackets."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def postgres_cpu() -> float | None:
    """CPU seconds spent so far by every PostgreSQL process of the machine: each live process's
    own, plus the server's ended children (backends of pools already closed), which the kernel
    adds to the server when it reaps them. None where there is no /proc or no PostgreSQL."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    found: dict[str, list[str]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
        except OSError:
            continue
        fields = _stat_fields(entry.name)
        if fields is not None:
            found[entry.name] = fields
    ticks = 0
    for fields in found.values():  # fields[1] = ppid, [11..14] = utime, stime, cutime, cstime
        ticks += int(fields[11]) + int(fields[12])
        if fields[1] not in found:  # the server itself
            ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK if found else None


def process_cpu(pid: int) -> float | None:
    fields = _stat_fields(str(pid))
    return (int(fields[11]) + int(fields[12])) / TICK if fields else None


class CpuMeter:
    """PostgreSQL's and the model server's CPU seconds over one measured window."""

    def __init__(self, model_pid: int) -> None:
        self.model_pid = model_pid
        self.started: tuple[float | None, float | None] = (None, None)

    def _now(self) -> tuple[float | None, float | None]:
        return postgres_cpu(), process_cpu(self.model_pid)

    def start(self) -> None:
        self.started = self._now()

    def stop(self) -> dict[str, float]:
        ended, out = self._now(), {}
        for key, before, after in zip(("pg_cpu", "model_cpu"), self.started, ended, strict=True):
            if before is not None and after is not None:
                out[key] = after - before
        return out


SPIN = "x = 0\nfor i in range({n}):\n    x += i * i % 7\n"
SPIN_N = 8_000_000


def machine_scaling() -> dict[str, float]:
    """The machine's own 2-process scaling: the same pure-Python work (no I/O, no shared state)
    in one process, then in two at once. `ratio` = 2 × one ÷ two; 2.0 on two idle cores."""

    def timed(processes: int) -> float:
        started = time.perf_counter()
        procs = [
            subprocess.Popen([sys.executable, "-c", SPIN.format(n=SPIN_N)])
            for _ in range(processes)
        ]
        for proc in procs:
            proc.wait()
        return time.perf_counter() - started

    one, two = timed(1), timed(2)
    return {"one": one, "two": two, "ratio": 2 * one / two}


# --- setup helpers ---------------------------------------------------------------------------


def write_config(root: Path, database_url: str | None) -> Path:
    config = root / "config"
    (config / "agents").mkdir(parents=True)
    (config / "agents" / "lead_agent.md").write_text(
        "---\nname: lead_agent\nrole: lead\ntools: [fetch_page]\n---\nRead the pages, then answer.\n"
    )
    (config / "bench_tools.py").write_text(TOOLS_PY)
    lines = [
        "plugins: [bench_tools]",
        "permissions: {fetch_page: auto}",
        "run:\n  max_concurrent_runs: 1000",
        "llm:\n  max_retries: 0",
        # the fake model declares no window; 5 rounds of 4 KB stay far below this one
        "context:\n  default_window: 32768",
    ]
    if database_url:
        lines.append(f"database_url: {database_url}")
    (config / "artifactflow.yaml").write_text("\n".join(lines) + "\n")
    return config


async def fresh_pg() -> str:
    import asyncpg

    admin = await asyncpg.connect(PG_ADMIN)
    name = f"af_bench_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    return f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}"


async def drop_pg(url: str) -> None:
    import asyncpg

    admin = await asyncpg.connect(PG_ADMIN)
    await admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    await admin.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env_for(base_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OPENAI_BASE_URL=base_url, OPENAI_API_KEY="benchmark-no-network", ARTIFACTFLOW_DEBUG="0"
    )
    return env


# --- api workers ---------------------------------------------------------------------------


async def api_worker(config: str, data: str, count: int) -> None:
    """Open a client, warm up, say ready, wait for go, run `count` conversations."""
    import logging

    from artifactflow import Client, load_settings

    logging.disable(logging.WARNING)
    client = await Client.open(load_settings(config, data))
    try:
        await client.run(TASK)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        started, cpu_started = time.time(), time.process_time()

        async def one(i: int) -> str:
            try:
                result = await client.run(TASK)
                if result.status == "completed" and result.response != ANSWER:
                    return f"answered {result.response!r}"
                return result.status
            except Exception as exc:  # counted as an error
                return f"{type(exc).__name__}: {exc}"

        statuses = await asyncio.gather(*(one(i) for i in range(count)))
        ended, cpu = time.time(), time.process_time() - cpu_started
    finally:
        await client.aclose()
    errors = [s for s in statuses if s != "completed"]
    print(
        json.dumps(
            {
                "start": started,
                "end": ended,
                "cpu": cpu,
                "errors": len(errors),
                "sample": errors[:3],
            }
        ),
        flush=True,
    )


async def run_api(
    config: Path, data: Path, base_url: str, conversations: int, workers: int, meter: CpuMeter
) -> dict[str, Any]:
    shares = [
        conversations // workers + (1 if i < conversations % workers else 0) for i in range(workers)
    ]
    procs = []
    for i, share in enumerate(shares):  # one after another: the first creates the schema
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--api-worker",
            str(config),
            str(data / f"w{i}"),
            str(share),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env_for(base_url),
        )
        line = (await proc.stdout.readline()).decode().strip()  # type: ignore[union-attr]
        if line != "ready":
            raise RuntimeError(f"api worker did not start: {line!r}")
        procs.append(proc)
    meter.start()
    for proc in procs:
        proc.stdin.write(b"go\n")  # type: ignore[union-attr]
        await proc.stdin.drain()  # type: ignore[union-attr]
    results = []
    for proc in procs:
        out, _ = await proc.communicate()
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    spent = meter.stop()
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {
        **spent,
        "wall": wall,
        "cpu": sum(r["cpu"] for r in results),
        "walls": [r["end"] - r["start"] for r in results],
        "errors": sum(r["errors"] for r in results),
        "sample": sum((r["sample"] for r in results), []),
    }


# --- http workers --------------------------------------------------------------------------


def spawn_server(config: Path, data: Path, base_url: str, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "artifactflow"),
            "--config-dir",
            str(config),
            "--data-dir",
            str(data),
            "serve",
            "--port",
            str(port),
        ],
        env=env_for(base_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def start_servers(
    config: Path, data: Path, base_url: str, workers: int
) -> tuple[list[Any], list[str]]:
    import httpx

    procs, urls = [], []
    async with httpx.AsyncClient() as client:
        for _ in range(workers):  # one after another: the first creates the schema
            port = free_port()
            proc = spawn_server(config, data, base_url, port)
            url = f"http://127.0.0.1:{port}"
            procs.append(proc)
            urls.append(url)
            for _ in range(600):
                if proc.poll() is not None:
                    raise RuntimeError(f"server {url} exited with {proc.returncode}")
                try:
                    if (await client.get(url + "/api/v1/conversations")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
    return procs, urls


async def http_conversation(client: Any, url: str, i: int) -> str:
    try:
        posted = await client.post(url + "/api/v1/chat", json={"content": TASK})
        if posted.status_code != 202:
            return f"POST {posted.status_code}"
        last = None
        stream_url = url + "/api/v1/stream/" + posted.json()["message_id"]
        async with client.stream("GET", stream_url) as response:
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    last = line[7:]
        return "completed" if last == "complete" else f"ended with {last}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


async def run_http(urls: list[str], conversations: int, meter: CpuMeter) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(max_connections=conversations * 2 + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        for url in urls:  # warm-up
            await http_conversation(client, url, -1)
        meter.start()
        started = time.time()
        statuses = await asyncio.gather(
            *(http_conversation(client, urls[i % len(urls)], i) for i in range(conversations))
        )
        wall = time.time() - started
        spent = meter.stop()
    errors = [s for s in statuses if s != "completed"]
    return {**spent, "wall": wall, "errors": len(errors), "sample": errors[:3]}


# --- driver --------------------------------------------------------------------------------


async def measure(setup: str, conversations: int, base_url: str, meter: CpuMeter) -> dict[str, Any]:
    kind, backend, workers_text = setup.split("-")
    workers = int(workers_text)
    pg = await fresh_pg() if backend == "pg" else None
    try:
        with tempfile.TemporaryDirectory() as folder:
            config = write_config(Path(folder), pg)
            data = Path(folder) / "data"
            if kind == "api":
                return await run_api(config, data, base_url, conversations, workers, meter)
            procs, urls = await start_servers(config, data, base_url, workers)
            try:
                return await run_http(urls, conversations, meter)
            finally:
                for proc in procs:
                    proc.terminate()
                for proc in procs:
                    proc.wait(10)
    finally:
        if pg:
            await drop_pg(pg)


def check_model_saw(
    setup: str, count: int, workers: int, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """Every conversation and each worker's warm-up made ROUNDS + 1 calls, reached its final
    answer and sent intact 4 KB tool results: a change in behaviour fails the run."""
    ran = count + workers
    calls = after["requests"] - before["requests"]
    answers = after["answers"] - before["answers"]
    bad = after["bad"] - before["bad"]
    if calls != ran * (ROUNDS + 1) or answers != ran or bad:
        raise AssertionError(
            f"{setup} ×{count}: {calls} model calls, {answers} final answers, {bad} damaged tool "
            f"results; want {ran * (ROUNDS + 1)} calls and {ran} answers ({count} conversations "
            f"and {workers} warm-ups × {ROUNDS + 1}) ({after['bad_sample'] or 'no damage'})"
        )


def median_run(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median wall time (the lower middle one for an even count): its figures
    stay together, so a row never mixes one run's wall with another's CPU."""
    ordered = sorted(results, key=lambda r: (r["wall"] != r["wall"], r["wall"]))  # NaN last
    return ordered[(len(ordered) - 1) // 2]


def paired(
    runs: dict[tuple[str, int], list[dict[str, Any]]], a: str, b: str, count: int
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Rows a and b of the same repeats: on a shared machine whose speed drifts over minutes,
    a ratio of neighbours is steadier than a ratio of medians taken far apart."""
    return list(zip(runs.get((a, count), []), runs.get((b, count), []), strict=False))


def spread(values: list[float]) -> str:
    """The median, and the range when there are several."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def seconds(result: dict[str, Any], key: str) -> str:
    return f"{result[key]:.2f}" if key in result else "–"


def everyone_cpu(result: dict[str, Any]) -> float | None:
    """CPU seconds of every process of a run: its workers, PostgreSQL and the model server."""
    keys = ("cpu", "pg_cpu", "model_cpu")
    return sum(result[k] for k in keys) if all(k in result for k in keys) else None


def cpu_per_conversation(runs: dict[tuple[str, int], list[dict[str, Any]]], counts: list[int]) -> str:
    """Efficiency, which two shared cores can show where wall-clock scaling cannot: CPU ms
    per conversation by process kind (medians over repeats), and the two-worker ÷ one-worker
    ratio of everyone's CPU per conversation (median and range of per-repeat pairs)."""
    rows = [
        "\nCPU per conversation (ms; median of repeats): workers, PostgreSQL, model server, everyone"
        "\n\n| setup | conversations | workers | pg | model | everyone |\n|---|---:|---:|---:|---:|---:|"
    ]
    for (setup, count), results in runs.items():
        full = [r for r in results if everyone_cpu(r) is not None]
        if not full:
            continue

        def per(key: str, full: list[dict[str, Any]] = full, count: int = count) -> str:
            return f"{statistics.median(r[key] for r in full) * 1000 / count:.1f}"

        total = statistics.median(everyone_cpu(r) or 0.0 for r in full) * 1000 / count
        rows.append(
            f"| {setup} | {count} | {per('cpu')} | {per('pg_cpu')} | {per('model_cpu')} "
            f"| {total:.1f} |"
        )
    for one, two in (("api-pg-1", "api-pg-2"), ("http-pg-1", "http-pg-2")):
        for count in counts:
            ratios = [
                (everyone_cpu(b) or 0.0) / (everyone_cpu(a) or 1.0)
                for a, b in paired(runs, one, two, count)
                if everyone_cpu(a) and everyone_cpu(b)
            ]
            if ratios:
                rows.append(
                    f"\n{two} ÷ {one}, everyone's CPU per conversation at {count}: "
                    f"{spread(ratios)} (target ≤ 1.1)"
                )
    return "\n".join(rows)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", default="1,10,50,100")
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--repeats", type=int, default=1, help="interleaved repeats (medians)")
    args = parser.parse_args()
    counts = [int(x) for x in args.conversations.split(",")]
    setups = [s.strip() for s in args.setups.split(",") if s.strip()]
    unknown = sorted(set(setups) - set(SETUPS))
    if unknown or args.repeats < 1:
        sys.exit(f"unknown setups {unknown} (choose from {SETUPS})" if unknown else "--repeats ≥ 1")
    two_workers = any(s.endswith("-2") for s in setups)
    model = spawn_model()
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    machine: list[dict[str, float]] = []
    try:
        base_url = model.stdout.readline().strip()  # type: ignore[union-attr]
        set_latency(base_url, LATENCY)
        meter = CpuMeter(model.pid)
        for repeat in range(args.repeats):
            for setup in setups:
                for count in counts:
                    before = model_stats(base_url)
                    try:
                        result = await measure(setup, count, base_url, meter)
                    except Exception as exc:  # a setup that cannot run is a row of errors
                        result = {
                            "wall": float("nan"),
                            "errors": count,
                            "sample": [repr(exc)[:200]],
                        }
                    else:  # every conversation (and each worker's warm-up) makes ROUNDS + 1 calls
                        after, workers = model_stats(base_url), int(setup.rsplit("-", 1)[1])
                        check_model_saw(setup, count, workers, before, after)
                    runs.setdefault((setup, count), []).append(result)
                    print(
                        f"  repeat {repeat + 1}, {setup} ×{count}: {result['wall']:.2f} s, "
                        f"errors {result['errors']} {result['sample']}",
                        file=sys.stderr,
                        flush=True,
                    )
            if two_workers:
                machine.append(machine_scaling())
                print(
                    f"  repeat {repeat + 1}, machine: one {machine[-1]['one']:.2f} s, two at once "
                    f"{machine[-1]['two']:.2f} s → {machine[-1]['ratio']:.2f}×",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        model.stdin.close()  # type: ignore[union-attr]  # the model server stops with its stdin
        model.wait(10)
    by = {key: median_run(results) for key, results in runs.items()}
    shown = "the median run of" if args.repeats > 1 else "one run"
    print(
        f"\n{ROUNDS} tool rounds per conversation, {LATENCY * 1000:.0f} ms model, ideal {IDEAL:.2f} s; "
        f"{shown} {args.repeats} per row\n"
    )
    print(
        "| setup | conversations | wall s | × ideal | rounds/s | worker CPU s | pg CPU s "
        "| model CPU s | worker walls s | errors |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for (setup, count), result in by.items():
        rate = count * ROUNDS / result["wall"]
        walls = " / ".join(f"{w:.2f}" for w in result.get("walls", [])) or "–"
        print(
            f"| {setup} | {count} | {result['wall']:.2f} | {result['wall'] / IDEAL:.1f} | {rate:.0f} "
            f"| {seconds(result, 'cpu')} | {seconds(result, 'pg_cpu')} "
            f"| {seconds(result, 'model_cpu')} | {walls} | {result['errors']} |"
        )
    top = max(counts)
    pairs = [
        ("api-pg-1", "api-sqlite-1"),
        ("http-pg-1", "http-sqlite-1"),
        ("api-pg-1", "api-pg-2"),
        ("http-pg-1", "http-pg-2"),
        ("http-sqlite-1", "api-sqlite-1"),
    ]
    lines = [
        f"| {a} / {b} | {spread([x['wall'] / y['wall'] for x, y in paired(runs, a, b, top)])} |"
        for a, b in pairs
        if (a, top) in runs and (b, top) in runs
    ]
    bounds = [
        2 * one["wall"] / (two["cpu"] + two["pg_cpu"] + two["model_cpu"])
        for one, two in paired(runs, "api-pg-1", "api-pg-2", top)
        if all(k in two for k in ("cpu", "pg_cpu", "model_cpu"))
    ]
    if bounds:
        lines.append(
            "| bound for api-pg-1 / api-pg-2 on two cores: 2 × wall(api-pg-1) ÷ CPU of "
            f"everyone in api-pg-2 | {spread(bounds)} |"
        )
    if machine:
        lines.append(
            "| machine: pure-Python work, 2 processes at once ÷ 1 "
            f"| {spread([m['ratio'] for m in machine])} |"
        )
    print(cpu_per_conversation(runs, counts))
    if lines:
        many = f" (median of {args.repeats} repeats, each pair from one repeat; range)"
        print(
            f"\nwall-time ratios at {top} conversations{many if args.repeats > 1 else ''}"
            "\n\n| ratio | value |\n|---|---:|"
        )
        print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--api-worker":
        asyncio.run(api_worker(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:
        asyncio.run(main())
