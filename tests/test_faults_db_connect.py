"""A PostgreSQL server that does not answer a connect is noticed in seconds (issue 34).

Before: the app store's connections were opened with asyncpg's default connect timeout (60 s),
the checkpoint pool with libpq's (none), so a database host that stopped answering (a network
partition, a server stuck while restarting) held every request and run for a minute before
anything was said, and its return was noticed as late. Now opening a connection is bounded by
`CONNECT_TIMEOUT_SECONDS` (query time is not), and the failure is named an outage
("database unavailable": the HTTP layer's 503 with Retry-After, a run's stored reason).

The silent server: a local socket that accepts connections and never says a word.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from artifactflow.core.store.faults import UNAVAILABLE, store_fault
from artifactflow.core.store.repository import AppStore
from artifactflow.core.store.unit_of_work import CONNECT_TIMEOUT_SECONDS

ASYNCPG_DEFAULT_SECONDS = 60.0


@pytest.fixture
def silent_port() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)  # kept open, never answered

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        for conn in held:
            conn.close()


async def test_a_silent_database_fails_the_connect_in_seconds_as_an_outage(silent_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        store = await AppStore.open(f"postgresql://app@127.0.0.1:{silent_port}/app")
        await store.close()
    took = time.monotonic() - started
    # bounded by the connect timeout, far below asyncpg's default minute (a busy machine may add
    # seconds, never fifty)
    assert took < ASYNCPG_DEFAULT_SECONDS - 10, took
    assert took >= CONNECT_TIMEOUT_SECONDS - 1, took  # it did wait for an answer first
    fault = store_fault(raised.value)
    assert fault is not None and fault.reason == UNAVAILABLE, raised.value
