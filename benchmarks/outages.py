"""PostgreSQL outages under live runs: how soon readers are told, how soon the database's return
is noticed, and whether an answer the model gave during the outage is kept.

A private PostgreSQL server (tests/private_pg.py: its own folder and port; the shared server is
never touched) backs the real HTTP API (`create_app` under uvicorn on a free port, in this
process), with the scripted model (`ScriptedLLM`, its own thread). Each outage:

1. `KEEP` + `FAIL` runs are posted (`POST /api/v1/chat`) and an SSE reader follows each
   (`GET /api/v1/stream/{id}`); their model requests are held until the database is down;
2. the server is stopped (`pg_ctl stop -m fast`), then the model answers: the `KEEP` runs with
   their answer, the `FAIL` runs with an HTTP 400 (a run that fails while the database is away);
3. after the outage's length the server is started again (`pg_ctl start -w`).

Per outage it prints: *told*, the seconds from the model's answers to the last `FAIL` reader's
final event (their runs failed during the outage); *noticed*, the seconds from the server's
return (`pg_ctl start` returned) to the last `KEEP` reader's final event; *answers produced*
(the `KEEP` runs' model answers) and *lost* (those runs not `completed` with that answer, read
back over HTTP once the database is back); runs completed and failed; and whether every stream
was in order (ids increasing, one final event).

Baseline, same run, interleaved: the outages marked `before` run with `HOLD_SECONDS = 0`
(`store/outage_retry.py`: nothing waits for the database, the behaviour before issue 34's item
4: a failed write drops the batch and the run fails). The pool settings of the checkpoint saver
stay the new ones in both.

It also counts, in this process's logs, asyncpg's "another operation (2) is in progress" (a
statement on a connection the server had just ended, named an outage) and "another operation
is in progress" without the state: a connection used by two operations at once (must be 0).

Run: `python benchmarks/outages.py [--short 10] [--long 40] [--keep 4] [--fail 2]`
(about 4 minutes; needs the PostgreSQL server binaries, as tests/private_pg.py does).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from private_pg import PrivatePostgres, private_postgres  # noqa: E402

from artifactflow import Client, load_settings  # noqa: E402
from artifactflow.api.app import create_app, server_for  # noqa: E402
from artifactflow.core.store import outage_retry  # noqa: E402
from artifactflow.testing import Error, ScriptedLLM, Text  # noqa: E402

TARGET_SECONDS = 5.0  # the issue's: readers told, and the return noticed, within this


class Shared(logging.Handler):
    """Counts the log lines naming asyncpg's protocol-state errors."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.ended = 0  # "another operation (2)": a connection the server ended
        self.shared = 0  # "another operation is in progress": two operations on one connection

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage() + (logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
        self.ended += text.count("another operation (2)")
        self.shared += text.count("cannot perform operation: another operation is in progress")


@dataclass
class Stream:
    """What one SSE reader saw."""

    message_id: str
    ids: list[int] = field(default_factory=list)
    finals: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)  # type, at, data
    error: str | None = None

    @property
    def in_order(self) -> bool:
        return self.ids == sorted(set(self.ids)) and len(self.finals) == 1


@dataclass
class Outcome:
    label: str
    seconds: float
    told: float | None
    noticed: float | None
    produced: int
    lost: int
    completed: int
    failed: int
    in_order: bool
    detail: list[Any] = field(default_factory=list)


def _config(root: Path) -> Path:
    agents = root / "config" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead_agent.md").write_text(
        "---\nname: lead_agent\ndescription: lead\nrole: lead\ntools: []\nmax_tool_rounds: 3\n"
        "---\nYou are the lead agent.\n",
        encoding="utf-8",
    )
    (root / "config" / "artifactflow.yaml").write_text("run:\n  max_concurrent_runs: 50\n", encoding="utf-8")
    return root / "config"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _task(body: dict[str, Any]) -> str:
    return str([m["content"] for m in body["messages"] if m["role"] == "user"][-1])


