"""Writes that fail on SQLite: a full disk and a database that refuses writes (D4).

A full disk is real SQLite behaviour reproduced without root: `PRAGMA max_page_count` set to
the file's current size makes every write that needs a new page fail with "database or disk
is full", exactly as a full file system does. `PRAGMA query_only` makes every write fail
("attempt to write a readonly database"), the way a read-only data folder does; lifting it is
space coming back. Both are applied on connection checkout, to every connection of the app
store, while the test's `faults` switch says so.

What must hold: the run ends `failed` with the cause named (never `running`), its readers get
a final event with the cause at once, the stored final event follows as soon as a write
succeeds again, and no task exception is left unretrieved.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from cli_helpers import MESSAGE_ID, make_cli
from scripted_llm import Delay, Text
from sqlalchemy import event as sa_event
from waiting import wait_until

from artifactflow import Client
from artifactflow.core.store.sqlite_writer import sqlite_writer_for


class Faults:
    """Which failure the app store's connections get: the pooled ones on their next checkout,
    the store's SQLite writer (the hot path's own connection) when the mode is set."""

    def __init__(self, client: Client) -> None:
        self._mode: str | None = None
        store = client._engine.store  # noqa: SLF001 - the test reaches the real file
        self.writer = sqlite_writer_for(store)
        sa_event.listen(store.engine.sync_engine, "checkout", self._apply)

    @property
    def mode(self) -> str | None:
        return self._mode

    async def set(self, mode: str | None) -> None:
        self._mode = mode
        if self.writer is not None:
            await self.writer.run(self._restrict)

    def _apply(self, dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        self._restrict(dbapi_conn)

    def _restrict(self, conn: Any) -> None:
        cursor = conn.cursor()
        if self._mode == "full":
            cursor.execute("PRAGMA page_count")
            pages = cursor.fetchone()[0]
            cursor.execute(f"PRAGMA max_page_count={pages}")
        else:
            cursor.execute("PRAGMA max_page_count=1073741823")
        cursor.execute(f"PRAGMA query_only={1 if self._mode == 'read-only' else 0}")
        cursor.close()


@pytest_asyncio.fixture
async def client(make_client: Any) -> Client:
    opened: Client = await make_client()
    return opened


def _unretrieved(loop: asyncio.AbstractEventLoop) -> list[str]:
    seen: list[str] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(str(context.get("message"))))
    return seen


async def _read_all(run: Any) -> list[Any]:
    return [e async for e in run]


async def test_full_disk_ends_the_run_failed(client: Client, llm_env: Any) -> None:
    unretrieved = _unretrieved(asyncio.get_running_loop())
    faults = Faults(client)
    llm_env.script(Delay(0.5, Text("x" * 400_000, chunk_size=50_000)))  # needs new pages
    run = await client.runs.start("write a long answer")
    reader = asyncio.create_task(_read_all(run))
    await wait_until(lambda: llm_env.request_count == 1, what="the model request")
    await faults.set("full")

    events = await reader
    assert events[-1].type == "error" and "disk full" in events[-1].data.message
    await faults.set(None)  # space returns
    message = await wait_until(
        lambda: _ended(client, run.message_id), what="a final status"
    )
    assert message is not None and message["status"] == "failed", message
    assert "disk full" in message["error"], message
    stored = await client.runs.events(run.message_id)
    assert stored[-1].type == "error" and "disk full" in stored[-1].data.message
    gc.collect()
    await asyncio.sleep(0)
    assert not [m for m in unretrieved if "never retrieved" in m], unretrieved


async def test_final_write_waits_for_writes_to_succeed_again(client: Client, llm_env: Any) -> None:
    unretrieved = _unretrieved(asyncio.get_running_loop())
    faults = Faults(client)
    llm_env.script(Delay(0.5, Text("done")))
    run = await client.runs.start("a run whose database stops taking writes")
    reader = asyncio.create_task(_read_all(run))
    await wait_until(lambda: llm_env.request_count == 1, what="the model request")
    await faults.set("read-only")

    events = await reader  # told at once, while nothing can be written
    assert events[-1].type == "error" and "read-only" in events[-1].data.message
    assert run.message_id in events[-1].data.message
    assert (await client.conversations.message(run.message_id))["status"] == "running"

    await faults.set(None)  # writes succeed again: the final status lands without anyone asking
    message = await wait_until(
        lambda: _ended(client, run.message_id), what="a final status"
    )
    assert message is not None and message["status"] == "failed", message
    assert "read-only" in message["error"], message
    stored = await client.runs.events(run.message_id)
    assert [e.type for e in stored].count("error") == 1 and stored[-1].type == "error"
    gc.collect()
    await asyncio.sleep(0)
    assert not [m for m in unretrieved if "never retrieved" in m], unretrieved


async def _ended(client: Client, message_id: str) -> dict[str, Any] | None:
    message = await client.conversations.message(message_id)
    return dict(message) if message["status"] != "running" else None


async def test_durable_writes_sync_the_wal_on_sqlite(tmp_path: Path) -> None:
    """SQLite runs with `synchronous=NORMAL`; a durable transaction (the ledger's "started"
    record, a final status) runs with `FULL` on its connection, and the pool gets NORMAL back."""
    from sqlalchemy import event as sa_event

    from artifactflow.core.store.repository import AppStore

    store = await AppStore.open(None, sqlite_path=tmp_path / "app.db")
    try:
        levels: list[tuple[str, int]] = []

        def record(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            if statement.startswith(("INSERT INTO af_tool_executions", "UPDATE af_messages")):
                raw = conn.connection.dbapi_connection
                cursor = raw.cursor()
                cursor.execute("PRAGMA synchronous")
                levels.append((statement.split()[0], cursor.fetchone()[0]))
                cursor.close()

        sa_event.listen(store.engine.sync_engine, "before_cursor_execute", record)
        assert await store.ledger_begin("m1", "call-1") == "started"  # the tool node's call
        # the ledger through SQLAlchemy: FULL while it runs; the status changes on the
        # store's writer (`writer_statements.py`): FULL around a final one and a claim with
        # decisions, the connection's NORMAL for a pause and after each
        assert levels == [("INSERT", 2)]
        writer = sqlite_writer_for(store)
        assert writer is not None
        traced: list[str] = []
        await writer.run(lambda conn: conn.set_trace_callback(traced.append))
        await store.change_status("m1", expected_status="running", status="failed")
        await store.change_status("m1", expected_status="running", status="waiting")
        await store.change_status(  # a resume's claim that stores the accepted decisions
            "m1", expected_status="waiting", status="running", decisions={"d": 1}
        )
        synchronous = [
            s.split()[1]
            for s in traced
            if s.startswith(("PRAGMA", "UPDATE")) and "busy_timeout" not in s
        ]
        assert synchronous == [
            "synchronous=FULL", "af_messages", "synchronous=NORMAL",  # failed
            "af_messages",  # waiting
            "synchronous=FULL", "af_messages", "synchronous=NORMAL",  # running + decisions
        ], traced
        assert await writer.run(lambda conn: conn.execute("PRAGMA synchronous").fetchall()) == [(1,)]
        async with store.engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA synchronous")).scalar() == 1
    finally:
        await store.close()


@pytest.fixture
def read_only_folder() -> Iterator[Callable[[Path], None]]:
    """Makes a folder and its files unwritable: `chattr +i` as root (root ignores
    permissions), `chmod a-w` otherwise; undone at teardown."""
    made: list[Path] = []

    def make(folder: Path) -> None:
        paths = [folder, *folder.iterdir()]
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
        else:
            for path in paths:
                path.chmod(path.stat().st_mode & ~0o222)
        made.extend(paths)

    yield make
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", *map(str, made)], check=False)
    else:
        for path in made:
            path.chmod(path.stat().st_mode | 0o200)


def test_reading_commands_work_in_a_read_only_data_folder(
    tmp_path: Path,
    llm_env: Any,
    capsys: pytest.CaptureFixture[str],
    read_only_folder: Callable[[Path], None],
) -> None:
    cli = make_cli(tmp_path, capsys)  # each command a process of its own (forked: cli_fork.py)
    llm_env.script(Text("stored answer"))
    first = cli.fork("run", "answer once")
    assert first.code == 0, first.err
    message_id = MESSAGE_ID.search(first.out + first.err)
    assert message_id is not None, first.out
    read_only_folder(cli.data)

    listing = cli.fork("conversations")
    assert listing.code == 0, listing.err
    events = cli.fork("events", message_id.group(1))
    assert events.code == 0, events.err
    assert "stored answer" in events.out
    write = cli.fork("run", "answer again")
    assert write.code != 0
    assert "read-only" in write.out + write.err, write
    assert "Traceback" not in write.err


def test_only_database_errors_count_as_an_outage(tmp_path: Path) -> None:
    """A model server refusing connections is not a database outage; SQLite's texts name
    the cause."""
    import socket
    import sqlite3

    import httpx

    from artifactflow.core.store.faults import store_fault

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(httpx.ConnectError) as refused:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
    assert store_fault(refused.value) is None
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.execute("PRAGMA query_only=1")
    with pytest.raises(sqlite3.OperationalError) as readonly:
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    fault = store_fault(readonly.value)
    assert fault is not None and fault.reason == "read-only", fault


async def test_a_run_ended_after_an_outage_fires_on_run_end_once(
    tmp_path: Path, llm_env: Any
) -> None:
    """A run whose final write had to wait for the store still tells its hooks how it ended,
    once: `on_run_end("failed")` when the ending is finally stored (issue 34)."""
    from conftest import make_config

    from artifactflow import load_settings
    from artifactflow.hooks import Hooks

    class Ends(Hooks):
        name = "ends"

        def __init__(self) -> None:
            self.seen: list[str] = []

        async def on_run_end(self, run: Any, end: Any) -> None:
            self.seen.append(end.status)

    ends = Ends()
    client = await Client.open(load_settings(make_config(tmp_path), tmp_path / "data"), hooks=[ends])
    try:
        faults = Faults(client)
        llm_env.script(Delay(0.5, Text("done")))
        run = await client.runs.start("a run whose database stops taking writes")
        reader = asyncio.create_task(_read_all(run))
        await wait_until(lambda: llm_env.request_count == 1, what="the model request")
        await faults.set("read-only")
        await reader
        await faults.set(None)
        await wait_until(lambda: _ended(client, run.message_id), what="a final status")
        await wait_until(lambda: ends.seen, what="on_run_end")
        assert ends.seen == ["failed"]
    finally:
        await client.aclose()
    assert ends.seen == ["failed"]
