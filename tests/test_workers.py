"""Two real `artifactflow serve` processes on one fresh PostgreSQL database.

What a deployment of several workers promises, checked across real processes: a stream
attached to the worker that does not own the run gets every event, token deltas included, in
order and without duplicates; cancel and delete sent to the other worker stop the run at once;
two workers racing to resume one pause give one winner and one side effect; a killed worker's
run is recovered by the survivor (`run.recover_on_start`, 3-second leases, scaled by the machine's slowness); the run limit per
database counts both workers' runs.

The servers are started once for the module (one after another: the first creates the schema)
and share one scripted model server; each test routes its own requests by a tag in its task.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_fork import ForkedProcess, fork_process
from pg import create_database, drop_database
from scripted_llm import Call, Delay, ScriptedLLM, Text, ToolCalls
from waiting import ceiling, wait_until, wait_until_sync

TOOLS_PY = '''
import asyncio, os
from artifactflow import tool

@tool(permission="confirm")
def side_effect(tag: str) -> str:
    """Write one line to the effects file.

    Args:
        tag: What to write.
    """
    with open(os.environ["AF_TEST_EFFECTS"], "a", encoding="utf-8") as f:
        f.write(tag + "\\n")
    return "written " + tag

@tool
async def slow(seconds: float) -> str:
    """Wait a while.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    return "slept"