async def _follow(http: httpx.AsyncClient, message_id: str, stream: Stream) -> None:
    try:
        async with http.stream("GET", f"/api/v1/stream/{message_id}") as response:
            kind = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind is not None:
                    if kind == "llm_chunk":
                        continue
                    event = json.loads(line[6:])
                    stream.ids.append(int(event["event_id"]))
                    if kind in ("complete", "error", "cancelled"):
                        stream.finals.append((kind, time.monotonic(), event.get("data") or {}))
    except Exception as exc:  # a reader cut off is reported, not fatal
        stream.error = f"{type(exc).__name__}: {exc}"


async def _settled(http: httpx.AsyncClient, message_id: str, deadline: float) -> dict[str, Any]:
    """The message once it has a final status (the database back, its ending stored)."""
    while True:
        try:
            answer = await http.get(f"/api/v1/messages/{message_id}")
            if answer.status_code == 200 and answer.json()["status"] not in ("running", "pending"):
                return dict(answer.json())
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"message {message_id} not settled")
        await asyncio.sleep(0.2)


async def one_outage(
    n: int, label: str, seconds: float, pg: PrivatePostgres, llm: ScriptedLLM,
    http: httpx.AsyncClient, keep: int, fail: int,
) -> Outcome:
    outage_retry.HOLD_SECONDS = 300.0 if label == "after" else 0.0
    gate = threading.Event()

    def answer(body: dict[str, Any]) -> Any:
        if f"o{n}-" not in _task(body):
            return None
        gate.wait(300)
        task = _task(body)
        return Error(400, "the model refused") if "fail" in task else Text(f"answer to {task}")

    llm.clear_routes()
    llm.route(answer)
    before = llm.request_count
    tasks = [f"o{n}-keep-{i}" for i in range(keep)] + [f"o{n}-fail-{i}" for i in range(fail)]
    ids: dict[str, str] = {}
    for task in tasks:
        posted = await http.post("/api/v1/chat", json={"content": task})
        assert posted.status_code == 202, posted.text
        ids[task] = posted.json()["message_id"]
    streams = {task: Stream(ids[task]) for task in tasks}
    readers = [asyncio.create_task(_follow(http, ids[t], streams[t])) for t in tasks]
    # every reader attached (it has its first events) and every model request in
    while llm.request_count < before + len(tasks) or not all(s.ids for s in streams.values()):  # noqa: ASYNC110
        await asyncio.sleep(0.02)

    await asyncio.to_thread(pg.stop, "fast")
    down = time.monotonic()
    gate.set()  # the model answers while the database is away
    answered = time.monotonic()
    await asyncio.sleep(max(0.0, seconds - (time.monotonic() - down)))
    await asyncio.to_thread(pg.start)
    up = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*readers), 600)

    deadline = time.monotonic() + 600
    rows = {task: await _settled(http, ids[task], deadline) for task in tasks}
    kept = [t for t in tasks if "keep" in t]
    failing = [t for t in tasks if "fail" in t]
    lost = sum(
        1 for t in kept
        if (rows[t]["status"], rows[t].get("response")) != ("completed", f"answer to {t}")
    )
    told = [streams[t].finals[0][1] - answered for t in failing if streams[t].finals]
    noticed = [
        streams[t].finals[-1][1] - up for t in kept
        if streams[t].finals and streams[t].finals[-1][0] == "complete"
    ]
    statuses = [row["status"] for row in rows.values()]
    return Outcome(
        label, seconds,
        told=max(told) if len(told) == len(failing) else None,
        noticed=max(noticed) if noticed else None,
        produced=len(kept), lost=lost,
        completed=statuses.count("completed"), failed=statuses.count("failed"),
        in_order=all(s.in_order and s.error is None for s in streams.values()),
        detail=[(t, s.ids, [f[0] for f in s.finals], s.error) for t, s in streams.items()
                if not (s.in_order and s.error is None)],
    )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:5.2f}"


