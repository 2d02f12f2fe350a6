"""CORS for browser apps on another origin (`server.cors_origins`, `serve --cors-origin`) and
the protocol's rows of conversations deleted elsewhere, against a real uvicorn server on
127.0.0.1 with the real `langgraph_sdk` client."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from browser_helpers import serving
from cli_fork import fork_cli, fork_process
from conftest import make_config
from langgraph_sdk import get_client
from scripted_llm import Text
from waiting import ceiling, wait_until_sync

from artifactflow import load_settings
from artifactflow.api.app import create_app
from artifactflow.errors import ConfigError
from artifactflow.protocol.records import runs as run_table
from artifactflow.protocol.records import threads as thread_table
from artifactflow.settings import ServerSettings

ALLOWED = "http://localhost:3000"
OTHER = "http://evil.example"


@pytest.fixture
async def cors_url(make_client: Any) -> AsyncIterator[str]:
    af = await make_client(yaml_text=f"server:\n  cors_origins: ['{ALLOWED}/']\n")
    assert af.settings.server.cors_origins == [ALLOWED]  # normalised: no trailing slash
    async with serving(create_app(client=af)) as url:
        yield url


async def test_preflight_and_post_from_an_allowed_origin(cors_url: str) -> None:
    async with httpx.AsyncClient(base_url=cors_url) as http:
        preflight = await http.options(
            "/threads",
            headers={
                "Origin": ALLOWED,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, x-api-key, last-event-id, content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == ALLOWED
        assert "POST" in preflight.headers["access-control-allow-methods"]
        allowed = preflight.headers["access-control-allow-headers"].lower()
        for header in ("authorization", "x-api-key", "last-event-id", "content-type"):
            assert header in allowed

        created = await http.post(
            "/threads", json={"metadata": {"from": "browser"}}, headers={"Origin": ALLOWED}
        )
        assert created.status_code == 200
        assert created.json()["metadata"] == {"from": "browser"}
        assert created.headers["access-control-allow-origin"] == ALLOWED
        exposed = created.headers["access-control-expose-headers"].lower()
        assert "location" in exposed and "content-location" in exposed

        # errors carry the headers too (the browser would hide the status otherwise)
        missing = await http.get("/threads/nope", headers={"Origin": ALLOWED})
        assert missing.status_code == 404
        assert missing.headers["access-control-allow-origin"] == ALLOWED


async def test_another_origin_gets_no_cors_headers(cors_url: str) -> None:
    async with httpx.AsyncClient(base_url=cors_url) as http:
        preflight = await http.options(
            "/threads",
            headers={"Origin": OTHER, "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 400
        assert "access-control-allow-origin" not in preflight.headers
        created = await http.post("/threads", json={}, headers={"Origin": OTHER})
        assert created.status_code == 200  # the server answers; the browser withholds it
        assert "access-control-allow-origin" not in created.headers


async def test_no_origins_configured_means_no_cors(make_client: Any) -> None:
    af = await make_client()
    assert af.settings.server.cors_origins == []
    async with serving(create_app(client=af)) as url, httpx.AsyncClient(base_url=url) as http:
        preflight = await http.options(
            "/threads", headers={"Origin": ALLOWED, "Access-Control-Request-Method": "POST"}
        )
        assert "access-control-allow-origin" not in preflight.headers
        created = await http.post("/threads", json={}, headers={"Origin": ALLOWED})
        assert created.status_code == 200
        assert "access-control-allow-origin" not in created.headers


def test_origin_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServerSettings(cors_origins=["*", "HTTPS://App.Example:8443/"]).cors_origins == [
        "*",
        "https://app.example:8443",
    ]
    for bad in ("localhost:3000", "http://localhost:3000/app", "ftp://x", "http://"):
        with pytest.raises(ValueError, match="is not an origin"):
            ServerSettings(cors_origins=[bad])
    config = tmp_path / "config"
    (config / "agents").mkdir(parents=True)
    monkeypatch.setenv("ARTIFACTFLOW_SERVER__CORS_ORIGINS", '["http://localhost:5173"]')
    assert load_settings(config, tmp_path / "data").server.cors_origins == ["http://localhost:5173"]
    monkeypatch.setenv("ARTIFACTFLOW_SERVER__CORS_ORIGINS", '["localhost:5173"]')
    with pytest.raises(ConfigError, match="is not an origin"):
        load_settings(config, tmp_path / "data")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_cors_origin_option(tmp_path: Path, llm_env: Any) -> None:
    """`artifactflow serve --cors-origin` (repeatable), in a real process (forked from the tests'
    CLI fork server, tests/cli_fork.py: `main()` in a process of its own, without the console
    script's start-up imports, which other tests check)."""
    config = make_config(tmp_path)
    base = ["--config-dir", str(config), "--data-dir", str(tmp_path / "data"), "serve"]
    code, _, err = fork_cli([*base, "--cors-origin", "localhost:3000"], dict(os.environ), ceiling(300))
    assert code == 2
    assert "is not an origin" in " ".join(err.replace("│", " ").split())

    port = _free_port()
    log = tmp_path / "serve.log"
    proc = fork_process(
        [*base, "--port", str(port), "--cors-origin", "http://localhost:5173", "--cors-origin", ALLOWED],
        dict(os.environ),
        log=log,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            return httpx.get(url + "/api/v1/conversations", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until_sync(up, timeout=ceiling(300), interval=0.05, what="artifactflow serve")
        for origin in ("http://localhost:5173", ALLOWED):
            preflight = httpx.options(
                url + "/threads/search",
                headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
            )
            assert preflight.headers["access-control-allow-origin"] == origin
        other = httpx.post(url + "/threads/search", json={}, headers={"Origin": OTHER})
        assert other.status_code == 200 and "access-control-allow-origin" not in other.headers
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def _rows(af: Any, thread_id: str) -> tuple[int, int]:
    store = af.admin.store
    threads = await store.fetch_rows(
        sa.select(thread_table).where(thread_table.c.thread_id == thread_id)
    )
    runs = await store.fetch_rows(sa.select(run_table).where(run_table.c.thread_id == thread_id))
    return len(threads), len(runs)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_conversation_deleted_via_api_leaves_no_protocol_rows(
    make_client: Any, llm: Any, backend: str
) -> None:
    async with AsyncExitStack() as stack:
        database = ""
        if backend == "postgres":
            from pg import fresh_database

            database = f"database_url: {await stack.enter_async_context(fresh_database())}\n"
        af = await make_client(yaml_text=database)
        stack.push_async_callback(af.aclose)
        await _deleted_elsewhere(af, llm)


async def _deleted_elsewhere(af: Any, llm: Any) -> None:
    async with serving(create_app(client=af)) as url:
        sdk = get_client(url=url, api_key=None)
        kept = await sdk.threads.create(metadata={"tag": "t"})
        gone = await sdk.threads.create(metadata={"tag": "t"})
        searched = await sdk.threads.create(metadata={"tag": "t"})
        for thread in (gone, searched):
            llm.script(Text("hello"))
            await sdk.runs.wait(
                thread["thread_id"],
                "lead_agent",
                input={"messages": [{"role": "user", "content": "hi"}]},
            )
            assert await _rows(af, thread["thread_id"]) == (1, 1)

        async with httpx.AsyncClient(base_url=url) as http:
            for thread in (gone, searched):
                deleted = await http.delete(f"/api/v1/conversations/{thread['thread_id']}")
                assert deleted.status_code == 204

        # reading the deleted thread: a 404, and its rows go then
        with pytest.raises(httpx.HTTPStatusError) as missing:
            await sdk.threads.get(gone["thread_id"])
        assert missing.value.response.status_code == 404
        assert await _rows(af, gone["thread_id"]) == (0, 0)

        # a search does not show the other one and sweeps its rows
        assert await _rows(af, searched["thread_id"]) == (1, 1)
        found = await sdk.threads.search(metadata={"tag": "t"})
        assert [t["thread_id"] for t in found] == [kept["thread_id"]]
        assert await _rows(af, searched["thread_id"]) == (0, 0)
        assert await _rows(af, kept["thread_id"]) == (1, 0)
        assert (await sdk.threads.get(kept["thread_id"]))["metadata"] == {"tag": "t"}
