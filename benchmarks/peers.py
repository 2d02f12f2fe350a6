"""artifactflow against its peers: the same agent task on the same fake model, side by side.

The task: one agent, one tool per round (`fetch_page`, returning 4 KB of text), N rounds, then
the answer "done". Every peer talks over real HTTP (keep-alive) to one fake OpenAI-compatible
chat-completions server in its own process (`fake_model.py`), which serves them all the same
script, and each measurement runs in a process of its own (`--same-process`: all in this one),
so the measuring process's CPU time is the peer's own:

- artifactflow: `artifactflow.Client` (SQLite in a temp folder; its model profile declares a
  context window large enough that compaction never triggers, as for a real long-context model);
- agents-sdk:   the OpenAI Agents SDK, `Runner.run` + `SQLiteSession`, on chat completions
  (`OpenAIChatCompletionsModel`), tracing off;
- langgraph:    langchain v1 `create_agent` + `ChatOpenAI` (chat completions) with an
  `AsyncSqliteSaver` checkpointer;
- bare:         the floor: a plain loop posting ready bodies with `AsyncOpenAI.post` (streamed,
  as artifactflow asks) and storing nothing.

Each asks the way it does by default: artifactflow and bare stream, the Agents SDK (`Runner.run`)
and `create_agent` (`ainvoke`) do not; the fake model serves both alike.

Figures (medians over repeats; peers interleaved, their order rotating every repeat):
- ms/round at 10 and at 200 rounds, wall and CPU (this process only), for one conversation
  after a one-round warm-up on a freshly opened peer (process start-up and opening excluded);
- wall and CPU time of 100 conversations × 5 rounds at once (`asyncio.gather`) with a 50 ms
  model (CPU: this process, every thread; steadier than the wall on a shared machine);
- storage ÷ payload at 200 rounds: growth of the peer's data folder (closed, so SQLite's WAL is
  folded in) over a 200-round conversation, divided by the 200 × 4 KB of tool results.

Every conversation must end with the answer "done", after exactly N + 1 model calls, each
carrying intact 4 KB tool results (the fake model checks): a change in behaviour fails the
run instead of passing for a change in speed.

Run: `python benchmarks/peers.py` (≈ 10 min on two cores; `--quick` for a smoke run,
`--write-readme` to put the table into README.md, `--profile artifactflow --rounds 200` for a
cProfile summary of one run, `--concurrent` for the 100-conversation figure alone, with its
range and the ratio to the SDK per repeat). The peers need `pip install -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime
import io
import json
import logging
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_model import PAYLOAD_BYTES  # noqa: E402
from peer_adapters import FACTORIES, PEERS, STORING, check_installed  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BEGIN, END = "<!-- peers:begin -->", "<!-- peers:end -->"
CONCURRENT, CONCURRENT_ROUNDS, CONCURRENT_DELAY = 100, 5, 0.05


# --- the fake model and the checks ------------------------------------------------------------


@contextlib.contextmanager
def fake_model() -> Iterator[str]:
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("fake_model.py"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        assert server.stdin is not None
        server.stdin.close()  # the server stops when its stdin closes
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


class Model:
    """This process's handle on the fake model: its counters and its latency."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = httpx.AsyncClient(base_url=base_url.removesuffix("/v1"))

    async def stats(self) -> dict[str, Any]:
        return (await self.http.get("/stats")).json()

    async def set_delay(self, seconds: float) -> None:
        (await self.http.post("/delay", json={"seconds": seconds})).raise_for_status()


async def checked(
    model: Model, name: str, conversations: int, rounds: int, go: Callable[[], Any]
) -> Any:
    """Run `go()` and assert what the fake model saw: conversations × (rounds + 1) calls, as
    many final answers, no damaged tool result."""
    before = await model.stats()
    value = await go()
    after = await model.stats()
    calls = after["requests"] - before["requests"]
    answers = after["answers"] - before["answers"]
    bad = after["bad"] - before["bad"]
    want = conversations * (rounds + 1)
    if calls != want or answers != conversations or bad:
        raise AssertionError(
            f"{name}: {conversations} conversation(s) × {rounds} rounds should make {want} model "
            f"calls and {conversations} final answers; saw {calls} calls, {answers} answers, "
            f"{bad} requests with a damaged tool result ({after['bad_sample'] or 'none'})"
        )
    return value


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- measurements ---------------------------------------------------------------------------


