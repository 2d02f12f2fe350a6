"""An answer the model gives while PostgreSQL is away is kept (issue 34, item 4).

Before: a run whose event batch could not be written lost it ("could not store its last
events") and ended `failed`, although its model had answered; in the outage benchmark all 9
runs in flight ended that way. Now the run's events, its checkpoint and its `completed` ending
wait for the database (`store/outage_retry.py`) and are stored when it returns: the run ends
`completed` with its answer, its event ids gap-free and each stored once, `on_run_end` heard
once. A run that fails meanwhile (its model refuses) tells its readers while the database is
still away, and its ending is stored after its events once it is back. A private server
(tests/private_pg.py) is stopped while the model answers.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from conftest import make_config
from hooks_recorder import Recorder, open_client
from private_pg import PrivatePostgres, private_postgres
from scripted_llm import Error, Text
from waiting import ceiling, wait_until

from artifactflow import Client

RUNS = 4


@pytest_asyncio.fixture
async def server() -> AsyncIterator[PrivatePostgres]:
    with private_postgres() as pg:
        yield pg


@pytest_asyncio.fixture
async def opened(
    server: PrivatePostgres, tmp_path: Path, llm_env: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Client, Recorder]]:
    monkeypatch.setenv("ARTIFACTFLOW_DATABASE_URL", server.url)
    monkeypatch.setenv("ARTIFACTFLOW_DATABASE_POOL_SIZE", "3")
    recorder = Recorder()
    client = await open_client(make_config(tmp_path), tmp_path / "data", [recorder])
    try:
        yield client, recorder
    finally:
        await client.aclose()


def _task_of(body: dict[str, Any]) -> str:
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return str(users[-1])


async def test_answers_given_while_the_database_is_away_are_stored_when_it_returns(
    opened: tuple[Client, Recorder], server: PrivatePostgres, llm_env: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, recorder = opened
    gate = threading.Event()  # the model answers only once the database is down

    @llm_env.route
    def _answer(body: dict[str, Any]) -> Text | Error:
        gate.wait(ceiling(300))
        task = _task_of(body)
        return Error(400, "the model refused") if task == "doomed" else Text(f"answer to {task}")

    caplog.set_level(logging.INFO, logger="artifactflow.store")
    runs = [await client.runs.start(f"task {n}") for n in range(RUNS)]
    readers = [asyncio.create_task(_read_all(run)) for run in runs]  # attached before the outage
    doomed = await client.runs.start("doomed")  # its model call fails during the outage
    doomed_reader = asyncio.create_task(_read_all(doomed))
    await wait_until(lambda: llm_env.request_count == RUNS + 1, what="every model request")

    await asyncio.to_thread(server.stop, "fast")
    try:
        gate.set()
        told = await asyncio.wait_for(doomed_reader, ceiling(300))  # while the database is away
        assert told[-1].type == "error" and "database unavailable" in told[-1].data.message
        held = {f"run {run.message_id}: events" for run in runs}
        await wait_until(  # every run's answer was produced and could not be stored (before
            lambda: held <= {r.getMessage().split(": database")[0] for r in caplog.records}
            or all(r.done() for r in readers),  # the fix: each run ended `failed` instead)
            what="every run holding its answer's events",
        )
        assert not any(r.done() for r in readers)  # nothing published before it is stored
    finally:
        await asyncio.to_thread(server.start)

    seen = await asyncio.wait_for(asyncio.gather(*readers), ceiling(300))
    for n, (run, events) in enumerate(zip(runs, seen, strict=True)):
        assert events[-1].type == "complete", events[-1]
        assert events[-1].data.response == f"answer to task {n}"
        message = await client.conversations.message(run.message_id)
        assert (message["status"], message["response"]) == ("completed", f"answer to task {n}")
        stored = await client.runs.events(run.message_id)
        ids = [e.event_id for e in stored]
        assert ids == list(range(1, len(ids) + 1)), ids  # gap-free, each once
        assert [e.type for e in stored].count("complete") == 1
        assert [e.type for e in stored if e.type != "llm_chunk"] == [
            e.type for e in events if e.type != "llm_chunk"
        ]  # the readers saw exactly what was stored, in order
    failed = await wait_until(  # its ending is stored once the database is back, after its events
        lambda: _final_events(client, doomed.message_id), timeout=ceiling(300), what="the ending"
    )
    assert [e.event_id for e in failed] == list(range(1, len(failed) + 1))
    assert [e.type for e in failed].count("error") == 1 and failed[-1].type == "error"
    assert (await client.conversations.message(doomed.message_id))["status"] == "failed"
    ends = sorted(args[1].status for args in recorder.args("on_run_end"))
    assert ends == ["completed"] * RUNS + ["failed"], ends  # once per run


async def _read_all(run: Any) -> list[Any]:
    return [e async for e in run]


async def _final_events(client: Client, message_id: str) -> list[Any]:
    try:
        events = await client.runs.events(message_id)
    except Exception:  # the pools may still be reconnecting
        return []
    return events if events and events[-1].is_final else []
