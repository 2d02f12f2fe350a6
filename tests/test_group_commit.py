"""The group commit of event batches (SQLite: on the store's writer thread; PostgreSQL: through
SQLAlchemy): what one shared transaction stores, and how one run's failure stays its own."""

from __future__ import annotations

import asyncio
import time

import pytest
import sqlalchemy.exc

from artifactflow.core.store.group_commit import group_commit_for
from artifactflow.core.store.repository import AppStore
from artifactflow.core.store.sqlite_writer import sqlite_writer_for
from artifactflow.errors import LeaseLostError


def _event(event_id: int, agent: str | None = "lead_agent", **data: object) -> dict[str, object]:
    return {
        "event_id": event_id,
        "type": "agent_start",
        "agent": agent,
        "timestamp": time.time(),
        "data": data,
    }


async def _message(store: AppStore, token: str) -> str:
    conv = await store.create_conversation()
    message = await store.add_message(
        conversation_id=conv["id"], content="x", parent_id=None, status="running", run_token=token
    )
    return message["id"]


async def test_batches_of_several_runs_share_a_transaction_and_keep_their_rows(store: AppStore):
    a, b = await _message(store, "ta"), await _message(store, "tb")
    group = group_commit_for(store)
    big = "w" * 4000  # compressed into data_z
    await asyncio.gather(
        group.append(
            a, [_event(1, text="one"), _event(2, agent="bad\x00name", text=big)], run_token="ta"
        ),
        group.append(b, [_event(1, text="other")], run_token="tb"),
        group.append(b, [_event(2)]),  # no token: not checked
    )
    writer = sqlite_writer_for(store)
    assert (writer is not None) == store.is_sqlite  # SQLite: the batches went to its writer
    assert writer is None or writer.transactions >= 1
    rows = await store.events(a)
    assert [(r["event_id"], r["agent"], r["data"]) for r in rows] == [
        (1, "lead_agent", {"text": "one"}),
        (2, "bad\ufffdname", {"text": big}),  # NUL replaced as on every string column
    ]
    assert [(r["event_id"], r["data"]) for r in await store.events(b)] == [
        (1, {"text": "other"}),
        (2, {}),
    ]


async def test_a_run_that_lost_its_message_writes_nothing_and_fails_alone(store: AppStore):
    a, b = await _message(store, "ta"), await _message(store, "tb")
    group = group_commit_for(store)
    results = await asyncio.gather(
        group.append(a, [_event(1)], run_token="stale"),
        group.append(b, [_event(1)], run_token="tb"),
        return_exceptions=True,
    )
    assert isinstance(results[0], LeaseLostError) and results[1] is None
    assert await store.events(a) == []
    assert [r["event_id"] for r in await store.events(b)] == [1]
    assert await store.holds_run(b, "tb") and not await store.holds_run(a, "stale")


async def test_a_bad_batch_fails_its_run_with_the_usual_error_and_spares_the_others(
    store: AppStore,
):
    a, b = await _message(store, "ta"), await _message(store, "tb")
    group = group_commit_for(store)
    await group.append(a, [_event(1)], run_token="ta")
    results = await asyncio.gather(
        group.append(a, [_event(1)], run_token="ta"),  # a duplicate event id
        group.append(b, [_event(1)], run_token="tb"),
        return_exceptions=True,
    )
    assert isinstance(results[0], sqlalchemy.exc.IntegrityError) and results[1] is None
    assert [r["event_id"] for r in await store.events(a)] == [1]
    assert [r["event_id"] for r in await store.events(b)] == [1]
    with pytest.raises(sqlalchemy.exc.IntegrityError):
        await group.append(a, [_event(1)], run_token="ta")
