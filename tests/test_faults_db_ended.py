"""A pooled connection the server has just ended: replaced, its failure an outage named so.

In the outage benchmark one run failed with asyncpg's "cannot switch to state 12; another
operation (2) is in progress", which reads as one connection used by two operations at once.
It was not:
when PostgreSQL stops (or terminates a backend) it sends each idle connection a FATAL
ErrorResponse, then closes it. asyncpg reads the error outside any operation and moves to its
error-consuming state (2); until it reads the end of the stream the connection does not look
closed, so the pool hands it out and the next statement fails with that text. asyncpg then
aborts the connection, SQLAlchemy replaces it, and the failure was already an outage (a 503; a
run's writes now wait it out: `store/outage_retry.py`), but its reason quoted asyncpg's text,
which reads as a bug. It now says the server ended the connection (`faults.ENDED_BY_SERVER`).

A proxy between the store and the shared server makes the window last: it sends the FATAL
message itself and keeps the socket open, as a server does for the instant between the two.
It also drops the answer to a committed statement (the connection lost between the commit and
its answer), which the retried writes of a run must not repeat: its event batch and its ending.
"""

from __future__ import annotations

import asyncio
import fcntl
import socket
import struct
import termios
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from pg import fresh_database
from sqlalchemy.engine import make_url
from waiting import wait_until

from artifactflow.core.run.eventlog import new_event
from artifactflow.core.run.live import EventSink, LiveRun
from artifactflow.core.run.outage import store_ending
from artifactflow.core.store.faults import ENDED_BY_SERVER, UNAVAILABLE, store_fault
from artifactflow.core.store.repository import AppStore
from artifactflow.events.payloads import AgentStartData, CompleteData


def _fatal(message: str) -> bytes:
    """A PostgreSQL ErrorResponse: FATAL 57P01 (what a stopping server sends)."""
    fields = b"".join(
        code + text.encode() + b"\0"
        for code, text in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", "57P01"), (b"M", message))
    ) + b"\0"
    return b"E" + struct.pack("!i", len(fields) + 4) + fields


class EndingProxy:
    """Forwards connections to the server; `end_all` ends them as a stopping server does,
    but leaves the sockets open."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.lose_reply_with: bytes | None = None  # see `_lost_reply`
        self.lost_replies = 0
        self.cut: list[asyncio.StreamWriter] = []
        self._clients: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._clients.append(writer)

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, down: bool) -> None:
            while data := await source.read(65536):
                if down and writer in self.cut:
                    continue  # the server "closed": nothing more reaches the client
                if down and self._lost_reply(data):
                    writer.close()  # the statement committed; its answer never arrives
                    return
                sink.write(data)
                await sink.drain()
            if not (down and writer in self.cut):
                sink.close()

        await asyncio.gather(
            pump(reader, up_writer, False), pump(up_reader, writer, True), return_exceptions=True
        )
        up_writer.close()

    def _lost_reply(self, data: bytes) -> bool:
        """Whether `data` is the answer to drop: the first one holding `lose_reply_with` and the
        end of its statement's implicit transaction (ReadyForQuery, idle): committed."""
        marker = self.lose_reply_with
        if marker is None or marker not in data or b"Z\x00\x00\x00\x05I" not in data:
            return False
        self.lose_reply_with = None
        self.lost_replies += 1
        return True

    def end_all(self) -> None:
        for writer in self._clients:
            if writer not in self.cut and not writer.is_closing():
                self.cut.append(writer)
                writer.write(_fatal("terminating connection due to administrator command"))

    async def close(self) -> None:
        for writer in self._clients:
            writer.close()
        if self._server is not None:
            self._server.close()


@pytest_asyncio.fixture
async def store_and_proxy() -> AsyncIterator[tuple[AppStore, EndingProxy]]:
    async with fresh_database() as url:
        parsed = make_url(url)
        proxy = EndingProxy(parsed.host or "127.0.0.1", parsed.port or 5432)
        await proxy.start()
        through = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        store = await AppStore.open(through, pool_size=1)
        try:
            yield store, proxy
        finally:
            await store.close()
            await proxy.close()


