"""Contract of the store's race-safe writes, on SQLite and PostgreSQL.

Status changes are compare-and-set on status and run token, in one transaction with their
event; event ids never collide; a run that lost its message writes nothing. "Two writers" are
two `AppStore`s on one database (separate engines and connections, as two processes would
have), released together.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from pg import fresh_database

from artifactflow.core.store.repository import AppStore
from artifactflow.errors import LeaseLostError

Opener = Callable[[], Awaitable[AppStore]]


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """A factory of stores that all open the same fresh database."""
    opened: list[AppStore] = []
    if request.param == "sqlite":
        path = tmp_path / "app.db"

        async def opener() -> AppStore:
            opened.append(await AppStore.open(None, sqlite_path=path))
            return opened[-1]

        try:
            yield opener
        finally:
            for s in opened:
                await s.close()
    else:
        async with fresh_database() as url:

            async def opener() -> AppStore:
                opened.append(await AppStore.open(url))
                return opened[-1]

            try:
                yield opener
            finally:
                for s in opened:
                    await s.close()


async def _waiting_message(store: AppStore, token: str = "t0") -> str:
    conv = await store.create_conversation()
    msg = await store.add_message(
        conversation_id=conv["id"], content="x", parent_id=None, status="waiting", run_token=token
    )
    await store.append_event(
        msg["id"], {"event_id": 1, "type": "permission_request", "timestamp": 1.0, "data": {}}
    )
    return msg["id"]


async def test_change_status_is_compare_and_set_with_its_event(open_store: Opener):
    store = await open_store()
    mid = await _waiting_message(store)
    lost = await store.change_status(
        mid, expected_status="waiting", expected_run_token="other", status="cancelled",
        event={"type": "cancelled", "data": {"reason": "x"}},
    )
    assert not lost and lost.status == "waiting" and lost.event is None
    won = await store.change_status(
        mid, expected_status="waiting", expected_run_token="t0", status="cancelled",
        run_token=None, lease_expires_at=None, waiting_for=None,
        event={"type": "cancelled", "data": {"reason": "by request"}},
    )
    assert won and won.status == "cancelled"
    assert won.event is not None and won.event["event_id"] == 2
    stored = await store.get_message(mid)
    assert (stored["status"], stored["run_token"], stored["waiting_for"]) == ("cancelled", None, None)
    events = await store.events(mid)
    assert [(e["event_id"], e["type"], e["data"]) for e in events] == [
        (1, "permission_request", {}), (2, "cancelled", {"reason": "by request"})
    ]
    again = await store.change_status(
        mid, expected_status="waiting", status="cancelled", event={"type": "cancelled"}
    )
    assert not again and again.status == "cancelled"
    missing = await store.change_status("nope", expected_status="waiting", status="cancelled")
    assert not missing and missing.status is None


async def test_cancel_racing_resume_has_one_winner_and_no_collision(open_store: Opener):
    """D1/D3 at the store: of cancels and claims released together, exactly one wins."""
    writers = [await open_store() for _ in range(2)]
    token = "t0"

    async def cancel(store: AppStore, mid: str) -> bool:
        change = await store.change_status(
            mid, expected_status="waiting", expected_run_token=token, status="cancelled",
            run_token=None, event={"type": "cancelled", "data": {}},
        )
        return change.won

    async def resume(store: AppStore, mid: str, n: int) -> bool:
        return await store.claim_message(
            mid, expected_status="waiting", expected_run_token=token,
            run_token=f"r{n}", lease_expires_at=0,
        )

    for trial in range(6):
        mid = await _waiting_message(writers[0], token)
        contenders = [
            cancel(writers[0], mid), cancel(writers[1], mid),
            resume(writers[1], mid, 1), resume(writers[0], mid, 2),
        ]
        if trial % 2:
            contenders.reverse()
        results = await asyncio.gather(*contenders)
        assert results.count(True) == 1, results
        stored = await writers[0].get_message(mid)
        events = await writers[1].events(mid)
        ids = [e["event_id"] for e in events]
        assert ids == list(range(1, len(ids) + 1))
        if stored["status"] == "cancelled":
            assert [e["type"] for e in events] == ["permission_request", "cancelled"]
        else:
            assert stored["status"] == "running" and stored["run_token"] in ("r1", "r2")
            assert [e["type"] for e in events] == ["permission_request"]


async def test_concurrent_writers_never_collide_on_event_ids(open_store: Opener):
    a, b = await open_store(), await open_store()
    mid = await _waiting_message(a)

    async def write(store: AppStore, who: str) -> list[int]:
        ids = []
        for i in range(15):
            event = await store.append_next_event(mid, {"type": "note", "data": {"who": who, "i": i}})
            ids.append(event["event_id"])
        return ids

    ids_a, ids_b = await asyncio.gather(write(a, "a"), write(b, "b"))
    assert sorted(ids_a + ids_b) == list(range(2, 32))
    events = await a.events(mid)
    assert [e["event_id"] for e in events] == list(range(1, 32))
    assert [e["data"]["i"] for e in events if e["data"].get("who") == "b"] == list(range(15))


async def test_event_id_conflict_from_an_unlocked_writer_is_retried(open_store: Opener):
    """A writer that skips the row lock (explicit ids) cannot make a status change fail."""
    a, b = await open_store(), await open_store()
    mid = await _waiting_message(a)

    async def legacy() -> None:
        for i in range(2, 40):
            try:
                await b.append_event(mid, {"event_id": i, "type": "x", "timestamp": 0.0, "data": {}})
            except Exception:
                return  # the status change took this id first; a legacy writer just stops

    async def changes() -> list[int]:
        ids = []
        for _ in range(10):
            event = await a.append_next_event(mid, {"type": "note"})
            ids.append(event["event_id"])
        change = await a.change_status(
            mid, expected_status="waiting", status="cancelled", event={"type": "cancelled"}
        )
        assert change.won and change.event is not None
        return [*ids, change.event["event_id"]]

    _, ids = await asyncio.gather(legacy(), changes())
    stored = [e["event_id"] for e in await a.events(mid)]
    assert len(stored) == len(set(stored)) and set(ids) <= set(stored)
    assert ids == sorted(ids)


async def test_stale_run_writes_no_events(open_store: Opener):
    """D8 at the store: after another process took the message over, the old owner's events
    are refused as a whole, and the new owner's are written."""
    old, new = await open_store(), await open_store()
    conv = await old.create_conversation()
    msg = await old.add_message(
        conversation_id=conv["id"], content="x", parent_id=None, run_token="old", lease_expires_at=5.0
    )
    mid = msg["id"]
    await old.append_events(
        mid, [{"event_id": 1, "type": "metadata", "timestamp": 0.0, "data": {}}], run_token="old"
    )
    assert await old.holds_run(mid, "old")
    assert await new.claim_message(
        mid, expected_status="running", expected_run_token="old", run_token="new",
        lease_expires_at=100.0, stale_before=10.0,
    )
    assert not await old.holds_run(mid, "old") and await new.holds_run(mid, "new")
    batch = [
        {"event_id": 2, "type": "agent_start", "timestamp": 0.0, "data": {}},
        {"event_id": 3, "type": "complete", "timestamp": 0.0, "data": {}},
    ]
    with pytest.raises(LeaseLostError, match="no longer owned"):
        await old.append_events(mid, batch, run_token="old")
    with pytest.raises(LeaseLostError):
        await old.append_next_event(mid, {"type": "error"}, run_token="old")
    assert [e["event_id"] for e in await new.events(mid)] == [1]
    await new.append_events(
        mid, [{"event_id": 2, "type": "metadata", "timestamp": 0.0, "data": {"recovered": True}}],
        run_token="new",
    )
    assert [e["data"] for e in await old.events(mid)] == [{}, {"recovered": True}]


async def test_lease_condition_on_takeover(open_store: Opener):
    store = await open_store()
    conv = await store.create_conversation()
    msg = await store.add_message(
        conversation_id=conv["id"], content="x", parent_id=None, run_token="a", lease_expires_at=50.0
    )
    live = await store.change_status(
        msg["id"], expected_status="running", expected_run_token="a", stale_before=40.0,
        status="failed", run_token=None, error="abandoned", event={"type": "error"},
    )
    assert not live and live.status == "running"
    expired = await store.change_status(
        msg["id"], expected_status=["waiting", "running"], expected_run_token="a",
        stale_before=60.0, status="failed", run_token=None, error="abandoned",
        event={"type": "error", "data": {"kind": "abandoned"}},
    )
    assert expired.won and expired.event is not None and expired.event["event_id"] == 1
    assert (await store.get_message(msg["id"]))["error"] == "abandoned"