async def one_run(
    name: str, model: Model, rounds: int, root: Path, storage: bool
) -> dict[str, float]:
    """Open a fresh peer, warm it up with a one-round conversation, time one `rounds`-round
    conversation. With `storage`, the peer is closed and reopened around it, so the growth of
    its (closed) data folder is the conversation's."""
    folder = Path(tempfile.mkdtemp(dir=root))
    peer = FACTORIES[name](folder, model.base_url)
    counter = iter(range(1_000_000))

    async def converse(n: int) -> None:
        answer = await checked(model, name, 1, n, lambda: peer.converse(n, f"c{next(counter)}"))
        if answer != "done":
            raise AssertionError(f"{name}: the final answer was {answer!r}, not 'done'")

    await peer.open()
    try:
        await converse(1)
        before = 0
        if storage:
            await peer.close()
            before = folder_bytes(peer.data)
            await peer.open()
            await converse(1)  # this warm-up's 4 KB is counted in the payload below
        wall, cpu = time.perf_counter(), time.process_time()
        await converse(rounds)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        await peer.close()  # also on failure: an open SQLite thread would keep the process alive
    out = {"wall": wall * 1000 / rounds, "cpu": cpu * 1000 / rounds}
    if storage:
        out["storage"] = (folder_bytes(peer.data) - before) / ((rounds + 1) * PAYLOAD_BYTES)
    return out


async def concurrent_run(name: str, model: Model, root: Path) -> tuple[float, float]:
    """Wall and CPU seconds (this process, every thread) of CONCURRENT conversations ×
    CONCURRENT_ROUNDS at once, slow model. The CPU is the steadier figure on a busy machine."""
    peer = FACTORIES[name](Path(tempfile.mkdtemp(dir=root)), model.base_url)
    await peer.open()
    try:
        await checked(model, name, 1, 1, lambda: peer.converse(1, "warm-up"))
        await model.set_delay(CONCURRENT_DELAY)

        async def everyone() -> list[str]:
            return await asyncio.gather(
                *(peer.converse(CONCURRENT_ROUNDS, f"c{i}") for i in range(CONCURRENT))
            )

        started, cpu = time.perf_counter(), time.process_time()
        answers = await checked(model, name, CONCURRENT, CONCURRENT_ROUNDS, everyone)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        await model.set_delay(0)
        await peer.close()
    if any(a != "done" for a in answers):
        raise AssertionError(f"{name}: not every concurrent conversation answered 'done'")
    return wall, cpu


def rotated(names: list[str], repeat: int) -> list[str]:
    k = repeat % len(names)
    return names[k:] + names[:k]


async def in_child(spec: dict[str, Any]) -> Any:
    """One measurement (`one_run` or `concurrent_run`, as `spec` says) in a process of its own:
    each framework runs in its own process in production, and in one shared process every
    peer's collector also walked the modules and objects the other peers had imported (the
    Agents SDK, langchain: ~10^5 objects), so a peer's CPU depended on which peers ran beside
    it (artifactflow at 100 conversations: 2.3–2.9 s with only the SDK beside it, 3.5–3.8 s
    with all four). The child's start-up and the peer's opening stay outside the timing."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__)), "--measure-one", json.dumps(spec),
        stdout=subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise AssertionError(f"{spec['name']}: the measuring process failed ({process.returncode})")
    return json.loads(out.decode().strip().splitlines()[-1])


async def measure_one(spec: dict[str, Any]) -> Any:
    """The child's side of `in_child`: one measurement, its result as JSON on the last line."""
    model = Model(spec["url"])
    try:
        if spec["kind"] == "concurrent":
            return list(await concurrent_run(spec["name"], model, Path(spec["root"])))
        return await one_run(spec["name"], model, spec["rounds"], Path(spec["root"]), spec["storage"])
    finally:
        await model.http.aclose()


