"""SIGKILL of `serve` during Agent Protocol runs (issue 34): two real `serve` workers on one
fresh PostgreSQL database (one on SQLite), 2-second leases, `run.recover_on_start`.

A few kills each, at the steps that matter (benchmarks/torture.py `--protocol-kills` takes 50
across every step): a streaming client cut by its server's death reconnects to the other
worker with `Last-Event-ID` and gets every event and the final one; a resume accepted by a
worker killed at once runs its tool once, recovered by the restarted worker; a run queued
behind a busy one (`enqueue`) survives the kill of the worker that queued it; a webhook whose
sender dies mid-delivery is never delivered twice; a cron tick during a worker's kill never
starts two runs, and the survivor keeps the schedule.

Why processes and not the in-process app: the subject is a process dying. Each `serve` is
forked from the tests' CLI fork server (tests/cli_fork.py): a process of its own, SIGKILLed for
real, without the console script's start-up imports at every start and restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from cli_fork import ForkedProcess, fork_process
from killable_serve import Seen, Serve, read_sse
from pg import create_database, drop_database
from scripted_llm import Call, Delay, ScriptedLLM, Text, ToolCalls
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from waiting import ceiling, wait_until, wait_until_sync

from artifactflow.core.store.schema import ap_runs

PLUGIN = '''
import os
from artifactflow import tool

@tool(permission="confirm")
def append_line(text: str) -> str:
    """Append one line to the journal (the effect that must happen once)."""
    with open(os.environ["AF_JOURNAL"], "a", encoding="utf-8") as f:
        f.write(text + "\\n")
    return "appended " + text
'''
LEAD = "lead_agent"
STREAM = ["values", "custom"]


def route(request: dict[str, Any]) -> Any:
    """`task T…`: call the tool with T…, then answer; `slow task T…` waits first; anything
    else is answered at once."""
    messages = request.get("messages") or []
    user = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    words = user.split()
    if messages and messages[-1].get("role") == "tool":
        return Text("done", chunk_size=2, chunk_delay=0.01)
    if "task" in words:
        calls = ToolCalls([Call("append_line", {"text": words[-1]})])
        return Delay(1.5, calls) if words[0] == "slow" else calls
    return Text("plain answer")


@dataclass
class Cluster:
    root: Path
    config: Path
    env: dict[str, str]
    journal: Path
    servers: list[Serve]
    db_url: str | None

    def effects(self, token: str) -> int:
        text = self.journal.read_text(encoding="utf-8") if self.journal.exists() else ""
        return text.splitlines().count(token)

    def live(self) -> Serve:
        return next(s for s in self.servers if s.alive)

    def revive(self) -> None:
        for server in self.servers:
            if not server.alive:
                server.start(ceiling(120))


def _cluster(root: Path, backend: str, workers: int) -> Iterator[Cluster]:
    config = root / "config"
    (config / "agents").mkdir(parents=True)
    (config / "agents" / "lead_agent.md").write_text(
        "---\nname: lead_agent\nrole: lead\ntools: [append_line]\n---\nYou are the lead.\n"
    )
    (config / "kill_tools.py").write_text(PLUGIN)
    db_url = asyncio.run(create_database()) if backend == "postgres" else None
    (config / "artifactflow.yaml").write_text(
        (f"database_url: {db_url}\n" if db_url else "")
        + "plugins: [kill_tools]\nllm:\n  max_retries: 0\ncrons:\n  enabled: false\n"
    )
    journal = root / "journal.txt"
    with ScriptedLLM() as llm:
        llm.route(route)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIFACTFLOW_")}
        env.update(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key", AF_JOURNAL=str(journal))
        command = [str(Path(sys.executable).parent / "artifactflow"), "--config-dir", str(config),
                   "--data-dir", str(root / "data")]
        servers = [Serve(command, env, forked=True) for _ in range(workers)]
        try:
            for server in servers:  # one after another: the first creates the schema
                server.start(ceiling(120))
            yield Cluster(root, config, env, journal, servers, db_url)
        finally:
            for server in servers:
                server.stop()
            if db_url:
                asyncio.run(drop_database(db_url))


@pytest.fixture(scope="module")
def pg_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _cluster(tmp_path_factory.mktemp("kills-pg"), "postgres", 2)


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[Cluster]:
    yield from _cluster(tmp_path, "sqlite", 1)


def body(text: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"assistant_id": LEAD, "stream_mode": STREAM, **extra}
    if text is None:
        out["command"] = {"resume": {"decisions": [{"type": "approve"}]}}
    else:
        out["input"] = {"messages": [{"role": "user", "content": text}]}
    return out


async def stream(c: httpx.AsyncClient, method: str, url: str, seen: Seen, *, payload: Any = None,
                 until: str | None = None, headers: dict[str, str] | None = None) -> None:
    """Read the SSE stream into `seen` to its end, or to our event `until`; a cut connection
    (a killed server) ends it too."""
    with contextlib.suppress(httpx.TransportError):
        async with c.stream(method, url, json=payload, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async for name, data in read_sse(response, seen):
                if until and name == "custom" and data["type"] == until:
                    return


async def thread_status(c: httpx.AsyncClient, base: str, tid: str, wanted: set[str]) -> str:
    async def status() -> str | None:
        response = await c.get(f"{base}/threads/{tid}")
        assert response.status_code == 200, response.text
        return response.json()["status"] if response.json()["status"] in wanted else None

    return str(await wait_until(status, timeout=ceiling(120), interval=0.1, what=f"thread {sorted(wanted)}"))


async def runs_ended(c: httpx.AsyncClient, base: str, tid: str) -> list[dict[str, Any]]:
    runs = (await c.get(f"{base}/threads/{tid}/runs")).json()
    assert all(r["status"] in ("success", "error", "interrupted") for r in runs), runs
    return list(runs)


async def stored_events(c: httpx.AsyncClient, base: str, tid: str) -> dict[str, list[tuple[int, str]]]:
    """Each message's stored events (through `/api/v1`): id and type."""
    tree = (await c.get(f"{base}/api/v1/conversations/{tid}")).json()
    out = {}
    for node in tree["messages"]:
        events = (await c.get(f"{base}/api/v1/messages/{node['id']}/events")).json()["events"]
        out[node["id"]] = [(e["event_id"], e["type"]) for e in events]
    return out


