"""A PostgreSQL restart, then an outage, during Agent Protocol runs (issue 34), on a private
server (tests/private_pg.py; the shared one is never stopped).

Runs are started through `/threads/{id}/runs/stream` and read by SSE clients that reconnect
with `Last-Event-ID` when a stream is cut, as `EventSource` does. After the database is back:
every client has its run's final event, every run has ended with a status, no thread is left
`busy`; and nothing answered 5xx but 503 with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from killable_serve import FINAL_EVENTS, Seen, read_sse
from private_pg import PrivatePostgres, served_on_private_postgres
from scripted_llm import Text
from waiting import ceiling, wait_until

ENDED = {"complete", "error", "cancelled"}


@pytest_asyncio.fixture
async def served(make_client: Any, monkeypatch: pytest.MonkeyPatch, llm_env: Any) -> AsyncIterator[tuple[str, PrivatePostgres]]:
    llm_env.route(lambda request: Text("a slow answer " * 6, chunk_size=6, chunk_delay=0.1))
    async with served_on_private_postgres(make_client, monkeypatch) as (url, pg):
        yield url, pg


class Watch:
    """5xx answers seen, and whether each came as a 503 with `Retry-After`."""

    def __init__(self) -> None:
        self.bad: list[str] = []

    def check(self, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 500 and not (
            response.status_code == 503 and response.headers.get("Retry-After", "").isdigit()
        ):
            self.bad.append(f"{response.request.url.path}: {response.status_code}")
        return response


async def follow(http: httpx.AsyncClient, url: str, tid: str, watch: Watch, seen: Seen) -> Seen:
    """Start a run by streaming it, then rejoin its stream until its final event."""
    request: tuple[str, str, Any] = (
        "POST", f"{url}/threads/{tid}/runs/stream",
        {"assistant_id": "lead_agent", "stream_mode": ["values", "custom"],
         "input": {"messages": [{"role": "user", "content": "hello"}]}},
    )
    deadline = asyncio.get_running_loop().time() + ceiling(240)
    while asyncio.get_running_loop().time() < deadline:
        method, where, payload = request
        headers = {"Last-Event-ID": seen.last_id} if seen.last_id and method == "GET" else None
        with contextlib.suppress(httpx.TransportError):
            async with http.stream(method, where, json=payload, headers=headers) as response:
                watch.check(response)
                if response.status_code == 200:
                    async for _ in read_sse(response, seen):
                        pass
        if seen.events and seen.events[-1][1] in ENDED:
            return seen
        if seen.run_id:
            request = ("GET", f"{url}/threads/{tid}/runs/{seen.run_id}/stream", None)
        await asyncio.sleep(0.2)
    raise AssertionError(f"no final event: {seen.events}")


async def settled(http: httpx.AsyncClient, url: str, tid: str, watch: Watch) -> list[dict[str, Any]]:
    async def done() -> list[dict[str, Any]] | None:
        with contextlib.suppress(httpx.TransportError):
            thread = watch.check(await http.get(f"{url}/threads/{tid}"))
            runs = watch.check(await http.get(f"{url}/threads/{tid}/runs"))
            if thread.status_code == 200 and runs.status_code == 200 and thread.json()["status"] != "busy":
                listed: list[dict[str, Any]] = runs.json()
                return listed if all(r["status"] in ("success", "error", "interrupted") for r in listed) else None
        return None

    return await wait_until(done, timeout=ceiling(240), interval=0.2, what="the thread settled")


async def runs_through(http: httpx.AsyncClient, url: str, watch: Watch, fault: Any) -> None:
    threads = []
    for _ in range(3):
        made = await http.post(f"{url}/threads", json={})
        assert made.status_code == 200, made.text
        threads.append(made.json()["thread_id"])
    seen = [Seen() for _ in threads]
    readers = [asyncio.create_task(follow(http, url, tid, watch, s)) for tid, s in zip(threads, seen, strict=True)]
    await wait_until(lambda: all(s.run_id and s.events for s in seen), timeout=ceiling(60), what="the runs streaming")
    await fault()
    await asyncio.gather(*readers)
    for tid, client_saw in zip(threads, seen, strict=True):
        assert client_saw.events[-1][1] in FINAL_EVENTS and client_saw.repeated == 0, client_saw.events
        runs = await settled(http, url, tid, watch)
        assert len(runs) == 1 and runs[0]["status"] in ("success", "error"), runs


async def test_protocol_runs_through_a_restart_and_an_outage(served: tuple[str, PrivatePostgres]) -> None:
    url, pg = served
    watch = Watch()
    async with httpx.AsyncClient(timeout=ceiling(60)) as http:

        async def restart() -> None:
            await asyncio.to_thread(pg.restart, "fast")

        await runs_through(http, url, watch, restart)

        async def outage() -> None:
            await asyncio.to_thread(pg.stop, "fast")
            try:
                down = watch.check(await http.get(f"{url}/threads/{'0' * 8}"))
                assert down.status_code == 503 and down.headers["Retry-After"].isdigit(), down.text
                await asyncio.sleep(1.0)
            finally:
                await asyncio.to_thread(pg.start)

        await runs_through(http, url, watch, outage)
    assert watch.bad == []
