"""SSE readers that attach while the database is away (issue 34), on a private PostgreSQL
(tests/private_pg.py; the shared one is never stopped).

A join of a run's stream (`GET /threads/{id}/runs/{run_id}/stream`, `GET /threads/{id}/stream`)
or a new streamed run (`POST /threads/{id}/runs/stream`) during an outage gets a clear answer,
as every other route does: 503 with `Retry-After` before the stream starts, or, once it has
started, an `error` frame that says so and a clean end; never a stream cut without a body.
After the database is back the same join streams the run to its end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
from killable_serve import Seen, read_sse
from private_pg import PrivatePostgres, served_on_private_postgres
from scripted_llm import Text
from waiting import ceiling, wait_until

STREAM = {"stream_mode": ["values", "custom"]}


@pytest_asyncio.fixture
async def served(make_client: Any, monkeypatch: Any, llm_env: Any) -> AsyncIterator[tuple[str, PrivatePostgres]]:
    def route(request: dict[str, Any]) -> Any:
        slow = "slow" in str((request.get("messages") or [{}])[-1].get("content"))
        return Text("a slow answer " * 10, chunk_size=5, chunk_delay=0.4) if slow else Text("an answer")

    llm_env.route(route)
    async with served_on_private_postgres(make_client, monkeypatch) as (url, pg):
        yield url, pg


Frames = list[tuple[str, Any]]


async def answer(
    http: httpx.AsyncClient, method: str, url: str, payload: Any = None, *, started: Any = None
) -> tuple[int, dict[str, str], Frames, bool]:
    """The status, headers and frames (event name, data) of a streamed answer, and whether
    its body ended cleanly (False: the connection was cut mid-body). `started` (an
    `asyncio.Event`) is set once the answer's headers have come."""
    frames: Frames = []
    async with http.stream(method, url, json=payload) as response:
        if started is not None:
            started.set()
        try:
            if response.status_code == 200:
                async for name, data in read_sse(response, Seen()):
                    frames.append((name, data))
            else:
                await response.aread()
        except httpx.TransportError:
            return response.status_code, dict(response.headers), frames, False
        return response.status_code, dict(response.headers), frames, True


def told(status: int, headers: dict[str, str], frames: Frames, clean: bool) -> str | None:
    """What is wrong with an answer given during an outage (None: it is a clear one)."""
    if status == 503:
        return None if headers.get("retry-after", "").isdigit() else "503 without Retry-After"
    if status != 200:
        return f"{status}"
    names = [name for name, _ in frames]
    if not clean:
        return f"200, then the stream was cut (frames: {names})"
    if not names or names[-1] != "error" or not frames[-1][1].get("message"):
        return f"200 without a final error frame (frames: {frames[-3:]})"
    return None


def ended(frames: Frames) -> bool:
    return any(name == "custom" and data.get("type") == "complete" for name, data in frames)


async def test_sse_readers_attaching_during_an_outage_are_told(served: tuple[str, PrivatePostgres]) -> None:
    url, pg = served
    async with httpx.AsyncClient(timeout=ceiling(60)) as http:
        made = await http.post(f"{url}/threads", json={})
        assert made.status_code == 200, made.text
        tid = made.json()["thread_id"]
        body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "hi"}]}, **STREAM}
        ran = await http.post(f"{url}/threads/{tid}/runs/wait", json=body)
        assert ran.status_code == 200, ran.text
        run_id = (await http.get(f"{url}/threads/{tid}/runs")).json()[0]["run_id"]

        await asyncio.to_thread(pg.stop, "fast")
        try:
            problems = {}
            for method, where, payload in [
                ("GET", f"{url}/threads/{tid}/runs/{run_id}/stream", None),
                ("GET", f"{url}/threads/{tid}/stream", None),
                ("POST", f"{url}/threads/{tid}/runs/stream", body),
            ]:
                problem = told(*await answer(http, method, where, payload))
                if problem is not None:
                    problems[f"{method} {where[len(url):]}"] = problem
            assert problems == {}
        finally:
            await asyncio.to_thread(pg.start)

        async def joined() -> bool:  # the database back: the join streams the run to its end
            status, _, frames, clean = await answer(http, "GET", f"{url}/threads/{tid}/runs/{run_id}/stream")
            return status == 200 and clean and ended(frames)

        await wait_until(joined, timeout=ceiling(60), interval=0.5, what="the join after the outage")


def body_of(text: str, **extra: Any) -> dict[str, Any]:
    return {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": text}]}, **STREAM, **extra}


async def test_readers_streaming_when_the_database_goes_are_told(served: tuple[str, PrivatePostgres]) -> None:
    """Joins attached before an outage, one to a running run and one to a run queued behind
    it (`enqueue`), then the database stops for a few seconds: each stream ends cleanly, with
    the run's end (it waited the outage out) or an `error` frame saying what happened; never
    cut without a word."""
    url, pg = served
    async with httpx.AsyncClient(timeout=ceiling(120)) as http:
        tid = (await http.post(f"{url}/threads", json={})).json()["thread_id"]
        first = await http.post(f"{url}/threads/{tid}/runs", json=body_of("slow"))
        queued = await http.post(f"{url}/threads/{tid}/runs", json=body_of("then", multitask_strategy="enqueue"))
        assert first.status_code == queued.status_code == 200, (first.text, queued.text)
        assert queued.json()["status"] == "pending", queued.text
        readers, starts = [], []
        for run in (first.json(), queued.json()):
            started = asyncio.Event()
            where = f"{url}/threads/{tid}/runs/{run['run_id']}/stream"
            readers.append(asyncio.create_task(answer(http, "GET", where, started=started)))
            starts.append(started)
        for started in starts:
            await asyncio.wait_for(started.wait(), ceiling(60))
        await asyncio.to_thread(pg.stop, "fast")
        try:
            await asyncio.sleep(5)
        finally:
            await asyncio.to_thread(pg.start)
        for reader, which in zip(readers, ("running", "queued"), strict=True):
            status, headers, frames, clean = await asyncio.wait_for(reader, ceiling(300))
            names = [name for name, _ in frames]
            assert status == 200 and clean, (which, status, names)
            assert ended(frames) or told(status, headers, frames, clean) is None, (which, frames[-3:])