def _unread(sock: socket.socket) -> int:
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


async def test_a_connection_the_server_ended_is_replaced_and_its_failure_is_an_outage(
    store_and_proxy: tuple[AppStore, EndingProxy],
) -> None:
    store, proxy = store_and_proxy
    async with store.engine.connect() as conn:  # the pooled connection the server will end
        raw: Any = (await conn.get_raw_connection()).driver_connection
    assert await store.last_event_id("m") == 0

    proxy.end_all()
    # asyncpg has read the FATAL message (nothing left unread), the socket still open
    client_socket = raw._transport.get_extra_info("socket")  # noqa: SLF001 - observing only
    await wait_until(lambda: _unread(client_socket) == 0 and proxy.cut, what="the error read")
    assert not raw.is_closed()

    try:
        await store.last_event_id("m")  # handed the ended connection: the window of the bug
    except Exception as exc:
        failure: Exception = exc
    else:
        raise AssertionError("a statement on a connection the server ended succeeded")
    assert "another operation (2)" in str(failure)  # the benchmark's message, reproduced
    fault = store_fault(failure)
    assert fault is not None and fault.reason == UNAVAILABLE, repr(failure)
    assert ENDED_BY_SERVER in str(fault) and "another operation" not in str(fault)  # the reason
    assert raw.is_closed()  # replaced, never used again

    for _ in range(3):  # the pool goes on with new connections
        assert await store.last_event_id("m") == 0


async def test_a_batch_whose_commit_answer_was_lost_is_stored_once(
    store_and_proxy: tuple[AppStore, EndingProxy],
) -> None:
    """The retried event batch (`EventSink`, `store/outage_retry.py`) first reads which of its
    events an earlier attempt stored: a commit whose answer was lost with the connection
    writes nothing twice, and readers get each event once."""
    store, proxy = store_and_proxy
    token = "run-token-lost-answer"
    conv = await store.create_conversation()
    row = await store.add_message(
        conversation_id=conv["id"], content="x", parent_id=None, status="running", run_token=token
    )
    handle = LiveRun(row["id"])
    sink = EventSink(store, handle, run_token=token)
    try:
        for n in range(1, 4):  # warm both pooled connections (statements prepared)
            sink.put(new_event(row, AgentStartData(round=n), n, "lead_agent"))
            await sink.flush()
        proxy.lose_reply_with = token.encode()  # the batch's answer carries the run's token
        for n in range(4, 7):
            sink.put(new_event(row, AgentStartData(round=n), n, "lead_agent"))
        await sink.flush()
    finally:
        await sink.close()
    assert proxy.lost_replies == 1  # the batch committed and its answer was lost
    assert [e["event_id"] for e in await store.events(row["id"])] == [1, 2, 3, 4, 5, 6]
    assert [e.event_id for e in handle.events] == [1, 2, 3, 4, 5, 6]


async def test_a_completed_ending_whose_commit_answer_was_lost_is_stored_once(
    store_and_proxy: tuple[AppStore, EndingProxy],
) -> None:
    """The retried `completed` ending (`outage.store_ending`): its compare-and-set committed but
    the answer was lost; the retry loses the compare-and-set to that first attempt, sees the row
    is its own ending, and returns that stored event: one `complete`, the run not taken for lost."""
    store, proxy = store_and_proxy
    token = "run-token-lost-ending"
    conv = await store.create_conversation()
    row = await store.add_message(
        conversation_id=conv["id"], content="x", parent_id=None, status="running", run_token=token
    )
    proxy.lose_reply_with = b"COMMIT\x00"  # the ending's durable transaction
    event = await store_ending(
        store, row, CompleteData(response="the answer"), agent=None, status="completed",
        expected_status="running", expected_run_token=token, response="the answer",
    )
    assert proxy.lost_replies == 1
    assert event is not None and event.type == "complete" and event.event_id == 1
    stored = await store.events(row["id"])
    assert [(e["event_id"], e["type"]) for e in stored] == [(1, "complete")]
    message = await store.get_message(row["id"])
    assert message is not None and (message["status"], message["response"]) == ("completed", "the answer")
