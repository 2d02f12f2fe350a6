"""The published OpenAPI schema says what the server does (D9).

Three places where they disagreed (found by schemathesis): the event stream's events, the
`Allow` header of 405 answers, and the plain-string form of `decisions`. The stream is checked
with schemathesis itself (its SSE validation reads the schema per event), on a real message.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest
import schemathesis
from conftest import make_config
from schemathesis.python import asgi
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Client, load_settings, tool
from artifactflow.api.app import create_app

API = "/api/v1"


@pytest.fixture
def live_schema(tmp_path: Path, llm: Any) -> Iterator[Any]:
    """schemathesis' view of an app whose client lives in schemathesis' own loop."""
    llm.route(lambda request: Text("ok"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_BASE_URL", llm.base_url)
        patch.setenv("OPENAI_API_KEY", "test-key")
        for name in list(os.environ):
            if name.startswith("ARTIFACTFLOW_"):
                patch.delenv(name)
        config = make_config(tmp_path, yaml_text="auth:\n  enabled: true\n")
        settings = load_settings(config, tmp_path / "data")
        tokens: list[str] = []

        async def open_client() -> Client:
            af = await Client.open(settings)
            tokens.append((await af.admin.create_token("tester"))[1])
            return af

        app = create_app(open_client)
        try:
            schema = schemathesis.openapi.from_asgi("/openapi.json", app)
            yield schema, {"Authorization": f"Bearer {tokens[0]}"}
        finally:
            asgi.shutdown_lifespans()


def test_event_stream_matches_its_schema(live_schema: Any) -> None:
    schema, auth = live_schema
    chat = schema[f"{API}/chat"]["POST"].Case(body={"content": "hi"}, headers=auth).call()
    assert chat.status_code == 202, chat.text
    stream = schema[f"{API}/stream/{{message_id}}"]["GET"].Case(
        path_parameters={"message_id": chat.json()["message_id"]}, headers=auth
    )
    response = stream.call_and_validate()  # raises on any event that breaks the schema
    assert response.headers["content-type"][0].startswith("text/event-stream")
    assert "event: complete" in response.text


async def test_405_answers_allow_every_method_of_the_path(make_client: Any) -> None:
    app = create_app(client=await make_client())
    documented = {path: {m.upper() for m in item} for path, item in app.openapi()["paths"].items()}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for path, methods in documented.items():
            url = path.replace("{", "x").replace("}", "")
            for method in sorted({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} - methods):
                response = await client.request(method, url)
                assert response.status_code == 405, (method, path)
                allow = {m.strip() for m in response.headers["allow"].split(",")}
                assert allow == methods, (method, path, allow)


async def test_405_allow_on_a_path_with_two_methods(make_client: Any) -> None:
    app = create_app(client=await make_client())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.patch(f"{API}/conversations/c1")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert sorted(m.strip() for m in response.headers["allow"].split(",")) == ["DELETE", "GET"]


@tool(permission="confirm")
async def deploy(target: str) -> str:
    """Deploy (needs approval).

    Args:
        target: Where.
    """
    return f"deployed to {target}"


async def test_decisions_schema_and_server_agree(make_client: Any, llm: Any) -> None:
    af = await make_client(extra_tools=[deploy], lead_tools=["deploy"])
    app = create_app(client=af)
    validator = jsonschema_rs.validator_for(app.openapi()["components"]["schemas"]["ResumeRequest"])
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]), Text("done"))
    paused = await af.run("deploy it")
    assert paused.status == "waiting"
    url = f"{API}/chat/{paused.message_id}/resume"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for body in ({"decisions": ""}, {"decisions": "maybe"}, {"decisions": 5}):
            assert not validator.is_valid(body), body
            assert (await client.post(url, json=body)).status_code == 422, body
        for body in ({"decisions": {"c1": "deny"}}, {"decisions": "approve"}):
            assert validator.is_valid(body), body
        response = await client.post(url, json={"decisions": "approve"})
        assert response.status_code == 202, response.text
