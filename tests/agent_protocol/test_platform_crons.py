"""Crons (issue 35): the endpoints through LangGraph's client, and the scheduler driven by a
clock the test moves: a once-a-minute cron starts one run per minute across two PostgreSQL
workers (one on SQLite), never twice; after a downtime it runs once; deleted, it stops; runs
made by a cron say so in their metadata."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from langgraph_sdk import get_client

from artifactflow.errors import NotFoundError
from artifactflow.protocol import webhooks
from artifactflow.protocol.crons import Crons, CronScheduler
from artifactflow.protocol.service import Protocol
from artifactflow.protocol.wire import RunCreate

from .conftest import _database
from .helpers import human, last_ai, text_of
from .test_platform import WEBHOOKS, Platform, _platform, _receiver, _until
from .toy import ANSWER

START = datetime(2030, 1, 7, 9, 0, 30, tzinfo=UTC).timestamp()  # 30 s past a minute


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def platform(request: pytest.FixtureRequest, llm_env: Any, tmp_path: Path) -> AsyncIterator[Platform]:
    async with _platform(request.param, llm_env, tmp_path, "crons:\n  enabled: false\n") as p:
        yield p


async def test_cron_endpoints(platform: Platform) -> None:
    c = platform.client
    made = await c.crons.create(
        platform.lead, schedule="*/5 * * * *", input=human("hello"), metadata={"report": "daily"},
        timezone="Europe/Paris",
    )
    assert made["schedule"] == "*/5 * * * *" and made["timezone"] == "Europe/Paris"
    assert made["thread_id"] is None and made["enabled"] is True
    due = datetime.fromisoformat(made["next_run_date"])
    assert due > datetime.now(UTC) and due.minute % 5 == 0
    thread = await c.threads.create()
    for_thread = await c.crons.create_for_thread(thread["thread_id"], platform.lead, schedule="0 9 * * 1-5")
    assert for_thread["thread_id"] == thread["thread_id"]
    assert await c.crons.count() == 2
    assert [x["cron_id"] for x in await c.crons.search(thread_id=thread["thread_id"])] == [for_thread["cron_id"]]
    assert [x["cron_id"] for x in await c.crons.search(metadata={"report": "daily"})] == [made["cron_id"]]

    end = datetime.now(UTC) + timedelta(days=1)
    changed = await c.crons.update(made["cron_id"], schedule="0 * * * *", end_time=end)
    assert changed["schedule"] == "0 * * * *"
    assert datetime.fromisoformat(changed["end_time"]) == end.replace(microsecond=end.microsecond)
    # an end time before the next tick: nothing more is due
    ended = await c.crons.update(made["cron_id"], end_time=datetime.now(UTC) - timedelta(minutes=1))
    assert ended["next_run_date"] is None

    async with httpx.AsyncClient(base_url=platform.url) as http:
        for body, fragment in [
            ({"schedule": "* * * *"}, "5-field"),
            ({"schedule": "61 * * * *"}, "5-field"),
            ({"schedule": "* * * * * *"}, "5-field"),
            ({"schedule": "* * * * *", "timezone": "Mars/Olympus"}, "timezone"),
            ({"schedule": "* * * * *", "end_time": "soon"}, "end_time"),
            ({"schedule": "* * * * *", "config": {"configurable": {"model": 3}}}, "model"),
            ({"schedule": 5}, "schedule"),
            ({"schedule": "* * * * *", "webhook": "http://127.0.0.1:9/x"}, "webhooks.allow_private"),
        ]:
            response = await http.post("/runs/crons", json={"assistant_id": platform.lead, **body})
            assert response.status_code == 422, (body, response.text)
            assert fragment in json.dumps(response.json()["detail"]), response.text
        response = await http.post("/runs/crons", json={"assistant_id": "nobody", "schedule": "* * * * *"})
        assert response.status_code == 404
    assert await c.crons.count() == 2

    await c.crons.delete(made["cron_id"])
    assert await c.crons.count() == 1
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await c.crons.delete(made["cron_id"])
    assert gone.value.response.status_code == 404


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def workers(request: pytest.FixtureRequest, llm_env: Any, tmp_path: Path) -> AsyncIterator[list[Any]]:
    """Two workers on one PostgreSQL database, or one on SQLite: each a client and its
    protocol. The scripted model answers every run."""
    from conftest import make_config

    from artifactflow import Client, load_settings

    from .toy import toy_route, write_note

    llm_env.route(toy_route)
    async with _database(request.param) as database:
        config = make_config(tmp_path, lead_tools=["write_note"], yaml_text=database + WEBHOOKS)
        count = 2 if request.param == "postgres" else 1
        clients = [
            await Client.open(load_settings(config, tmp_path / "data"), extra_tools=[write_note])
            for _ in range(count)
        ]
        protocols = [Protocol(client) for client in clients]
        try:
            for p in protocols:
                await p.records.ready()
            yield protocols
        finally:
            for p in protocols:
                await p.aclose()
            for client in clients:
                await client.aclose()


async def _tick_all(schedulers: list[CronScheduler]) -> list[dict[str, Any]]:
    started = await asyncio.gather(*(s.tick() for s in schedulers))
    return [run for runs in started for run in runs]


async def test_once_a_minute_across_workers_then_downtime_then_delete(workers: list[Protocol]) -> None:
    clock = Clock(START)
    schedulers = [CronScheduler(p, clock) for p in workers]
    crons = Crons(workers[0], clock)
    cron = await crons.create(
        assistant_id=workers[0].client.admin.services.lead.name, thread_id=None, user_id=None,
        schedule="* * * * *", timezone=None, end_time=None, enabled=True,
        payload={"input": human("hello")}, metadata={},
    )
    assert cron["next_run_at"] == START + 30  # the next minute
    runs: list[dict[str, Any]] = []
    assert await _tick_all(schedulers) == []  # not due yet
    for _minute in range(10):
        for step in (30, 15, 15):  # several looks per minute, by every worker at once
            clock.now += step
            runs += await _tick_all(schedulers)
    assert len(runs) == 10, [r["metadata"] for r in runs]
    scheduled = [r["metadata"]["cron_scheduled_at"] for r in runs]
    assert len(set(scheduled)) == 10  # one run per minute, none twice
    assert {r["metadata"]["cron_id"] for r in runs} == {cron["cron_id"]}
    assert len({r["thread_id"] for r in runs}) == 10  # threadless: a new thread per run
    for run in runs:
        done = await workers[0].join(run)
        assert done["status"] == "success"

    # five minutes of downtime: one late run, not five
    clock.now += 5 * 60
    late = await _tick_all(schedulers)
    assert len(late) == 1
    clock.now += 15
    assert await _tick_all(schedulers) == []
    await workers[0].join(late[0])

    await crons.delete(cron["cron_id"], None)
    clock.now += 10 * 60
    assert await _tick_all(schedulers) == []


async def test_thread_cron_end_time_and_answer(workers: list[Protocol]) -> None:
    """A cron on a thread runs there (enqueued behind a busy run), stops at its end time, and
    its runs carry the answer."""
    p = workers[0]
    clock = Clock(START)
    conversation = await p.client.admin.store.create_conversation(None)
    thread_id = conversation["id"]
    crons = Crons(p, clock)
    cron = await crons.create(
        assistant_id=p.client.admin.services.lead.name, thread_id=thread_id, user_id=None,
        schedule="*/2 * * * *", timezone="Asia/Kolkata", end_time=START + 4 * 60, enabled=True,
        payload={"input": human("hello")}, metadata={"kind": "report"},
    )
    schedulers = [CronScheduler(w, clock) for w in workers]
    runs: list[dict[str, Any]] = []
    for _ in range(12):
        clock.now += 30
        runs += await _tick_all(schedulers)
        for run in runs:
            await p.join(run)
    # Kolkata is UTC+5:30: "*/2" there is every even minute of UTC too; two ticks before the end
    assert len(runs) == 2
    assert all(r["thread_id"] == thread_id for r in runs)
    assert (await crons.get(cron["cron_id"], None))["next_run_at"] is None
    messages = await p.client.conversations.messages(thread_id)
    answers = [m for m in messages if m["status"] == "completed"]
    assert len(answers) == 2
    state = await _state(p, thread_id)
    assert text_of(last_ai(state)) == ANSWER


async def _state(p: Protocol, thread_id: str) -> dict[str, Any]:
    import json

    from artifactflow.protocol.body import encode
    from artifactflow.protocol.deps import Ctx
    from artifactflow.protocol.threads import state_of

    conversation = await p.conversation(thread_id, None)
    values = (await state_of(Ctx(p, None), conversation))["values"]
    return json.loads(encode(values))  # its messages are JSON already (protocol/body.py)


async def test_cron_runs_from_the_server_loop(llm_env: Any, tmp_path: Path) -> None:
    """The app's own scheduler (real clock, fast polling) starts a due cron's run; the run's
    metadata names the cron."""
    async with _platform("sqlite", llm_env, tmp_path, "crons:\n  poll_seconds: 0.05\n") as p:
        made = await p.client.crons.create(p.lead, schedule="* * * * *", input=human("hello"))
        # make it due now rather than wait for the minute: the row's next time, moved back
        from artifactflow.core.store.schema import crons as table

        store = await _store_of(p)
        await store.write(table.update().values(next_run_at=datetime.now(UTC).timestamp() - 1))
        client = get_client(url=p.url, api_key=None)

        async def started() -> tuple[str, list[Any]] | None:
            """The cron's thread and its runs, once the run is stored (the thread is created
            first: on a busy machine a search can see it before its run)."""
            threads = await client.threads.search(limit=10)
            for thread in threads:
                if thread["metadata"].get("assistant_id"):
                    runs = await client.runs.list(thread["thread_id"])
                    if runs:
                        return thread["thread_id"], runs
            return None

        from waiting import ceiling, wait_until

        found = await wait_until(started, timeout=ceiling(120), what="the cron's run")
        assert found is not None
        thread_id, runs = found
        assert runs[0]["metadata"]["cron_id"] == made["cron_id"]
        await client.runs.join(thread_id, runs[0]["run_id"])


async def _store_of(p: Platform) -> Any:
    return p.app_client.admin.store


async def test_webhook_delivered_once_across_workers(workers: list[Protocol]) -> None:
    """Every worker may see a run end; the delivery row's compare-and-set lets one send it."""
    p = workers[0]
    settings = p.client.settings.webhooks
    async with _receiver() as receiver:
        body = {"assistant_id": p.client.admin.services.lead.name, "input": human("hello"), "webhook": receiver.url}
        run, _ = await p.create(None, RunCreate.model_validate(body), None)
        await p.join(run)
        await _until(lambda: receiver.hits)
        again = await asyncio.gather(
            *(webhooks.deliver(w.client.admin.store, settings, run["run_id"], {"run_id": run["run_id"]}) for w in workers)
        )
        assert again == [None] * len(workers)
        # a delivery none has claimed yet, asked of every worker at once: sent once
        await webhooks.register(p.client.admin.store, "race-run", receiver.url)
        sent = await asyncio.gather(
            *(webhooks.deliver(w.client.admin.store, settings, "race-run", {"run_id": "race-run"}) for w in workers)
        )
        assert sorted(sent, key=str) == sorted(["delivered"] + [None] * (len(workers) - 1), key=str)
        assert [hit[0]["run_id"] for hit in receiver.hits] == [run["run_id"], "race-run"]