'''

Handler = Callable[[int, dict[str, Any]], Any]


@dataclass
class Worker:
    url: str
    proc: ForkedProcess


class Cluster:
    def __init__(self, llm: ScriptedLLM, db_url: str, effects: Path, workers: list[Worker]) -> None:
        self.llm = llm
        self.db_url = db_url
        self.effects = effects
        self.workers = workers
        self.handlers: dict[str, Handler] = {}
        self.counts: dict[str, int] = {}

    def case(self, tag: str, handler: Handler) -> str:
        """Route requests whose task carries `[tag]` to `handler(n, request)`; returns the task."""
        self.handlers[tag] = handler
        self.counts[tag] = 0
        return f"[{tag}] do the thing"

    def route(self, request: dict[str, Any]) -> Any:
        task = next((m.get("content") for m in request.get("messages") or [] if m.get("role") == "user"), "")
        for tag, handler in self.handlers.items():
            if isinstance(task, str) and f"[{tag}]" in task:
                self.counts[tag] += 1
                return handler(self.counts[tag], request)
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_worker(config: Path, data: Path, env: dict[str, str]) -> Worker:
    """`artifactflow serve` forked from the tests' CLI fork server (tests/cli_fork.py): a
    process of its own, SIGKILLed for real, without the console script's start-up imports
    (what these tests check is how workers share a database, not how one starts)."""
    port = _free_port()
    log = data.parent / f"serve-{port}.log"
    proc = fork_process(
        ["--config-dir", str(config), "--data-dir", str(data), "serve", "--port", str(port)], env, log=log
    )
    url = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            return httpx.get(url + "/api/v1/conversations", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until_sync(serving, timeout=ceiling(300), interval=0.05, what="the worker serving")
    except AssertionError:
        proc.kill()
        raise RuntimeError("worker did not start within 60 s") from None
    return Worker(url, proc)


def _stop(worker: Worker) -> None:
    if worker.proc.poll() is None:
        worker.proc.terminate()
        try:
            worker.proc.wait(10)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait(5)


# Short leases, so a killed worker's run is recovered within the test; scaled by the machine's
# measured slowness, so a live worker starved of CPU on a busy machine keeps its lease (a
# 3-second lease lapsed under a load of 13 and the survivor "recovered" a healthy run).
LEASE_SECONDS = round(ceiling(3.0), 1)
HTTP_TIMEOUT = ceiling(30.0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("workers")
    config = root / "config"
    (config / "agents").mkdir(parents=True)
    (config / "agents" / "lead_agent.md").write_text(
        "---\nname: lead_agent\nrole: lead\ntools: [side_effect, slow]\n---\nYou are the lead.\n"
    )
    (config / "cluster_tools.py").write_text(TOOLS_PY)
    effects = root / "effects.txt"
    effects.write_text("")
    db_url = asyncio.run(create_database())
    (config / "artifactflow.yaml").write_text(
        f"database_url: {db_url}\nplugins: [cluster_tools]\nllm:\n  max_retries: 0\n"
        f"run:\n  lease_seconds: {LEASE_SECONDS}\n  recover_on_start: true\n  max_concurrent_runs: 50\n"
        "  max_runs_per_database: 2\n"
    )
    with ScriptedLLM() as llm:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIFACTFLOW_")}
        env.update(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key", AF_TEST_EFFECTS=str(effects))
        workers: list[Worker] = []
        try:
            for name in ("a", "b"):  # one after another: the first creates the schema
                workers.append(_start_worker(config, root / f"data-{name}", env))
            cluster = Cluster(llm, db_url, effects, workers)
            llm.route(cluster.route)
            yield cluster
        finally:
            for worker in workers:
                _stop(worker)
            asyncio.run(drop_database(db_url))


# --- helpers ---------------------------------------------------------------------------------


async def post_chat(client: httpx.AsyncClient, worker: Worker, content: str) -> str:
    response = await client.post(worker.url + "/api/v1/chat", json={"content": content})
    assert response.status_code == 202, response.text
    return str(response.json()["message_id"])


async def read_stream(client: httpx.AsyncClient, worker: Worker, message_id: str, after: int = 0) -> list[dict[str, Any]]:
    """Every SSE event of the stream until the server ends it: (id or None, type, data)."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    url = f"{worker.url}/api/v1/stream/{message_id}?after={after}"
    async with client.stream("GET", url, timeout=HTTP_TIMEOUT) as response:
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                current["id"] = int(line[4:])
            elif line.startswith("event: "):
                current["type"] = line[7:]
            elif line.startswith("data: "):
                current["event"] = json.loads(line[6:])
            elif line == "" and "type" in current:
                events.append(current)
                current = {}
    return events


POLL: dict[str, Any] = {"timeout": ceiling(60.0), "interval": 0.05}  # worker processes over HTTP


async def message(client: httpx.AsyncClient, worker: Worker, message_id: str) -> dict[str, Any]:
    response = await client.get(f"{worker.url}/api/v1/messages/{message_id}")
    return dict(response.json()) if response.status_code == 200 else {"status_code": response.status_code}


async def stored_types(client: httpx.AsyncClient, worker: Worker, message_id: str) -> list[str]:
    response = await client.get(f"{worker.url}/api/v1/messages/{message_id}/events")
    return [e["type"] for e in response.json()["events"]]


# --- tests -----------------------------------------------------------------------------------


async def test_stream_on_the_other_worker_gets_every_event_and_delta_in_order(cluster: Cluster) -> None:
    owner, other = cluster.workers
    text = "Streaming across workers, token by token, in order."

    def answer(n: int, _request: dict[str, Any]) -> Any:
        if n == 1:  # a pause long enough for both readers to attach before anything streams
            return Delay(0.8, ToolCalls([Call("slow", {"seconds": 0.01})], content="Let me wait."))
        return Text(text, chunk_size=3, chunk_delay=0.005)

    task = cluster.case("stream", answer)
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
        message_id = await post_chat(client, owner, task)
        on_owner, on_other = await asyncio.gather(
            read_stream(client, owner, message_id), read_stream(client, other, message_id)
        )
    assert on_other[-1]["type"] == "complete"
    assert [(e.get("id"), e["type"], e["event"]["data"]) for e in on_other] == [
        (e.get("id"), e["type"], e["event"]["data"]) for e in on_owner
    ]
    ids = [e["id"] for e in on_other if "id" in e]
    assert ids == list(range(1, len(ids) + 1))  # every stored event, once, in order
    deltas = [e["event"]["data"]["delta"] for e in on_other if e["type"] == "llm_chunk"]
    assert "".join(deltas).endswith(text) and len(deltas) > 10


async def test_a_reader_attaching_mid_run_on_the_other_worker_catches_up_then_goes_live(
    cluster: Cluster,
) -> None:
    owner, other = cluster.workers
    text = "late readers still get the rest of the stream " * 4

    def answer(n: int, _request: dict[str, Any]) -> Any:
        if n == 1:
            return ToolCalls([Call("slow", {"seconds": 0.8})])  # time to attach mid-run
        return Text(text, chunk_size=4, chunk_delay=0.01)

    task = cluster.case("late", answer)
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
        message_id = await post_chat(client, owner, task)
        await wait_until(lambda: _has(client, other, message_id, "tool_start"), what="the tool to start", **POLL)
        events = await read_stream(client, other, message_id)
    ids = [e["id"] for e in events if "id" in e]
    assert ids == list(range(1, len(ids) + 1)) and events[-1]["type"] == "complete"
    deltas = "".join(e["event"]["data"]["delta"] for e in events if e["type"] == "llm_chunk")
    assert deltas == text  # the answer streamed after the reader attached: every delta


async def test_cancel_on_the_other_worker_stops_the_run_at_once(cluster: Cluster) -> None:
    owner, other = cluster.workers
    task = cluster.case("cancel", lambda n, _r: ToolCalls([Call("slow", {"seconds": 60})]) if n == 1 else Text("late"))
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
        message_id = await post_chat(client, owner, task)
        await wait_until(lambda: _has(client, other, message_id, "tool_start"), what="the slow tool to start", **POLL)
        started = time.monotonic()
        response = await client.post(f"{other.url}/api/v1/chat/{message_id}/cancel")
        assert response.status_code == 200
        assert response.json()["cancelled"] is True and response.json()["status"] == "cancelled"
        assert time.monotonic() - started < 10  # the owner heard at once, not after the 60 s tool
        assert (await stored_types(client, owner, message_id))[-1] == "cancelled"
        assert (await message(client, owner, message_id))["status"] == "cancelled"
    assert cluster.counts["cancel"] == 1


async def test_delete_on_the_other_worker_stops_the_run_before_removing_it(cluster: Cluster) -> None:
    owner, other = cluster.workers
    task = cluster.case("delete", lambda n, _r: ToolCalls([Call("slow", {"seconds": 60})]) if n == 1 else Text("late"))
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
        response = await client.post(owner.url + "/api/v1/chat", json={"content": task})
        message_id, conversation_id = response.json()["message_id"], response.json()["conversation_id"]
        await wait_until(lambda: _has(client, other, message_id, "tool_start"), what="the slow tool to start", **POLL)
        deleted = await client.delete(f"{other.url}/api/v1/conversations/{conversation_id}")
        assert deleted.status_code in (200, 204), deleted.text
        assert (await message(client, owner, message_id)) == {"status_code": 404}
        await asyncio.sleep(0.3)  # anything the owner still wrote would land now
    assert await _rows(cluster.db_url, message_id) == (0, 0)  # no message, no events left


async def test_two_workers_racing_to_resume_one_pause(cluster: Cluster) -> None:
    a, b = cluster.workers

    def answer(n: int, _request: dict[str, Any]) -> Any:
        return ToolCalls([Call("side_effect", {"tag": "race-once"})]) if n == 1 else Text("done")

    task = cluster.case("race", answer)
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
        message_id = await post_chat(client, a, task)
        paused = await read_stream(client, a, message_id)
        assert paused[-1]["type"] == "permission_request"
        body = {"decisions": "approve"}
        first, second = await asyncio.gather(
            client.post(f"{a.url}/api/v1/chat/{message_id}/resume", json=body),
            client.post(f"{b.url}/api/v1/chat/{message_id}/resume", json=body),
        )
        assert sorted([first.status_code, second.status_code]) == [202, 409]
        await wait_until(
            lambda: _status_is(client, b, message_id, "completed"), what="the resumed run to complete", **POLL
        )
    assert cluster.effects.read_text().splitlines().count("race-once") == 1
    assert cluster.counts["race"] == 2


async def test_the_run_limit_per_database_counts_every_workers_runs(cluster: Cluster) -> None:
    a, b = cluster.workers
    task = cluster.case("limit", lambda _n, _r: ToolCalls([Call("slow", {"seconds": 60})]))
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
        first = await post_chat(client, a, task)
        second = await post_chat(client, b, task)
        refused = await client.post(a.url + "/api/v1/chat", json={"content": task})
        assert refused.status_code == 429 and "max_runs_per_database" in refused.text
        assert refused.headers["Retry-After"]
        for worker, message_id in ((b, first), (a, second)):  # each cancelled from the other worker
            response = await client.post(f"{worker.url}/api/v1/chat/{message_id}/cancel")
            assert response.json()["status"] == "cancelled"
        third = await post_chat(client, a, task)  # places are free again
        assert (await client.post(f"{b.url}/api/v1/chat/{third}/cancel")).json()["cancelled"] is True


async def test_a_killed_workers_run_is_recovered_by_the_other(cluster: Cluster) -> None:
    victim, survivor = cluster.workers

    def answer(n: int, _request: dict[str, Any]) -> Any:
        if n == 1:
            return Delay(30, Text("never sent"))  # the victim dies while waiting for this
        return Text("recovered answer")

    task = cluster.case("recover", answer)
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
        message_id = await post_chat(client, victim, task)
        await wait_until(lambda: _requested(cluster, "recover"), what="the victim's model request", **POLL)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        done = await wait_until(
            lambda: _status_is(client, survivor, message_id, "completed"), what="recovery by the survivor", **POLL
        )
        assert done["response"] == "recovered answer"
        types = await stored_types(client, survivor, message_id)
    assert types.count("metadata") == 2 and types[-1] == "complete"


# --- small checks ----------------------------------------------------------------------------


async def _has(client: httpx.AsyncClient, worker: Worker, message_id: str, type_: str) -> bool:
    return type_ in await stored_types(client, worker, message_id)


async def _status_is(client: httpx.AsyncClient, worker: Worker, message_id: str, status: str) -> Any:
    record = await message(client, worker, message_id)
    return record if record.get("status") == status else None


async def _requested(cluster: Cluster, tag: str) -> bool:
    return cluster.counts.get(tag, 0) >= 1


async def _rows(db_url: str, message_id: str) -> tuple[int, int]:
    import asyncpg

    conn = await asyncpg.connect(db_url)
    try:
        messages = await conn.fetchval("SELECT count(*) FROM af_messages WHERE id = $1", message_id)
        events = await conn.fetchval("SELECT count(*) FROM af_events WHERE message_id = $1", message_id)
    finally:
        await conn.close()
    return int(messages), int(events)
