"""A workflow run's body is checked against the workflow's published input schema (issue 22, D9).

Over a real socket (uvicorn on 127.0.0.1): the published OpenAPI schema gives each workflow its
own `POST /workflows/<name>/runs` whose body declares that workflow's input; a body that fails
it — `{}` for a workflow with a required field included — is answered 422, like any body that
fails its schema, and a body that matches it starts the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest
from scripted_llm import Text
from waiting import wait_until
from wf_helpers import workflow_config

from artifactflow.api.app import create_app, server_for

API = "/api/v1"
ECHO = """
name: echo
description: Say the ticket back
input:
  type: object
  required: [ticket]
  properties:
    ticket: {type: string}
nodes:
  - {id: start, role: start}
  - {id: say, role: linear, kind: agent, agent: writer, instruction: "{{ input.ticket }}"}
  - {id: done, role: exit}
edges:
  - {from: start, to: say}
  - {from: say, to: done}
"""


@pytest.fixture
async def base_url(tmp_path: Path, make_client: Any, llm: Any) -> AsyncIterator[str]:
    llm.route(lambda _request: Text("said"))
    config = workflow_config(tmp_path, {"echo": ECHO}, agents={"writer": []})
    client = await make_client(config_dir=config)
    server = server_for(
        create_app(client=client), "127.0.0.1", 0, log_config=None, log_level="warning"
    )
    serving = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: server.started)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await serving


async def test_each_workflow_publishes_its_input_and_a_body_failing_it_is_422(
    base_url: str,
) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        schema = (await http.get("/openapi.json")).json()
        operation = schema["paths"][f"{API}/workflows/echo/runs"]["post"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body["required"] == ["input"] and body["properties"]["input"]["required"] == [
            "ticket"
        ]
        assert "422" in operation["responses"]
        validator = jsonschema_rs.validator_for(body)
        for bad in ({}, {"input": {}}, {"input": {"ticket": 3}}):
            assert not validator.is_valid(bad)  # the schema refuses it ...
            answer = await http.post(f"{API}/workflows/echo/runs", json=bad)
            assert answer.status_code == 422, (bad, answer.text)  # ... and so does the server
            assert answer.json()["error"]["code"] == "validation_error"
        good = {"input": {"ticket": "printer on fire"}}
        assert validator.is_valid(good)
        started = await http.post(f"{API}/workflows/echo/runs", json=good)
        assert started.status_code == 202, started.text
        assert started.json()["workflow"] == "echo"


async def test_the_generic_operation_documents_422(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        schema = (await http.get("/openapi.json")).json()
    generic = schema["paths"][f"{API}/workflows/{{name}}/runs"]["post"]
    assert "422" in generic["responses"]
    assert (
        schema["paths"][f"{API}/workflows/echo/runs"]["post"]["operationId"]
        == "start_workflow_run_echo"
    )