async def main(args: argparse.Namespace) -> int:
    plan = [("after", args.short)] * 10
    plan[4] = ("after", args.long)
    for slot in (1, 6, 9):  # the baseline, interleaved
        plan.insert(slot, ("before", args.short))
    counter = Shared()
    logging.getLogger().addHandler(counter)
    logging.getLogger().setLevel(logging.WARNING)  # counted, not printed (no other handler)

    root = Path(tempfile.mkdtemp(prefix="af-outages-"))
    with private_postgres() as pg, ScriptedLLM() as llm:
        os.environ.update({"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "bench",
                           "ARTIFACTFLOW_DATABASE_URL": pg.url, "ARTIFACTFLOW_DATABASE_POOL_SIZE": "5"})
        client = await Client.open(load_settings(_config(root), root / "data"))
        app = create_app(client=client)
        port = _free_port()
        server = server_for(app, "127.0.0.1", port, log_level="error")
        serving = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn's flag
            await asyncio.sleep(0.05)
        outcomes: list[Outcome] = []
        try:
            limits = httpx.Limits(max_connections=100)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600, limits=limits) as http:
                print(f"{len(plan)} outages; {args.keep} runs answering + {args.fail} failing in flight in each")
                print(f"{'#':>2} {'mode':6} {'outage s':>8} {'told s':>6} {'noticed s':>9} "
                      f"{'answers':>7} {'lost':>4} {'completed':>9} {'failed':>6} {'in order':>8}")
                for n, (label, seconds) in enumerate(plan, 1):
                    o = await one_outage(n, label, seconds, pg, llm, http, args.keep, args.fail)
                    outcomes.append(o)
                    print(f"{n:>2} {o.label:6} {o.seconds:8.0f} {_fmt(o.told):>6} {_fmt(o.noticed):>9} "
                          f"{o.produced:7d} {o.lost:4d} {o.completed:9d} {o.failed:6d} {str(o.in_order):>8}",
                          flush=True)
                    for line in o.detail:
                        print("   not in order:", line)
        finally:
            server.should_exit = True
            await serving
            await client.aclose()

    after = [o for o in outcomes if o.label == "after"]
    before = [o for o in outcomes if o.label == "before"]
    def summary(rows: list[Outcome]) -> str:
        told = [o.told for o in rows if o.told is not None]
        noticed = [o.noticed for o in rows if o.noticed is not None]
        return (f"answers lost {sum(o.lost for o in rows)}/{sum(o.produced for o in rows)}, "
                f"told median {statistics.median(told):.2f} s max {max(told):.2f} s, "
                + (f"noticed median {statistics.median(noticed):.2f} s max {max(noticed):.2f} s"
                   if noticed else "noticed - (no answer kept)"))
    print(f"after  ({len(after)} outages): {summary(after)}")
    print(f"before ({len(before)} outages, same run): {summary(before)}")
    print(f"asyncpg 'another operation (2)' (a connection the server ended): {counter.ended}; "
          f"'another operation is in progress' (one connection, two operations): {counter.shared}")

    # the work done, and the targets
    assert all(o.produced == args.keep for o in outcomes)
    assert all(o.completed + o.failed == args.keep + args.fail for o in outcomes), outcomes
    assert sum(o.lost for o in after) == 0, "an answer produced during an outage was lost"
    assert all(o.completed == args.keep and o.failed == args.fail for o in after), after
    assert all(o.in_order for o in after), "a stream out of order or with two final events"
    assert all(o.told is not None and o.told <= TARGET_SECONDS for o in after), "readers told late"
    assert all(o.noticed is not None and o.noticed <= TARGET_SECONDS for o in after), "return noticed late"
    assert counter.shared == 0
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=float, default=10.0, help="seconds of the short outages")
    parser.add_argument("--long", type=float, default=40.0, help="seconds of the long outage (the 5th)")
    parser.add_argument("--keep", type=int, default=4, help="runs per outage whose model answers")
    parser.add_argument("--fail", type=int, default=2, help="runs per outage whose model call fails")
    sys.exit(asyncio.run(main(parser.parse_args())))