async def client_got_every_event(c: httpx.AsyncClient, base: str, tid: str, seen: Seen, final: str) -> None:
    """The streaming client got every stored event of its run (from the first it saw to the
    run's final one, `metadata` aside: that is the stream's own first frame), once each, and
    the final one last; the stored ids are 1..n."""
    assert seen.repeated == 0 and seen.events[-1][1] == final, seen.events
    first, last = seen.events[0][0], seen.events[-1][0]
    for events in (await stored_events(c, base, tid)).values():
        assert [i for i, _ in events] == list(range(1, len(events) + 1)), events
        if (first, seen.events[0][1]) in events:
            expected = [i for i, kind in events if first <= i <= last and kind != "metadata"]
            assert sorted({i for i, _ in seen.events}) == expected, (seen.events, events)
            return
    raise AssertionError(f"the client's events {seen.events} are not stored")


async def new_thread(c: httpx.AsyncClient, base: str) -> str:
    response = await c.post(f"{base}/threads", json={})
    assert response.status_code == 200, response.text
    return str(response.json()["thread_id"])


async def test_stream_cut_by_a_kill_resumes_elsewhere_and_a_killed_resume_runs_once(pg_cluster: Cluster) -> None:
    a, b = pg_cluster.servers
    token = "T" + uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=ceiling(120)) as c:
        tid = await new_thread(c, a.base)
        seen = Seen()
        await stream(c, "POST", f"{a.base}/threads/{tid}/runs/stream", seen, payload=body(f"task {token}"), until="llm_complete")
        a.kill()  # mid-stream: the model has answered, the pause is not stored yet
        assert seen.run_id and seen.last_id
        await stream(c, "GET", f"{b.base}/threads/{tid}/runs/{seen.run_id}/stream", seen,
                     headers={"Last-Event-ID": seen.last_id})
        await client_got_every_event(c, b.base, tid, seen, "permission_request")  # none lost
        assert await thread_status(c, b.base, tid, {"interrupted", "idle", "error"}) == "interrupted"

        # the resume is accepted, and its worker killed at once: the restarted one finishes it
        resumed = await c.post(f"{b.base}/threads/{tid}/runs", json=body())
        assert resumed.status_code == 200, resumed.text
        b.kill()
        a.start(ceiling(120))
        assert await thread_status(c, a.base, tid, {"idle", "error", "interrupted"}) == "idle"
        assert pg_cluster.effects(token) == 1
        runs = await runs_ended(c, a.base, tid)
        assert {r["run_id"]: r["status"] for r in runs}[resumed.json()["run_id"]] == "success"
    pg_cluster.revive()


