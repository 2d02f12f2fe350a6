"""The agent platform (issue 35) through LangGraph's own client: saved assistants whose runs
use their configuration (the scripted OpenAI-compatible server sees the model asked), versions,
per-run overrides, typed bodies; and webhooks a run POSTs to a local receiver when it ends.
Each test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from browser_helpers import serving
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from waiting import ceiling, wait_until

from .conftest import _database
from .helpers import approve, human, last_ai, text_of, wait_for_status
from .toy import ANSWER, NOTES, toy_route, write_note

SECRET = "s3cret"


@dataclass
class Platform:
    url: str
    client: LangGraphClient
    lead: str
    llm: Any
    app_client: Any  # the artifactflow Client behind the server
    app_state: Any = None  # the HTTP app's state


@asynccontextmanager
async def _platform(backend: str, llm: Any, tmp_path: Path, yaml_text: str) -> AsyncIterator[Platform]:
    from conftest import make_config

    from artifactflow import Client, load_settings
    from artifactflow.api.app import create_app

    llm.route(toy_route)
    NOTES.clear()
    async with _database(backend) as database:
        config = make_config(tmp_path, lead_tools=["write_note"], yaml_text=database + yaml_text)
        af = await Client.open(load_settings(config, tmp_path / "data"), extra_tools=[write_note])
        try:
            app = create_app(client=af)
            async with serving(app) as url:
                client = get_client(url=url, api_key=None)
                yield Platform(url, client, af.admin.services.lead.name, llm, af, app.state)
        finally:
            await af.aclose()


WEBHOOKS = f"webhooks:\n  allow_private: true\n  secret: {SECRET}\n  backoff_seconds: 0.05\n"


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def platform(request: pytest.FixtureRequest, llm_env: Any, tmp_path: Path) -> AsyncIterator[Platform]:
    async with _platform(request.param, llm_env, tmp_path, WEBHOOKS) as p:
        yield p


def _models(llm: Any, since: int) -> list[str]:
    return [r.get("model") for r in llm.requests[since:]]


async def _run_model(p: Platform, assistant_id: str, **kwargs: Any) -> str:
    """Run `assistant_id` to its answer; the model its one model call asked for."""
    before = p.llm.request_count
    thread = await p.client.threads.create()
    values = await p.client.runs.wait(thread["thread_id"], assistant_id, input=human("hello"), **kwargs)
    assert text_of(last_ai(values)) == ANSWER
    models = _models(p.llm, before)
    assert len(models) == 1, models
    return str(models[0])


async def test_assistant_config_drives_its_runs(platform: Platform) -> None:
    c = platform.client
    schemas = await c.assistants.get_schemas(platform.lead)
    assert "model" in schemas["config_schema"]["properties"]
    assert "permissions" in schemas["context_schema"]["properties"]

    made = await c.assistants.create(
        platform.lead, config={"configurable": {"model": "model-x"}}, name="researcher",
        metadata={"team": "blue"},
    )
    assert made["version"] == 1 and made["graph_id"] == platform.lead
    assert await _run_model(platform, made["assistant_id"]) == "model-x"

    updated = await c.assistants.update(made["assistant_id"], config={"configurable": {"model": "model-y"}})
    assert updated["version"] == 2
    assert await _run_model(platform, made["assistant_id"]) == "model-y"
    # the run's own configurable wins, for that run only; `context` sets the same keys
    assert await _run_model(platform, made["assistant_id"], config={"configurable": {"model": "model-z"}}) == "model-z"
    assert await _run_model(platform, made["assistant_id"], context={"model": "model-c"}) == "model-c"
    assert await _run_model(platform, made["assistant_id"]) == "model-y"

    versions = await c.assistants.get_versions(made["assistant_id"])
    assert [v["version"] for v in versions] == [2, 1]
    back = await c.assistants.set_latest(made["assistant_id"], 1)
    assert back["version"] == 1 and back["config"]["configurable"]["model"] == "model-x"
    assert await _run_model(platform, made["assistant_id"]) == "model-x"

    found = await c.assistants.search(graph_id=platform.lead, metadata={"team": "blue"})
    assert [a["assistant_id"] for a in found] == [made["assistant_id"]]
    assert [a["assistant_id"] for a in await c.assistants.search(name="research")] == [made["assistant_id"]]
    assert await c.assistants.count(metadata={"team": "red"}) == 0

    await c.assistants.delete(made["assistant_id"])
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await c.assistants.get(made["assistant_id"])
    assert gone.value.response.status_code == 404
    thread = await c.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await c.runs.create(thread["thread_id"], made["assistant_id"], input=human("hello"))
    assert refused.value.response.status_code == 404


async def test_assistant_permissions_and_tools(platform: Platform) -> None:
    """An assistant that makes the CONFIRM tool AUTO runs it without a pause; one that takes
    the tool away refuses its tool calls; the agent file is unchanged for the rest."""
    c = platform.client
    auto = await c.assistants.create(platform.lead, context={"permissions": {"write_note": "AUTO"}})
    thread = await c.threads.create()
    await c.runs.wait(thread["thread_id"], auto["assistant_id"], input=human("write a note: auto"))
    assert NOTES == ["auto"]
    assert (await c.threads.get(thread["thread_id"]))["status"] == "idle"
    # the built-in assistant still asks
    thread = await c.threads.create()
    await c.runs.wait(thread["thread_id"], platform.lead, input=human("write a note: asked"))
    assert (await c.threads.get(thread["thread_id"]))["status"] == "interrupted"
    assert NOTES == ["auto"]
    # an assistant created with permissions keeps them across the pause-free run only: the
    # override survives a resume too (stored with the message)
    confirm = await c.assistants.create(
        platform.lead, config={"configurable": {"model": "model-p", "permissions": {"write_note": "CONFIRM"}}}
    )
    thread = await c.threads.create()
    before = platform.llm.request_count
    await c.runs.wait(thread["thread_id"], confirm["assistant_id"], input=human("write a note: later"))
    await c.runs.wait(thread["thread_id"], confirm["assistant_id"], command=approve())
    assert NOTES == ["auto", "later"]
    assert set(_models(platform.llm, before)) == {"model-p"}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"config": {"configurable": {"model": 5}}}, "model"),
        ({"config": {"configurable": {"temperature_x": 1}}}, "temperature_x"),
        ({"context": {"tools": ["no_such_tool"]}}, "no_such_tool"),
        ({"context": {"permissions": {"write_note": "SOMETIMES"}}}, "permissions"),
        ({"config": "not an object"}, "config"),
        ({"name": 7}, "name"),
    ],
)
async def test_bad_assistant_bodies_are_422_and_change_nothing(
    platform: Platform, body: dict[str, Any], fragment: str
) -> None:
    c = platform.client
    before = await c.assistants.count()
    async with httpx.AsyncClient(base_url=platform.url) as http:
        response = await http.post("/assistants", json={"graph_id": platform.lead, **body})
        assert response.status_code == 422, response.text
        assert fragment in json.dumps(response.json()["detail"])
        # a run's own configuration is checked the same way, before anything starts
        thread = await c.threads.create()
        run_body = {"assistant_id": platform.lead, "input": human("hello"), **body}
        if "name" not in body:
            response = await http.post(f"/threads/{thread['thread_id']}/runs", json=run_body)
            assert response.status_code == 422, response.text
            assert await c.runs.list(thread["thread_id"]) == []
    assert await c.assistants.count() == before


async def test_built_in_assistants_are_read_only(platform: Platform) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await platform.client.assistants.update(platform.lead, name="renamed")
    assert refused.value.response.status_code == 409
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await platform.client.assistants.delete(platform.lead)
    assert refused.value.response.status_code == 409
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await platform.client.assistants.create(platform.lead, assistant_id=platform.lead)
    assert refused.value.response.status_code == 409
    made = await platform.client.assistants.create(platform.lead, assistant_id="mine", if_exists="do_nothing")
    again = await platform.client.assistants.create(platform.lead, assistant_id="mine", if_exists="do_nothing")
    assert again["assistant_id"] == made["assistant_id"] == "mine"
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await platform.client.assistants.create(platform.lead, assistant_id="mine")
    assert refused.value.response.status_code == 409


# --- webhooks ----------------------------------------------------------------------------------


@dataclass
class Receiver:
    url: str = ""
    hits: list[tuple[dict[str, Any], dict[str, str], bytes]] = field(default_factory=list)
    fail_first: int = 0

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        self.hits.append((json.loads(body), dict(request.headers), body))
        if len(self.hits) <= self.fail_first:
            return Response("not now", status_code=503)
        return Response("ok")


@asynccontextmanager
async def _receiver(fail_first: int = 0) -> AsyncIterator[Receiver]:
    """A webhook receiver on 127.0.0.1 (plain uvicorn), answering 503 to its first
    `fail_first` requests."""
    receiver = Receiver(fail_first=fail_first)
    app = Starlette(routes=[Route("/hook", receiver.handle, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    try:
        await _until(lambda: server.started or task.done())
        port = server.servers[0].sockets[0].getsockname()[1]
        receiver.url = f"http://127.0.0.1:{port}/hook"
        yield receiver
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, ceiling(120))


async def _until(condition: Any, seconds: float = 120) -> Any:
    return await wait_until(condition, timeout=seconds, what="the condition")


async def test_webhook_posts_final_status_signed_once(platform: Platform) -> None:
    c = platform.client
    async with _receiver() as receiver:
        thread = await c.threads.create()
        run = await c.runs.create(thread["thread_id"], platform.lead, input=human("hello"), webhook=receiver.url)
        await wait_for_status(c, thread["thread_id"], run["run_id"], {"success"}, seconds=120)
        await _until(lambda: receiver.hits)
        payload, headers, raw = receiver.hits[0]
        assert payload["run_id"] == run["run_id"] and payload["status"] == "success"
        expected = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
        assert headers["x-artifactflow-signature"] == expected
        # a pause for approval ends the run too (the thread is interrupted)
        paused = await c.runs.create(
            thread["thread_id"], platform.lead, input=human("write a note: hooked"), webhook=receiver.url
        )
        await _until(lambda: len(receiver.hits) >= 2)
        assert receiver.hits[1][0]["run_id"] == paused["run_id"]
        assert (await c.threads.get(thread["thread_id"]))["status"] == "interrupted"
        async with httpx.AsyncClient(base_url=platform.url) as http:
            shown = (await http.get(f"/threads/{thread['thread_id']}/runs/{run['run_id']}/webhook")).json()
        assert shown["status"] == "delivered" and len(shown["attempts"]) == 1
        await asyncio.sleep(0.5)  # nothing more arrives (a second delivery would be a bug)
        assert len(receiver.hits) == 2


async def test_failing_receiver_is_retried_and_never_affects_the_run(platform: Platform) -> None:
    c = platform.client
    async with _receiver(fail_first=2) as receiver:
        thread = await c.threads.create()
        values = await c.runs.wait(thread["thread_id"], platform.lead, input=human("hello"), webhook=receiver.url)
        assert text_of(last_ai(values)) == ANSWER
        await _until(lambda: len(receiver.hits) >= 3)
        runs = await c.runs.list(thread["thread_id"])
        assert runs[0]["status"] == "success"
        async with httpx.AsyncClient(base_url=platform.url) as http:
            url = f"/threads/{thread['thread_id']}/runs/{runs[0]['run_id']}/webhook"

            async def delivered() -> dict[str, Any] | None:
                shown = (await http.get(url)).json()
                return shown if shown["status"] == "delivered" else None

            shown = await _until(delivered)
        assert [a["status_code"] for a in shown["attempts"]] == [503, 503, 200]
    # a receiver that is down: the run is unaffected, the attempts are recorded as failed
    thread = await c.threads.create()
    values = await c.runs.wait(
        thread["thread_id"], platform.lead, input=human("hello"), webhook=receiver.url  # now closed
    )
    assert text_of(last_ai(values)) == ANSWER


async def test_private_webhook_refused_by_default(llm_env: Any, tmp_path: Path) -> None:
    async with _platform("sqlite", llm_env, tmp_path, "") as p:
        thread = await p.client.threads.create()
        async with httpx.AsyncClient(base_url=p.url) as http:
            response = await http.post(
                f"/threads/{thread['thread_id']}/runs",
                json={"assistant_id": p.lead, "input": human("hello"), "webhook": "http://127.0.0.1:9/hook"},
            )
        assert response.status_code == 422
        assert "webhooks.allow_private" in response.json()["detail"]
        assert await p.client.runs.list(thread["thread_id"]) == []
        assert p.llm.request_count == 0


# --- threads.copy ------------------------------------------------------------------------------


async def test_thread_copy_has_the_history_and_goes_its_own_way(platform: Platform) -> None:
    c = platform.client
    thread = await c.threads.create(metadata={"topic": "notes"})
    await c.runs.wait(thread["thread_id"], platform.lead, input=human("hello one"))
    await c.runs.wait(thread["thread_id"], platform.lead, input=human("hello two"))
    original = (await c.threads.get_state(thread["thread_id"]))["values"]
    copied = await c.threads.copy(thread["thread_id"])
    assert copied["thread_id"] != thread["thread_id"]
    assert copied["metadata"]["topic"] == "notes"
    state = (await c.threads.get_state(copied["thread_id"]))["values"]
    texts = [text_of(m) for m in state["messages"]]
    assert texts == [text_of(m) for m in original["messages"]]
    assert texts[0] == "hello one" and texts[-1] == ANSWER and len(texts) == 4
    # the copy continues on its own; the original is unchanged
    await c.runs.wait(copied["thread_id"], platform.lead, input=human("hello three"))
    assert len((await c.threads.get_state(copied["thread_id"]))["values"]["messages"]) == 6
    assert len((await c.threads.get_state(thread["thread_id"]))["values"]["messages"]) == 4
    with pytest.raises(httpx.HTTPStatusError) as missing:
        await c.threads.copy("no-such-thread")
    assert missing.value.response.status_code == 404


# --- store TTL ---------------------------------------------------------------------------------


async def test_store_ttl_expires_refreshes_and_sweeps(platform: Platform) -> None:
    """Time is the TTL store's clock, moved by the test; the sweeper is called directly."""
    from artifactflow.protocol.store_ttl import ttl_store_of

    c = platform.client
    async with httpx.AsyncClient(base_url=platform.url) as http:
        info = (await http.get("/info")).json()
    assert info["store"]["ttl"]["supported"] is True
    ttl_store = ttl_store_of(platform.app_state)
    now = [1_000_000.0]
    ttl_store.clock = lambda: now[0]
    await c.store.put_item(["notes"], "short", {"text": "gone soon"}, ttl=1)
    await c.store.put_item(["notes"], "kept", {"text": "for good"})
    await c.store.put_item(["notes"], "read", {"text": "kept alive by reads"}, ttl=1)
    now[0] += 45
    assert (await c.store.get_item(["notes"], "read"))["key"] == "read"  # refreshes its TTL
    now[0] += 45  # 90 s after the put: "short" has expired, "read" was refreshed 45 s ago
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await c.store.get_item(["notes"], "short")
    assert gone.value.response.status_code == 404
    keys = {i["key"] for i in (await c.store.search_items(["notes"]))["items"]}
    assert keys == {"kept", "read"}
    # no refresh: the item goes a minute after its last refresh
    await c.store.get_item(["notes"], "read", refresh_ttl=False)
    now[0] += 61
    assert {i["key"] for i in (await c.store.search_items(["notes"], refresh_ttl=False))["items"]} == {"kept"}
    # the sweeper deletes expired items from the long-term store itself
    await c.store.put_item(["notes"], "swept", {"text": "x"}, ttl=2)
    now[0] += 121
    assert await ttl_store.sweep() == 1
    owned = [item.key for item in await platform.app_client.memories.store.asearch((), limit=100)]
    assert "swept" not in owned and "kept" in owned


async def test_webhook_on_error_and_on_cancel(platform: Platform) -> None:
    from artifactflow.testing import Error

    c = platform.client
    async with _receiver() as receiver:
        platform.llm.clear_routes()
        platform.llm.route(lambda request: Error(400, "bad request from the model"))
        thread = await c.threads.create()
        failed = await c.runs.create(thread["thread_id"], platform.lead, input=human("hello"), webhook=receiver.url)
        await _until(lambda: receiver.hits)
        assert receiver.hits[0][0]["run_id"] == failed["run_id"]
        assert receiver.hits[0][0]["status"] == "error"
        platform.llm.clear_routes()
        platform.llm.route(toy_route)
        slow = await c.runs.create(thread["thread_id"], platform.lead, input=human("slow please"), webhook=receiver.url)
        await wait_for_status(c, thread["thread_id"], slow["run_id"], {"running"}, seconds=120)
        await c.runs.cancel(thread["thread_id"], slow["run_id"], wait=True)
        await _until(lambda: len(receiver.hits) >= 2)
        assert receiver.hits[1][0]["run_id"] == slow["run_id"]
        assert receiver.hits[1][0]["status"] == "interrupted"