async def measure(
    names: list[str], sizes: list[int], repeats: int, concurrent_only: bool = False, same_process: bool = False
) -> dict[str, Any]:
    samples: dict[tuple[str, int], list[dict[str, float]]] = {}
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    with fake_model() as url, tempfile.TemporaryDirectory() as folder:
        model = Model(url)
        root = Path(folder)

        async def run(spec: dict[str, Any]) -> Any:
            if not same_process:
                return await in_child({**spec, "url": url, "root": folder})
            if spec["kind"] == "concurrent":
                return await concurrent_run(spec["name"], model, root)
            return await one_run(spec["name"], model, spec["rounds"], root, spec["storage"])

        try:
            for repeat in range(repeats):
                for rounds in [] if concurrent_only else sizes:
                    for name in rotated(names, repeat):
                        storage = rounds == max(sizes) and name in STORING
                        result = await run({"kind": "rounds", "name": name, "rounds": rounds, "storage": storage})
                        samples.setdefault((name, rounds), []).append(result)
                        print(
                            f"  repeat {repeat + 1}, {rounds:>3} rounds, {name:<12} "
                            f"{result['wall']:7.2f} ms/round",
                            file=sys.stderr,
                            flush=True,
                        )
                for name in rotated(names, repeat):
                    wall, cpu = await run({"kind": "concurrent", "name": name})
                    walls.setdefault(name, []).append(wall)
                    cpus.setdefault(name, []).append(cpu)
                    print(
                        f"  repeat {repeat + 1}, {CONCURRENT} conversations, {name:<12} "
                        f"{wall:6.2f} s (CPU {cpu:6.2f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            await model.http.aclose()
    return {"samples": samples, "walls": walls, "cpus": cpus}


def median(values: list[float]) -> float:
    return statistics.median(values)


def table(names: list[str], sizes: list[int], repeats: int, found: dict[str, Any]) -> str:
    samples, walls, cpus = found["samples"], found["walls"], found["cpus"]
    small, large = min(sizes), max(sizes)

    def cell(name: str, rounds: int, key: str) -> str:
        return f"{median([s[key] for s in samples[(name, rounds)]]):.1f}"

    lines = [
        f"| peer | ms/round, {small} rounds (wall / CPU) | ms/round, {large} rounds (wall / CPU) "
        f"| {CONCURRENT} conv. × {CONCURRENT_ROUNDS} rounds, {CONCURRENT_DELAY * 1000:.0f} ms model (wall / CPU) "
        f"| storage ÷ payload, {large} rounds |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in names:
        store = (
            f"{median([s['storage'] for s in samples[(name, large)]]):.2f}×"
            if name in STORING
            else "—"
        )
        lines.append(
            f"| {name} | {cell(name, small, 'wall')} / {cell(name, small, 'cpu')} "
            f"| {cell(name, large, 'wall')} / {cell(name, large, 'cpu')} "
            f"| {median(walls[name]):.2f} s / {median(cpus[name]):.2f} s | {store} |"
        )
    return "\n".join(lines)


def concurrent_table(names: list[str], repeats: int, found: dict[str, Any]) -> str:
    """The concurrency figure alone: medians and ranges, and each peer's ratio to the SDK's."""
    walls, cpus = found["walls"], found["cpus"]
    lines = [
        f"{CONCURRENT} conversations × {CONCURRENT_ROUNDS} rounds, {CONCURRENT_DELAY * 1000:.0f} ms "
        f"model, {repeats} interleaved repeat(s): median (min–max)"
    ]
    for name in names:
        cpu, wall = cpus[name], walls[name]
        line = (
            f"  {name:<12} CPU {median(cpu):6.2f} s ({min(cpu):.2f}–{max(cpu):.2f})  "
            f"wall {median(wall):6.2f} s ({min(wall):.2f}–{max(wall):.2f})"
        )
        if name != "agents-sdk" and "agents-sdk" in names:
            ratios = [c / s for c, s in zip(cpu, cpus["agents-sdk"], strict=True)]
            line += (
                f"  CPU ÷ agents-sdk {median(cpu) / median(cpus['agents-sdk']):.2f} "
                f"(per-repeat {min(ratios):.2f}–{max(ratios):.2f}), wall ÷ agents-sdk "
                f"{median(wall) / median(walls['agents-sdk']):.2f}"
            )
        lines.append(line)
    return "\n".join(lines)


def targets(names: list[str], sizes: list[int], found: dict[str, Any]) -> str:
    """The "done when" lines (issues 21 and 36), as ratios measured in this run."""
    samples, walls = found["samples"], found["walls"]
    small, large = min(sizes), max(sizes)

    def wall(name: str, rounds: int) -> float:
        return median([s["wall"] for s in samples[(name, rounds)]])

    lines = []
    if {"artifactflow", "agents-sdk"} <= set(names):
        lines.append(
            f"artifactflow ÷ agents-sdk, ms/round at {small} rounds: "
            f"{wall('artifactflow', small) / wall('agents-sdk', small):.2f} (target ≤ 0.7)"
        )
    if {"artifactflow", "bare"} <= set(names):
        lines.append(
            f"artifactflow ÷ bare, ms/round at {large} rounds: "
            f"{wall('artifactflow', large) / wall('bare', large):.2f} (target ≤ 1.5)"
        )
    if {"artifactflow", "agents-sdk"} <= set(names):
        lines.append(
            f"artifactflow ÷ agents-sdk, {CONCURRENT} conversations' CPU: "
            f"{median(found['cpus']['artifactflow']) / median(found['cpus']['agents-sdk']):.2f} "
            f"(target ≤ 0.5); wall time: "
            f"{median(walls['artifactflow']) / median(walls['agents-sdk']):.2f} (target ≤ 1)"
        )
    if "artifactflow" in names:
        growth = median([s["storage"] for s in samples[("artifactflow", large)]])
        lines.append(
            f"artifactflow storage ÷ payload at {large} rounds: {growth:.2f} (target ≤ 1.3)"
        )
    return "\n".join(f"- {line}" for line in lines)


def machine_note(command: str, repeats: int) -> str:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"`{command}` on {when}: {os.cpu_count()} CPUs (load average {load:.1f} at the end), "
        f"Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}; medians of {repeats} interleaved repeat(s); "
        f"{PAYLOAD_BYTES}-byte tool results; CPU is the measuring process's only (each measurement in a "
        "process of its own; the fake model runs in its own)."
    )


def write_readme(text: str) -> None:
    readme = README.read_text()
    if BEGIN not in readme or END not in readme:
        sys.exit(f"README.md has no {BEGIN} … {END} markers: add them where the table belongs")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


# --- profile --------------------------------------------------------------------------------


async def profile(name: str, rounds: int, top: int) -> None:
    """cProfile one `rounds`-round conversation of `name` (after its warm-up); print where the
    time goes by package, then the top functions of artifactflow's own code by cumulative time."""
    with fake_model() as url, tempfile.TemporaryDirectory() as folder:
        model = Model(url)
        peer = FACTORIES[name](Path(folder), url)
        await peer.open()
        await checked(model, name, 1, 1, lambda: peer.converse(1, "warm-up"))
        profiler = cProfile.Profile()
        profiler.enable()
        await checked(model, name, 1, rounds, lambda: peer.converse(rounds, "profiled"))
        profiler.disable()
        await peer.close()
        await model.http.aclose()
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    by_package: dict[str, float] = {}
    for (filename, _, function), entry in raw.items():
        package = package_of(filename, function)
        by_package[package] = by_package.get(package, 0.0) + entry[2]  # own time (tottime)
    waiting = by_package.pop(WAITING, 0.0)
    busy = sum(by_package.values())
    print(
        f"{name}, {rounds} rounds (main thread; SQLite threads not included): "
        f"{busy * 1000 / rounds:.2f} ms/round busy, {waiting * 1000 / rounds:.2f} ms/round "
        "waiting in the event loop's poll (HTTP, threads). Busy time by package:"
    )
    for package, seconds in sorted(by_package.items(), key=lambda kv: -kv[1])[:15]:
        print(
            f"  {package:<44} {seconds * 100 / busy:5.1f} %  ({seconds * 1000 / rounds:6.2f} ms/round)"
        )
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(r"artifactflow|/src/", top)
    print(f"\ntop {top} functions of artifactflow's code by cumulative time:")
    print(out.getvalue().split("function calls", 1)[-1])


WAITING = "(waiting in poll)"


def package_of(filename: str, function: str) -> str:
    """The package a profiled function belongs to: artifactflow, a site-package, stdlib:NAME;
    C functions as "builtins", except the event loop's poll (idle time, reported apart)."""
    path = filename.replace("\\", "/")
    if path == "~":
        if "poll" in function or "select" in function:
            return WAITING
        return "C: " + function.removeprefix("<").removesuffix(">").replace(" objects", "")[:40]
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if path.startswith(str(ROOT / "src")) or "/artifactflow/" in path:
        return "artifactflow"
    if "/lib/python3" in path:
        parts = path.split("/lib/python3", 1)[1].split("/")
        return f"stdlib:{parts[1].removesuffix('.py')}" if len(parts) > 1 else "stdlib"
    return path.rsplit("/", 1)[-1]


# --- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--peers", default=",".join(PEERS), help=f"subset of {','.join(PEERS)}")
    parser.add_argument("--rounds", default="10,200", help="conversation lengths (default 10,200)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 and 20 rounds, 1 repeat")
    parser.add_argument(
        "--write-readme", action="store_true", help="write the table into README.md"
    )
    parser.add_argument(
        "--profile", metavar="PEER", help="profile one conversation of PEER instead"
    )
    parser.add_argument("--top", type=int, default=30, help="functions listed by --profile")
    parser.add_argument(
        "--concurrent",
        action="store_true",
        help=f"only the {CONCURRENT}-conversation figure (wall and CPU), interleaved and repeated",
    )
    parser.add_argument(
        "--same-process",
        action="store_true",
        help="every measurement in this one process (before: each in a process of its own)",
    )
    parser.add_argument("--measure-one", help=argparse.SUPPRESS)  # in_child's child
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    os.environ.setdefault("OPENAI_API_KEY", "benchmark-no-network")
    if args.measure_one:
        print(json.dumps(asyncio.run(measure_one(json.loads(args.measure_one)))))
        return
    names = [n.strip() for n in args.peers.split(",") if n.strip()]
    unknown = sorted(set(names) - set(PEERS))
    if unknown:
        sys.exit(f"unknown peers {unknown}; choose from {PEERS}")
    sizes = [int(x) for x in args.rounds.split(",")]
    if args.profile:
        check_installed([args.profile])
        asyncio.run(profile(args.profile, max(sizes), args.top))
        return
    if args.quick:
        sizes, args.repeats = [3, 20], 1
    check_installed(names)
    started = time.perf_counter()
    found = asyncio.run(measure(names, sizes, args.repeats, args.concurrent, args.same_process))
    if args.concurrent:
        print(concurrent_table(names, args.repeats, found))
        return
    command = "python benchmarks/peers.py " + " ".join(
        a for a in sys.argv[1:] if a != "--write-readme"
    )
    text = "\n\n".join(
        [
            table(names, sizes, args.repeats, found),
            targets(names, sizes, found),
            machine_note(command.strip(), args.repeats),
        ]
    )
    print(text)
    print(f"\n(the whole run took {time.perf_counter() - started:.0f} s)")
    if args.write_readme:
        write_readme(text)
        print(f"written to {README}")


if __name__ == "__main__":
    main()