async def test_threadless_cron_can_delete_its_threads(workers: list[Protocol]) -> None:
    p = workers[0]
    clock = Clock(START)
    crons = Crons(p, clock)
    await crons.create(
        assistant_id=p.client.admin.services.lead.name, thread_id=None, user_id=None,
        schedule="* * * * *", timezone=None, end_time=None, enabled=True,
        payload={"input": human("hello"), "on_run_completed": "delete"}, metadata={},
    )
    scheduler = CronScheduler(p, clock)
    clock.now += 30
    (run,) = await scheduler.tick()
    await asyncio.gather(*scheduler.cleanups)
    with pytest.raises(NotFoundError):
        await p.client.conversations.get(run["thread_id"])


async def test_a_claimed_run_not_started_in_time_is_queued_again(make_client: Any) -> None:
    """`server.queued_start_seconds` (issue 37; 30 s, a constant before): a queued run claimed
    (`starting`) longer ago than that is queued again by the next reader, its claimer having
    died between the claim and the start; one claimed since is left to its claimer."""
    import time

    import sqlalchemy as sa

    from artifactflow.core.store.schema import ap_runs

    assert (await make_client()).settings.server.queued_start_seconds == 30.0  # the default
    client = await make_client(yaml_text="server:\n  queued_start_seconds: 5\n")
    protocol = Protocol(client)
    await protocol.records.ready()
    thread_id = (await client.admin.store.create_conversation(None))["id"]

    async def claimed(seconds_ago: float) -> str:
        row = await protocol.records.add_run(
            thread_id=thread_id, assistant_id="lead_agent", status="starting", multitask_strategy="enqueue"
        )
        await client.admin.store.write(
            ap_runs.update().where(ap_runs.c.run_id == row["run_id"]).values(updated_at=time.time() - seconds_ago)
        )
        return str(row["run_id"])

    dead, alive = await claimed(8), await claimed(2)
    statuses = {r["run_id"]: r["status"] for r in await protocol.active_runs(thread_id)}
    assert statuses == {dead: "pending", alive: "starting"}
    assert (await protocol.records.run(dead) or {})["status"] == "pending"  # as stored
    await protocol.aclose()
    stored = await client.admin.store.fetch_rows(sa.select(ap_runs.c.run_id, ap_runs.c.status))
    assert {r["run_id"]: r["status"] for r in stored} == {dead: "pending", alive: "starting"}