async def test_a_queued_run_survives_the_kill_of_the_worker_that_queued_it(pg_cluster: Cluster) -> None:
    a, b = pg_cluster.servers
    first, second = "T" + uuid.uuid4().hex[:8], "T" + uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=ceiling(120)) as c:
        tid = await new_thread(c, a.base)
        started = await c.post(f"{a.base}/threads/{tid}/runs", json=body(f"slow task {first}"))
        assert started.status_code == 200
        queued = await c.post(f"{a.base}/threads/{tid}/runs", json=body(f"task {second}", multitask_strategy="enqueue"))
        assert queued.status_code == 200 and queued.json()["status"] == "pending", queued.text
        a.kill()  # during the first run's slow model call, the second one queued
        # the survivor recovers the first run (it pauses), starts the queued one (which closes
        # that pause), and the queued run's pause is approved there
        assert await thread_status(c, b.base, tid, {"interrupted"}) == "interrupted"
        await wait_until(lambda: runs_status(c, b.base, tid, queued.json()["run_id"]), timeout=ceiling(120),
                         interval=0.1, what="the queued run started and paused")
        assert (await c.post(f"{b.base}/threads/{tid}/runs", json=body())).status_code == 200
        assert await thread_status(c, b.base, tid, {"idle", "error"}) == "idle"
        assert pg_cluster.effects(second) == 1 and pg_cluster.effects(first) == 0
        await runs_ended(c, b.base, tid)
    pg_cluster.revive()


async def runs_status(c: httpx.AsyncClient, base: str, tid: str, run_id: str) -> bool:
    run = (await c.get(f"{base}/threads/{tid}/runs/{run_id}")).json()
    state = (await c.get(f"{base}/threads/{tid}")).json()
    return run["status"] == "success" and state["status"] == "interrupted"


async def test_sqlite_serve_killed_after_the_tool_ran_restarts_and_finishes_once(sqlite_server: Cluster) -> None:
    (server,) = sqlite_server.servers
    token = "T" + uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(timeout=ceiling(120)) as c:
        tid = await new_thread(c, server.base)
        await stream(c, "POST", f"{server.base}/threads/{tid}/runs/stream", Seen(), payload=body(f"task {token}"))
        seen = Seen()
        await stream(c, "POST", f"{server.base}/threads/{tid}/runs/stream", seen, payload=body(), until="tool_complete")
        server.kill()  # the approved tool has run and its result is stored; the answer is not
        assert sqlite_server.effects(token) == 1
        server.start(ceiling(120))
        assert seen.run_id and seen.last_id
        await stream(c, "GET", f"{server.base}/threads/{tid}/runs/{seen.run_id}/stream", seen,
                     headers={"Last-Event-ID": seen.last_id})
        await client_got_every_event(c, server.base, tid, seen, "complete")
        assert await thread_status(c, server.base, tid, {"idle", "error", "interrupted"}) == "idle"
        assert sqlite_server.effects(token) == 1
        await runs_ended(c, server.base, tid)


# --- webhooks ----------------------------------------------------------------------------------


@dataclass
class Receiver:
    """Counts deliveries per run; holds the first request of run `hold` until `release`."""

    url: str = ""
    hits: dict[str, int] = field(default_factory=dict)
    hold: str | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: Request) -> Response:
        run_id = json.loads(await request.body())["run_id"]
        self.hits[run_id] = self.hits.get(run_id, 0) + 1
        if run_id == self.hold:
            self.arrived.set()
            await self.release.wait()
        return Response("ok")


