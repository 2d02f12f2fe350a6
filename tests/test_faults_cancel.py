"""A cancel is never lost (issue 22, D1): it takes effect, or it answers why not.

The cancel is recorded in the database (`af_messages.cancel_requested_at`, `core/run/cancel.py`)
and every step of the run's owner honours it. Checked with two workers (two `Client`s) on one
fresh PostgreSQL database racing a resume against a cancel many times; and one at a time, each
place where the owner could otherwise miss the cancel: its notification never arrives, the
approved tool is about to start, the owner died.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from conftest import make_config
from pg import fresh_database
from scripted_llm import Call, Text, ToolCalls
from waiting import TIMEOUT, wait_until

from artifactflow import Client, Resume, load_settings
from artifactflow.api.app import create_app
from artifactflow.core.store import migrate
from artifactflow.core.store import schema as t
from artifactflow.core.store.repository import AppStore
from artifactflow.errors import ResumeConflictError

PLUGIN = '''
import os, time
from artifactflow import tool

@tool(permission="confirm")
def record_effect(tag: str) -> str:
    """Record a side effect (needs approval).

    Args:
        tag: What to record.
    """
    with open(os.environ["AF_JOURNAL"], "a", encoding="utf-8") as f:
        f.write(f"{tag} {time.time()!r}\\n")
    return "recorded " + tag

@tool
async def wait_a_bit(seconds: float) -> str:
    """Wait.

    Args:
        seconds: How long.
    """
    import asyncio
    await asyncio.sleep(seconds)
    return "waited"
'''

PAIRS = 20


def _route(request: dict[str, Any]) -> Any:
    """Stateless model: ask for the side effect named in the task, then answer."""
    messages = request.get("messages") or []
    task = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    if messages and messages[-1].get("role") == "tool":
        return Text("done")
    if "wait" in task:
        return ToolCalls([Call("wait_a_bit", {"seconds": 0.5})])
    return ToolCalls([Call("record_effect", {"tag": task.split()[-1]})])


@pytest.fixture
def config(tmp_path: Path, journal: Path, llm: Any) -> Path:
    llm.route(_route)
    return make_config(
        tmp_path,
        lead_tools=["record_effect", "wait_a_bit"],
        yaml_text="plugins: [effects]\n",
        plugin_files={"effects.py": PLUGIN},
    )


@pytest.fixture
async def workers(
    config: Path, tmp_path: Path, llm_env: Any
) -> AsyncIterator[tuple[Client, Client]]:
    """Two workers on one fresh PostgreSQL database (each its own bus connection)."""
    async with fresh_database() as url:
        a = await Client.open(load_settings(config, tmp_path / "data-a", database_url=url))
        b = await Client.open(load_settings(config, tmp_path / "data-b", database_url=url))
        try:
            yield a, b
        finally:
            await a.aclose()
            await b.aclose()


def _effects(journal: Path, tag: str) -> list[float]:
    """When the tool ran for `tag` (one time per run)."""
    lines = journal.read_text(encoding="utf-8").splitlines() if journal.exists() else []
    return [float(line.split()[1]) for line in lines if line.split()[0] == tag]


async def _ended(client: Client, message_id: str) -> dict[str, Any]:
    async def ended() -> Any:
        message = await client.admin.store.get_message(message_id)
        return (
            message
            if message and message["status"] in ("completed", "cancelled", "failed")
            else None
        )

    return dict(await wait_until(ended))


async def test_resume_and_cancel_racing_on_two_workers_never_drop_the_cancel(
    workers: tuple[Client, Client], journal: Path
) -> None:
    a, b = workers
    seen: dict[str, int] = {"cancel won": 0, "resume won": 0}
    for i in range(PAIRS):
        tag = f"pair{i}"
        resumer, canceller = (a, b) if i % 2 == 0 else (b, a)
        paused = await a.run(f"task {tag}")
        assert paused.status == "waiting"
        resumed, cancelled = await asyncio.gather(
            resumer.runs.start(Resume(paused.message_id, "approve")),
            canceller.runs.cancel(paused.message_id),
            return_exceptions=True,
        )
        assert not isinstance(cancelled, BaseException), cancelled
        if isinstance(resumed, BaseException):
            assert isinstance(resumed, ResumeConflictError), resumed  # the cancel closed the pause
        message = await _ended(a, paused.message_id)
        effects = _effects(journal, tag)
        log = [e.type for e in await a.runs.events(paused.message_id)]
        assert log.count("permission_request") == 1 and len(effects) <= 1
        if cancelled is True:
            seen["cancel won"] += 1
            assert message["status"] == "cancelled", (i, message["status"], log)
            # The approved tool did not run, unless it had started before the cancel was accepted.
            accepted = message["cancel_requested_at"]
            assert not effects or (accepted is not None and effects[0] <= accepted), (
                i,
                effects,
                accepted,
            )
        else:
            seen["resume won"] += 1  # the cancel lost to a run that ended first: it said so
            assert message["status"] == "completed" and effects, (i, message["status"], log)
            assert not isinstance(resumed, BaseException)
    assert seen["cancel won"] > 0, seen


async def test_a_cancel_whose_notice_never_arrives_still_ends_the_run(
    make_client: Any, config: Path
) -> None:
    client = await make_client(config_dir=config)
    run = await client.runs.start("please wait")
    await wait_until(lambda: _has(client, run.message_id, "tool_start"))
    # What another worker records when its bus message is lost: the flag, and nothing else.
    assert (await client.admin.store.request_cancel(run.message_id, now=time.time())).won
    message = await _ended(client, run.message_id)
    assert message["status"] == "cancelled"  # not `completed`: its final change lost to the cancel
    assert [e.type for e in await client.runs.events(run.message_id)][-1] == "cancelled"


async def test_an_approved_call_does_not_start_once_a_cancel_is_accepted(store: AppStore) -> None:
    conversation = await store.create_conversation()
    message = await store.add_message(
        conversation_id=conversation["id"], content="x", parent_id=None
    )
    assert await store.ledger_begin(message["id"], "inv/0/c1") == "started"
    assert await store.ledger_begin(message["id"], "inv/0/c1") == "exists"
    assert (await store.request_cancel(message["id"], now=time.time())).won
    assert await store.ledger_begin(message["id"], "inv/0/c2") == "cancelled"
    assert await store.ledger_get(message["id"], "inv/0/c2") is None  # nothing recorded


async def test_a_dead_owners_cancelled_run_is_ended_not_recovered(
    make_client: Any, config: Path
) -> None:
    client = await make_client(config_dir=config)
    paused = await client.run("task dead")
    store = client.admin.store
    # The resume's process claimed the pause, a cancel was accepted, and the process died.
    await store.change_status(
        paused.message_id,
        expected_status="waiting",
        status="running",
        run_token="dead",
        lease_expires_at=0.0,
        waiting_for=None,
    )
    assert (await store.request_cancel(paused.message_id, now=time.time())).won
    assert await client.runs.cancel(paused.message_id) is True
    message = await store.get_message(paused.message_id)
    assert message is not None and message["status"] == "cancelled"


async def test_a_cancel_that_lost_is_a_conflict_over_http(make_client: Any, config: Path) -> None:
    af = await make_client(config_dir=config)
    done = await af.run("please wait")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(client=af)), base_url="http://testserver"
    ) as http:
        response = await http.post(f"/api/v1/chat/{done.message_id}/cancel")
    assert response.status_code == 409, response.text
    assert response.json()["error"]["message"] == (
        f"message {done.message_id} cannot be cancelled: it has completed"
    )


async def test_a_version_1_database_gains_the_cancel_and_decision_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = await AppStore.open(None, sqlite_path=path)
    async with store.engine.begin() as conn:  # make it what version 1 created
        for column in t.MESSAGE_COLUMNS_V2:
            await conn.execute(sa.text(f"ALTER TABLE af_messages DROP COLUMN {column().name}"))
        await conn.execute(t.meta.update().where(t.meta.c.key == "schema").values(value="1"))
    await store.close()
    store = await AppStore.open(None, sqlite_path=path)
    try:
        assert await store.schema_version() == t.SCHEMA_VERSION and 2 in migrate.STEPS
        conversation = await store.create_conversation()
        message = await store.add_message(
            conversation_id=conversation["id"], content="x", parent_id=None
        )
        assert (await store.request_cancel(message["id"], now=1.0)).won
        stored = await store.get_message(message["id"])
        assert (
            stored is not None
            and stored["cancel_requested_at"] == 1.0
            and stored["decisions"] is None
        )
    finally:
        await store.close()


async def _has(client: Client, message_id: str, kind: str) -> bool:
    return kind in [e.type for e in await client.runs.events(message_id)]



async def test_a_second_cancel_while_the_run_ends_cancelled_does_not_strand_it(
    make_client: Any, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flag ends the run (its final change loses to the accepted cancel); while that is
    being written, the bus notice of the same cancel arrives and cancels the task. That second
    cancellation used to cut the final write short and leave the message `running`."""
    from artifactflow.core.run import segment

    ending = asyncio.Event()
    cancelled = segment.Segment._cancelled

    async def slow_cancelled(self: segment.Segment) -> None:
        ending.set()
        await asyncio.sleep(0.3)  # a loaded machine: the final write is still on its way
        await cancelled(self)

    monkeypatch.setattr(segment.Segment, "_cancelled", slow_cancelled)
    client = await make_client(config_dir=config)
    run = await client.runs.start("please wait")
    await wait_until(lambda: _has(client, run.message_id, "tool_start"))
    assert (await client.admin.store.request_cancel(run.message_id, now=time.time())).won
    await asyncio.wait_for(ending.wait(), TIMEOUT)
    rt = client._engine.rt  # what the bus notice does on the owner (`workers._on_control`)
    await asyncio.wait_for(segment.cancel(rt, run.message_id), TIMEOUT)
    message = await _ended(client, run.message_id)
    assert message["status"] == "cancelled"
    assert [e.type for e in await client.runs.events(run.message_id)].count("cancelled") == 1
