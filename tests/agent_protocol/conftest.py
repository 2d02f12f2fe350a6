"""The Agent Protocol conformance suite's server: artifactflow by default, or any server at
`AGENT_PROTOCOL_URL` (scripts/protocol-reference-check points it at LangGraph's `langgraph dev`
on scripts/protocol_reference/graph.py).

Against artifactflow every test runs twice, on a fresh server on 127.0.0.1 (uvicorn, a scripted
OpenAI-compatible model answering by toy.py's rules) over SQLite and over PostgreSQL; `server.local` is True and the tests may
check what only a local server can show (the tool's side effects). Against a URL the tests see
only the protocol, so they assert shapes and the behaviour both servers share.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from browser_helpers import serving
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from .toy import NOTES, toy_route, write_note

REFERENCE_URL = os.environ.get("AGENT_PROTOCOL_URL")


@dataclass
class Server:
    url: str
    client: LangGraphClient
    assistant_id: str
    local: bool  # artifactflow in this process (side effects observable), not a remote URL


@asynccontextmanager
async def _database(backend: str) -> AsyncIterator[str]:
    """The settings line for `backend`: SQLite files in the data folder, or a fresh
    PostgreSQL database (dropped afterwards)."""
    if backend == "sqlite":
        yield ""
        return
    from pg import fresh_database

    async with fresh_database() as url:
        yield f"database_url: {url}\n"


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def server(request: pytest.FixtureRequest, llm_env: Any, tmp_path: Path) -> AsyncIterator[Server]:
    """artifactflow on SQLite, then on PostgreSQL (or the reference server, once)."""
    if REFERENCE_URL:
        if request.param != "sqlite":
            pytest.skip("a reference URL is one server: run once")
        client = get_client(url=REFERENCE_URL, api_key=None)
        assistants = await client.assistants.search(graph_id=os.environ.get("AGENT_PROTOCOL_GRAPH"))
        yield Server(REFERENCE_URL, client, assistants[0]["assistant_id"], local=False)
        return
    from conftest import make_config

    from artifactflow import Client, load_settings
    from artifactflow.api.app import create_app

    llm_env.route(toy_route)
    NOTES.clear()
    async with _database(request.param) as database:
        config = make_config(tmp_path, lead_tools=["write_note"], yaml_text=database)
        af = await Client.open(load_settings(config, tmp_path / "data"), extra_tools=[write_note])
        try:
            async with serving(create_app(client=af)) as url:
                client = get_client(url=url, api_key=None)
                assistants = await client.assistants.search()
                yield Server(url, client, assistants[0]["assistant_id"], local=True)
        finally:
            await af.aclose()
