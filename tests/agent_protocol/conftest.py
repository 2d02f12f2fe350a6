"""The Agent Protocol conformance suite's server: artifactflow by default, or any server at
`AGENT_PROTOCOL_URL` (scripts/protocol-reference-check points it at LangGraph's `langgraph dev`
on scripts/protocol_reference/graph.py).

Against artifactflow every test gets a fresh server on 127.0.0.1 (uvicorn, SQLite, a scripted
OpenAI-compatible model answering by toy.py's rules); `server.local` is True and the tests may
check what only a local server can show (the tool's side effects). Against a URL the tests see
only the protocol, so they assert shapes and the behaviour both servers share.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

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


@pytest_asyncio.fixture
async def server(llm_env: Any, make_client: Any) -> AsyncIterator[Server]:
    if REFERENCE_URL:
        client = get_client(url=REFERENCE_URL, api_key=None)
        assistants = await client.assistants.search(graph_id=os.environ.get("AGENT_PROTOCOL_GRAPH"))
        yield Server(REFERENCE_URL, client, assistants[0]["assistant_id"], local=False)
        return
    from artifactflow.api.app import create_app

    llm_env.route(toy_route)
    NOTES.clear()
    af = await make_client(extra_tools=[write_note], lead_tools=["write_note"])
    async with serving(create_app(client=af)) as url:
        client = get_client(url=url, api_key=None)
        assistants = await client.assistants.search()
        yield Server(url, client, assistants[0]["assistant_id"], local=True)