@contextlib.asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    app = Starlette(routes=[Route("/hook", r.handle, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: server.started or task.done(), timeout=ceiling(60), what="the receiver")
        r.url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/hook"
        yield r
    finally:
        r.release.set()
        server.should_exit = True
        await asyncio.wait_for(task, ceiling(60))


async def test_webhooks_across_kills_once_each(pg_cluster: Cluster) -> None:
    """A webhook whose sender dies mid-delivery is not sent again; a run whose worker dies
    before it ends is recovered elsewhere and its webhook sent there, once."""
    a, b = pg_cluster.servers
    async with receiver() as hook, httpx.AsyncClient(timeout=ceiling(120)) as c:
        tid = await new_thread(c, a.base)
        run = await c.post(f"{a.base}/threads/{tid}/runs", json={**body("hello"), "webhook": hook.url})
        assert run.status_code == 200, run.text
        cut = run.json()["run_id"]
        hook.hold = cut
        await asyncio.wait_for(hook.arrived.wait(), ceiling(120))
        a.kill()  # the receiver has the request; the sender never hears back
        hook.release.set()
        a.start(ceiling(120))

        other = await new_thread(c, b.base)
        token = "T" + uuid.uuid4().hex[:8]
        run = await c.post(f"{b.base}/threads/{other}/runs", json={**body(f"slow task {token}"), "webhook": hook.url})
        orphan = run.json()["run_id"]
        b.kill()  # during its model call: `a` recovers the run (it pauses) and sends its webhook
        await wait_until(lambda: hook.hits.get(orphan), timeout=ceiling(120), what="the recovered run's webhook")
        b.start(ceiling(120))
        last = await c.post(f"{b.base}/threads/{other}/runs", json={**body("again"), "webhook": hook.url})
        await wait_until(lambda: hook.hits.get(last.json()["run_id"]), timeout=ceiling(120), what="a delivery")
        assert (hook.hits[cut], hook.hits[orphan]) == (1, 1), hook.hits
        shown = (await c.get(f"{b.base}/threads/{tid}/runs/{cut}/webhook")).json()
        assert shown["status"] == "sending"  # claimed by the dead sender: at most once, documented


# --- crons -------------------------------------------------------------------------------------

SCHEDULER = '''
import asyncio, os, signal, sys
from pathlib import Path
from artifactflow import Client, load_settings
from artifactflow.protocol.crons import CronScheduler
from artifactflow.protocol.service import Protocol

class DiesAfterItsClaim(CronScheduler):
    """SIGKILLs its own process the moment it has claimed a tick, before starting its run."""

    async def claim(self, *args, **kwargs):
        won = await super().claim(*args, **kwargs)
        if won is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return won

def die_when_a_run_is_recorded_started():
    """SIGKILL the moment a started run is about to be recorded (its message exists)."""
    from artifactflow.protocol.records import ProtocolRecords
    set_run = ProtocolRecords.set_run

    async def dying(self, run_id, *, when=(), **values):
        if values.get("status") == "running" and values.get("message_id"):
            os.kill(os.getpid(), signal.SIGKILL)
        return await set_run(self, run_id, when=when, **values)

    ProtocolRecords.set_run = dying

async def main(config, data, clock_file, ready_file, dies="no"):
    client = await Client.open(load_settings(Path(config), Path(data)))
    protocol = Protocol(client)
    await protocol.records.ready()
    if dies == "starting":
        die_when_a_run_is_recorded_started()
    kind = DiesAfterItsClaim if dies == "claimed" else CronScheduler
    scheduler = kind(protocol, clock=lambda: float(Path(clock_file).read_text()))
    Path(ready_file).touch()
    while True:
        await scheduler.tick()
        await asyncio.sleep(0.02)

asyncio.run(main(*sys.argv[1:]))
'''


# A claimed queued run not started after this is queued again (`server.queued_start_seconds`,
# 30 s by default): a few seconds, far more than a start takes, so the tests that kill a
# scheduler between the claim and the start wait that long, not 30 s.
QUEUED_START_SECONDS = round(ceiling(3.0), 1)


def start_scheduler(cluster: Cluster, tmp_path: Path, data: Path, clock: Path, dies: str = "no") -> ForkedProcess:
    """A scheduler process (`SCHEDULER`) on `clock`, forked from the tests' CLI fork server
    (tests/cli_fork.py: a process of its own, SIGKILLed for real, without the start-up
    imports), once it is ready."""
    name = uuid.uuid4().hex[:6]
    ready = tmp_path / f"ready-{name}"
    env = {**cluster.env, "ARTIFACTFLOW_RUN__RECOVER_ON_START": "true", "ARTIFACTFLOW_RUN__LEASE_SECONDS": "2",
           "ARTIFACTFLOW_SERVER__QUEUED_START_SECONDS": str(QUEUED_START_SECONDS)}
    proc = fork_process([str(cluster.config), str(data), str(clock), str(ready), dies], env, code=SCHEDULER,
                        log=tmp_path / f"sched-{name}.log")
    wait_until_sync(lambda: ready.exists() or proc.poll() is not None, timeout=ceiling(120), interval=0.02,
                    what="the scheduler ready")
    assert ready.exists(), f"the scheduler exited with {proc.returncode}: see {tmp_path}/sched-{name}.log"
    return proc


async def test_a_cron_tick_during_a_worker_kill_starts_one_run(pg_cluster: Cluster, tmp_path: Path) -> None:
    """Two scheduler processes on a clock the test moves (a file both read); one is killed as
    a tick comes due. No tick ever starts two runs, and the survivor keeps the schedule."""
    from artifactflow import Client, load_settings
    from artifactflow.protocol.crons import Crons
    from artifactflow.protocol.service import Protocol

    start = 1_900_000_050.0  # 30 s past a minute
    clock = tmp_path / "clock"

    def set_clock(now: float) -> None:  # atomically: the schedulers read it all the time
        (tmp_path / "clock.new").write_text(str(now))
        os.replace(tmp_path / "clock.new", clock)

    set_clock(start)
    client = await Client.open(load_settings(pg_cluster.config, tmp_path / "data"))
    try:
        protocol = Protocol(client)
        crons = Crons(protocol, lambda: start)
        cron = await crons.create(
            assistant_id=LEAD, thread_id=None, user_id=None, schedule="* * * * *", timezone=None,
            end_time=None, enabled=True, payload={"input": {"messages": [{"role": "user", "content": "hi"}]}},
            metadata={},
        )

        def scheduler() -> ForkedProcess:
            return start_scheduler(pg_cluster, tmp_path, tmp_path / "data", clock)

        async def cron_runs() -> dict[str, int]:
            found: dict[str, int] = {}
            for row in await client.admin.store.fetch_rows(sa.select(ap_runs.c.metadata)):
                meta = json.loads(row["metadata"] or "{}")
                if meta.get("cron_id") == cron["cron_id"]:
                    found[meta["cron_scheduled_at"]] = found.get(meta["cron_scheduled_at"], 0) + 1
            return found

        async def moved_past(now: float) -> bool:
            return (await crons.get(cron["cron_id"], None))["next_run_at"] > now

        survivor, victim = await asyncio.to_thread(scheduler), await asyncio.to_thread(scheduler)
        try:
            for minute, delay in enumerate((0.0, 0.02), start=1):
                now = start + 60 * minute
                set_clock(now)  # a tick comes due for both
                await asyncio.sleep(delay)
                victim.kill()
                victim.wait()
                await wait_until(lambda now=now: moved_past(now), timeout=ceiling(60), interval=0.05,
                                 what=f"minute {minute} claimed")
                victim = await asyncio.to_thread(scheduler)
            set_clock(start + 60 * 3)  # a tick after the kills: exactly once
            await wait_until(lambda: _has_minute(cron_runs, 3, start), timeout=ceiling(60), interval=0.05,
                             what="minute 3's run")
            counts = await cron_runs()
            assert all(n == 1 for n in counts.values()), counts  # no tick ever ran twice
            assert len(counts) >= 2, counts  # the kills cost at most the tick being claimed
        finally:
            for proc in (survivor, victim):
                proc.kill()
                proc.wait()
    finally:
        await client.aclose()


async def _has_minute(cron_runs: Any, minute: int, start: float) -> bool:
    due = datetime.fromtimestamp(start + 60 * minute - 30, UTC).isoformat()
    return due in await cron_runs()


async def test_a_cron_tick_claimed_by_a_worker_killed_before_its_start_runs_once_sqlite(
    sqlite_server: Cluster, tmp_path: Path
) -> None:
    await _killed_tick_runs_once(sqlite_server, 1, tmp_path, "claimed")


async def test_a_cron_tick_claimed_by_a_worker_killed_before_its_start_runs_once_postgres(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    await _killed_tick_runs_once(pg_cluster, 2, tmp_path, "claimed")


async def test_a_cron_tick_whose_worker_is_killed_as_its_run_starts_runs_once_sqlite(
    sqlite_server: Cluster, tmp_path: Path
) -> None:
    await _killed_tick_runs_once(sqlite_server, 1, tmp_path, "starting")


async def test_a_cron_tick_whose_worker_is_killed_as_its_run_starts_runs_once_postgres(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    await _killed_tick_runs_once(pg_cluster, 2, tmp_path, "starting")


async def _killed_tick_runs_once(cluster: Cluster, workers: int, tmp_path: Path, dies: str) -> None:
    """A scheduler SIGKILLed right after it claimed a tick (`claimed`: the cron's next time
    moved on, its run not started), or once the run's message exists but before the run row
    says so (`starting`): the restarted worker (on PostgreSQL, two) runs that tick once (the
    queued row is started again after `server.queued_start_seconds`, and takes the message already
    started: its id is derived from the run's), and keeps the schedule. Before, the tick was
    lost (`claimed`) or ran twice (`starting`)."""
    from artifactflow import Client, load_settings
    from artifactflow.protocol.crons import Crons
    from artifactflow.protocol.service import Protocol

    data = cluster.root / "data"
    start = 1_900_000_050.0  # 30 s past a minute
    clock = tmp_path / "clock"

    def set_clock(now: float) -> None:
        (tmp_path / "clock.new").write_text(str(now))
        os.replace(tmp_path / "clock.new", clock)

    set_clock(start)

    def scheduler(mode: str = "no") -> ForkedProcess:
        return start_scheduler(cluster, tmp_path, data, clock, mode)

    client = await Client.open(load_settings(cluster.config, data))
    procs: list[ForkedProcess] = []
    try:
        crons = Crons(Protocol(client), lambda: start)
        cron = await crons.create(
            assistant_id=LEAD, thread_id=None, user_id=None, schedule="* * * * *", timezone=None,
            end_time=None, enabled=True, payload={"input": {"messages": [{"role": "user", "content": "hi"}]}},
            metadata={},
        )

        async def cron_runs() -> dict[str, list[str]]:
            """The statuses of the cron's runs, by the tick they belong to."""
            found: dict[str, list[str]] = {}
            for row in await client.admin.store.fetch_rows(sa.select(ap_runs.c.metadata, ap_runs.c.status)):
                meta = json.loads(row["metadata"] or "{}")
                if meta.get("cron_id") == cron["cron_id"]:
                    found.setdefault(meta["cron_scheduled_at"], []).append(row["status"])
            return found

        def minute(n: int) -> str:
            return datetime.fromtimestamp(start + 60 * n - 30, UTC).isoformat()

        async def ran(n: int, statuses: tuple[str, ...] = ("success",)) -> bool:
            found = (await cron_runs()).get(minute(n)) or []
            return len(found) == 1 and found[0] in statuses

        victim = await asyncio.to_thread(scheduler, dies)
        procs.append(victim)
        set_clock(start + 60)  # minute 1 comes due: the victim claims it and dies
        assert await asyncio.to_thread(victim.wait, ceiling(60)) == -9
        assert (await crons.get(cron["cron_id"], None))["next_run_at"] > start + 60  # claimed

        for _ in range(workers):  # the restarted worker(s)
            procs.append(await asyncio.to_thread(scheduler))
        # killed as it started, the run ends as the engine ends a run whose process died (before
        # its first checkpoint: failed, "the process died ..."), once
        first = ("success",) if dies == "claimed" else ("success", "error")
        await wait_until(lambda: ran(1, first), timeout=ceiling(120) + QUEUED_START_SECONDS, interval=0.1,
                         what="minute 1's run, once")
        set_clock(start + 120)  # the schedule goes on, once a tick
        await wait_until(lambda: ran(2), timeout=ceiling(120), interval=0.1, what="minute 2's run")
        counts = await cron_runs()
        assert set(counts) == {minute(1), minute(2)} and counts[minute(2)] == ["success"], counts
        runs = [r for r in await client.admin.store.fetch_rows(sa.select(ap_runs))
                if json.loads(r["metadata"] or "{}").get("cron_id") == cron["cron_id"]]
        for run in runs:  # each tick's thread holds one message, the run's: it started once
            messages = await client.conversations.messages(run["thread_id"])
            assert [m["id"] for m in messages] == [run["message_id"]], (run, messages)
            if run["status"] == "error":
                assert "process died" in (messages[0]["error"] or ""), messages[0]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        await client.aclose()
