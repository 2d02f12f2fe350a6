"""HTTP API in process (`httpx.ASGITransport`), plus one end-to-end test over a real socket.

The `Client` is opened by the `make_client` fixture (real SQLite, real checkpoints, the
scripted model over real HTTP) and handed to `create_app(client=...)`: ASGITransport runs
no lifespan. ASGITransport returns a response only when the app has finished it, so an SSE
stream read in process is the whole stream, up to its final event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from conftest import make_config
from scripted_llm import Call, Delay, Text, ToolCalls
from waiting import ceiling, wait_until

from artifactflow import load_settings, tool
from artifactflow.api.app import create_app, server_for

API = "/api/v1"
DEPLOYS: list[str] = []


@tool(permission="confirm")
async def deploy(target: str) -> str:
    """Deploy the service (needs a person's approval).

    Args:
        target: Where to deploy.
    """
    DEPLOYS.append(target)
    return f"deployed to {target}"


TOOLS = [deploy]
LEAD_TOOLS = ["deploy", "create_artifact", "update_artifact"]


# --- helpers -----------------------------------------------------------------------------------


def parse_sse(text: str) -> list[dict[str, Any]]:
    """SSE frames as dicts: id (int or None), event, data (parsed JSON), comments, retry."""
    frames = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        frame: dict[str, Any] = {
            "id": None,
            "event": None,
            "data": None,
            "comments": [],
            "retry": None,
        }
        for line in block.split("\n"):
            if line.startswith(":"):
                frame["comments"].append(line[1:].strip())
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "id":
                frame["id"] = int(value)
            elif name == "data":
                frame["data"] = json.loads(value)
            elif name in ("event", "retry"):
                frame[name] = value
        frames.append(frame)
    return frames


def events_of(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["event"] is not None]


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code and body["error"]["message"]
    assert "Traceback" not in response.text
    return body["error"]


Api = Callable[..., Awaitable[tuple[httpx.AsyncClient, Any]]]


@pytest.fixture
async def api(make_client: Any) -> AsyncIterator[Api]:
    """`await api(**make_client_kwargs)` -> (HTTP client, artifactflow `Client`)."""
    clients: list[httpx.AsyncClient] = []

    async def build(**kwargs: Any) -> tuple[httpx.AsyncClient, Any]:
        kwargs.setdefault("extra_tools", TOOLS)
        kwargs.setdefault("lead_tools", LEAD_TOOLS)
        af = await make_client(**kwargs)
        app = create_app(client=af)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver"
        )
        clients.append(client)
        return client, af

    yield build
    for client in clients:
        await client.aclose()


async def chat(client: httpx.AsyncClient, content: str, **fields: Any) -> dict[str, Any]:
    response = await client.post(f"{API}/chat", json={"content": content, **fields})
    assert response.status_code == 202, response.text
    return response.json()


async def read_stream(client: httpx.AsyncClient, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    response = await client.get(url, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


# --- chat and streaming ------------------------------------------------------------------------


async def test_chat_then_stream_to_complete(api: Api, llm: Any) -> None:
    client, af = await api()
    llm.script(Text("Hello from the API.", chunk_size=4))
    ids = await chat(client, "Say hello")
    assert set(ids) == {"conversation_id", "message_id", "thread_id", "stream_url"}
    assert ids["stream_url"] == f"{API}/stream/{ids['message_id']}"
    frames = await read_stream(client, ids["stream_url"])
    assert frames[0]["retry"] is not None
    events = events_of(frames)
    stored = [e for e in events if e["event"] != "llm_chunk"]
    assert stored[0]["event"] == "metadata" and stored[-1]["event"] == "complete"
    assert [e["id"] for e in stored] == list(range(1, len(stored) + 1))
    assert all(e["data"]["type"] == e["event"] and e["data"]["event_id"] == e["id"] for e in stored)
    assert all(e["id"] is None for e in events if e["event"] == "llm_chunk")
    assert stored[-1]["data"]["data"]["response"] == "Hello from the API."
    message = (await client.get(f"{API}/messages/{ids['message_id']}")).json()
    assert message["status"] == "completed" and message["response"] == "Hello from the API."
    assert message["metrics"]["llm_calls"] == 1 and "run_token" not in message


async def test_replay_with_last_event_id_mid_stream(api: Api, llm: Any) -> None:
    client, af = await api()
    llm.script(Text("slowly " * 12, chunk_size=6, chunk_delay=0.05))
    ids = await chat(client, "go")
    message_id = ids["message_id"]

    async def started() -> bool:
        return await af.admin.store.last_event_id(message_id) >= 2  # metadata, agent_start

    await wait_until(started)
    status = (await client.get(f"{API}/messages/{message_id}")).json()["status"]
    assert status == "running"
    frames = await read_stream(client, ids["stream_url"], headers={"Last-Event-ID": "2"})
    stored = [e for e in events_of(frames) if e["id"] is not None]
    assert [e["id"] for e in stored] == list(range(3, 3 + len(stored)))
    assert stored[-1]["event"] == "complete"
    assert any(e["event"] == "llm_chunk" for e in events_of(frames))  # live deltas too
    # `?after=` is the same cursor for clients that are not EventSource
    again = events_of(await read_stream(client, f"{ids['stream_url']}?after=2"))
    assert [e["id"] for e in again] == [e["id"] for e in stored]
    # Last-Event-ID wins over ?after
    header_wins = events_of(
        await read_stream(client, f"{ids['stream_url']}?after=1", headers={"Last-Event-ID": "4"})
    )
    assert header_wins[0]["id"] == 5


async def test_stream_of_a_finished_message_replays_then_204(api: Api, llm: Any) -> None:
    client, af = await api()
    llm.script(Text("done"))
    ids = await chat(client, "x")
    await af.admin.wait(ids["message_id"])
    events = events_of(await read_stream(client, ids["stream_url"]))
    assert events[0]["event"] == "metadata" and events[-1]["event"] == "complete"
    assert not any(e["event"] == "llm_chunk" for e in events)  # chunks are never stored
    last = events[-1]["id"]
    done = await client.get(ids["stream_url"], headers={"Last-Event-ID": str(last)})
    assert done.status_code == 204  # EventSource stops reconnecting
    listed = (
        await client.get(f"{API}/messages/{ids['message_id']}/events", params={"after": 2})
    ).json()
    assert [e["event_id"] for e in listed["events"]] == list(range(3, last + 1))


async def test_chat_validation_and_unknown_ids(api: Api, llm: Any) -> None:
    client, _ = await api()
    error = assert_error(await client.post(f"{API}/chat", json={}), 422, "validation_error")
    assert "content" in error["message"]
    assert_error(await client.post(f"{API}/chat", json={"content": "   "}), 422, "validation_error")
    assert_error(
        await client.post(f"{API}/chat", json={"content": "x", "bogus": 1}), 422, "validation_error"
    )
    assert_error(
        await client.post(
            f"{API}/chat", content=b"{not json", headers={"content-type": "application/json"}
        ),
        422,
        "validation_error",
    )
    assert_error(
        await client.post(f"{API}/chat", json={"content": "x", "conversation_id": "nope"}),
        404,
        "not_found",
    )
    assert_error(
        await client.post(f"{API}/chat", json={"content": "x", "parent_message_id": "nope"}),
        404,
        "not_found",
    )
    assert_error(await client.get(f"{API}/stream/nope"), 404, "not_found")
    assert_error(await client.get(f"{API}/messages/nope"), 404, "not_found")
    assert_error(await client.get(f"{API}/no/such/route"), 404, "not_found")
    assert_error(await client.delete(f"{API}/chat"), 405, "method_not_allowed")
    assert llm.request_count == 0


# --- permissions: resume -----------------------------------------------------------------------


async def paused_chat(client: httpx.AsyncClient, llm: Any, target: str = "prod") -> dict[str, Any]:
    llm.script(ToolCalls([Call("deploy", {"target": target}, id="c1")]), Text(f"deployed {target}"))
    ids = await chat(client, f"deploy {target}")
    events = events_of(await read_stream(client, ids["stream_url"]))
    assert events[-1]["event"] == "permission_request"
    ids["request_id"] = events[-1]["id"]
    return ids


async def test_resume_202_then_409_and_stream_continues(api: Api, llm: Any) -> None:
    DEPLOYS.clear()
    client, af = await api()
    ids = await paused_chat(client, llm)
    message_id = ids["message_id"]
    message = (await client.get(f"{API}/messages/{message_id}")).json()
    assert message["status"] == "waiting"
    assert [c["tool_call_id"] for c in message["waiting_for"]["calls"]] == ["c1"]
    resumed = await client.post(f"{API}/chat/{message_id}/resume", json={"decisions": "approve"})
    assert resumed.status_code == 202, resumed.text
    stream_url = resumed.json()["stream_url"]
    assert stream_url == f"{API}/stream/{message_id}?after={ids['request_id']}"
    again = await client.post(f"{API}/chat/{message_id}/resume", json={"decisions": "approve"})
    assert_error(again, 409, "conflict")
    events = events_of(await read_stream(client, stream_url))
    stored = [e for e in events if e["id"] is not None]
    assert stored[0]["event"] == "permission_result" and stored[0]["id"] == ids["request_id"] + 1
    assert stored[-1]["event"] == "complete"
    assert DEPLOYS == ["prod"]
    after = await client.post(f"{API}/chat/{message_id}/resume", json={"decisions": "approve"})
    assert "completed" in assert_error(after, 409, "conflict")["message"]
    # a full replay walks past the answered pause to the end
    full = events_of(await read_stream(client, f"{API}/stream/{message_id}"))
    assert [e["event"] for e in full].count("permission_request") == 1
    assert full[-1]["event"] == "complete"


async def test_invalid_resume_is_422_and_stays_paused(api: Api, llm: Any) -> None:
    DEPLOYS.clear()
    client, af = await api()
    ids = await paused_chat(client, llm, "staging")
    url = f"{API}/chat/{ids['message_id']}/resume"
    for bad in (
        {"decisions": "maybe"},
        {"decisions": {"other": "approve"}},
        {"decisions": {"c1": {"action": "edit", "arguments": {"nope": 1}}}},
    ):
        assert_error(await client.post(url, json=bad), 422, "invalid_resume")
    assert_error(await client.post(url, json={"decisions": 5}), 422, "validation_error")
    assert_error(await client.post(url, json={}), 422, "validation_error")
    message = (await client.get(f"{API}/messages/{ids['message_id']}")).json()
    assert message["status"] == "waiting" and message["waiting_for"] is not None
    assert DEPLOYS == [] and llm.request_count == 1
    edit = {"decisions": {"c1": {"action": "edit", "arguments": {"target": "canary"}}}}
    assert (await client.post(url, json=edit)).status_code == 202
    await af.admin.wait(ids["message_id"])
    assert DEPLOYS == ["canary"]
    assert_error(
        await client.post(f"{API}/chat/nope/resume", json={"decisions": "approve"}),
        404,
        "not_found",
    )


# --- cancel ------------------------------------------------------------------------------------


async def test_cancel_running_and_paused(api: Api, llm: Any) -> None:
    client, af = await api()
    llm.script(Text("word " * 200, chunk_size=5, chunk_delay=0.05))
    ids = await chat(client, "long answer")

    async def streaming() -> bool:
        return await af.admin.store.last_event_id(ids["message_id"]) >= 2

    await wait_until(streaming)
    response = await client.post(f"{API}/chat/{ids['message_id']}/cancel")
    assert response.status_code == 200
    assert response.json() == {
        "message_id": ids["message_id"],
        "cancelled": True,
        "status": "cancelled",
    }
    events = events_of(await read_stream(client, ids["stream_url"]))
    assert events[-1]["event"] == "cancelled"
    again = (await client.post(f"{API}/chat/{ids['message_id']}/cancel")).json()
    assert again["cancelled"] is False and again["status"] == "cancelled"

    paused = await paused_chat(client, llm)
    response = await client.post(f"{API}/chat/{paused['message_id']}/cancel")
    assert response.json()["cancelled"] is True and response.json()["status"] == "cancelled"
    assert_error(await client.post(f"{API}/chat/nope/cancel"), 404, "not_found")


# --- limits ------------------------------------------------------------------------------------


async def test_too_many_runs_is_429_with_retry_after(api: Api, llm: Any) -> None:
    client, af = await api(yaml_text="run:\n  max_concurrent_runs: 1\n")
    llm.script(Delay(0.5, Text("first")), Text("second"))
    first = await chat(client, "one")
    refused = await client.post(f"{API}/chat", json={"content": "two"})
    assert_error(refused, 429, "too_many_runs")
    assert int(refused.headers["Retry-After"]) > 0
    await af.admin.wait(first["message_id"])
    second = await chat(client, "two")
    await af.admin.wait(second["message_id"])
    message = (await client.get(f"{API}/messages/{second['message_id']}")).json()
    assert message["response"] == "second"


async def test_request_too_large_is_413(api: Api, llm: Any) -> None:
    client, _ = await api(yaml_text="server:\n  max_request_bytes: 200\n")
    big = {"content": "x" * 500}
    assert_error(await client.post(f"{API}/chat", json=big), 413, "payload_too_large")

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted while reading
        yield b'{"content": "'
        for _ in range(10):
            yield b"y" * 50
        yield b'"}'

    response = await client.post(
        f"{API}/chat", content=chunked(), headers={"content-type": "application/json"}
    )
    assert_error(response, 413, "payload_too_large")
    assert llm.request_count == 0


async def test_unexpected_error_is_a_bare_500(
    api: Api, llm: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    client, af = await api()

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(af.admin.store, "list_conversations", broken)
    response = await client.get(f"{API}/conversations")
    error = assert_error(response, 500, "internal_error")
    assert "secret" not in error["message"]
    assert "secret internals" in caplog.text  # logged for the operator


# --- conversations -----------------------------------------------------------------------------


async def test_conversations_list_tree_fork_and_delete(api: Api, llm: Any) -> None:
    client, af = await api()
    llm.script(Text("a1"), Text("b1"), Text("a2"), Text("a2-fork"), Text("new root"))
    a = await chat(client, "first conversation")
    await af.admin.wait(a["message_id"])
    b = await chat(client, "second conversation")
    await af.admin.wait(b["message_id"])
    a2 = await chat(client, "follow-up", conversation_id=a["conversation_id"])
    await af.admin.wait(a2["message_id"])
    page = (await client.get(f"{API}/conversations")).json()
    assert page["total"] == 2 and page["limit"] == 20 and page["offset"] == 0
    assert [c["id"] for c in page["items"]] == [a["conversation_id"], b["conversation_id"]]
    second = (await client.get(f"{API}/conversations", params={"limit": 1, "offset": 1})).json()
    assert [c["id"] for c in second["items"]] == [b["conversation_id"]] and second["total"] == 2
    assert_error(
        await client.get(f"{API}/conversations", params={"limit": 0}), 422, "validation_error"
    )

    # fork: a sibling of the follow-up (parent = the first message); inferred conversation
    fork = await chat(client, "follow-up, edited", parent_message_id=a["message_id"])
    assert fork["conversation_id"] == a["conversation_id"]
    await af.admin.wait(fork["message_id"])
    root = await chat(
        client, "a new root", conversation_id=a["conversation_id"], parent_message_id=None
    )
    await af.admin.wait(root["message_id"])
    tree = (await client.get(f"{API}/conversations/{a['conversation_id']}")).json()
    by_id = {m["id"]: m for m in tree["messages"]}
    assert tree["roots"] == [a["message_id"], root["message_id"]]
    assert by_id[a["message_id"]]["children"] == [a2["message_id"], fork["message_id"]]
    assert by_id[root["message_id"]]["parent_id"] is None and by_id[root["message_id"]]["active"]
    assert tree["active_message_id"] == root["message_id"] and "user_id" not in tree
    # tokens (and cost: none, the scripted model has no prices) per message and in total
    usage = tree["usage"]
    assert all(m["tokens"] > 0 and m["cost_usd"] is None for m in tree["messages"])
    assert usage["messages"] == 4 and usage["tokens"]["total"] == sum(m["tokens"] for m in tree["messages"])
    assert usage["cost_usd"] is None and usage["cost_complete"] is False
    # the fork's model request saw only its own branch
    assert [m["content"] for m in llm.requests[3]["messages"][1:]] == [
        "first conversation",
        "a1",
        "follow-up, edited",
    ]

    # delete: a paused message's checkpoints go too
    paused = await paused_chat(client, llm)
    thread_id = paused["thread_id"]
    assert await af.admin.checkpoints.has_checkpoint(thread_id)
    deleted = await client.delete(f"{API}/conversations/{paused['conversation_id']}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert not await af.admin.checkpoints.has_checkpoint(thread_id)
    assert_error(
        await client.get(f"{API}/conversations/{paused['conversation_id']}"), 404, "not_found"
    )
    assert_error(await client.get(f"{API}/messages/{paused['message_id']}"), 404, "not_found")
    assert_error(
        await client.delete(f"{API}/conversations/{paused['conversation_id']}"), 404, "not_found"
    )


# --- artifacts ---------------------------------------------------------------------------------


async def test_artifact_endpoints(api: Api, llm: Any) -> None:
    client, af = await api()
    llm.script(
        ToolCalls(
            [
                Call(
                    "create_artifact",
                    {"id": "report", "title": "Report", "content": "# Report\n\nline one\n"},
                )
            ]
        ),
        ToolCalls(
            [
                Call(
                    "update_artifact",
                    {"id": "report", "old_str": "line one", "new_str": "line two"},
                )
            ]
        ),
        Text("The report is ready."),
    )
    ids = await chat(client, "write a report")
    events = events_of(await read_stream(client, ids["stream_url"]))
    assert {"artifact_created", "artifact_updated"} <= {e["event"] for e in events}
    base = f"{API}/conversations/{ids['conversation_id']}/artifacts"
    listed = (await client.get(base)).json()
    assert [(a["artifact_id"], a["version"], a["title"]) for a in listed["artifacts"]] == [
        ("report", 2, "Report")
    ]
    current = (await client.get(f"{base}/report")).json()
    assert (
        current["version"] == 2
        and current["current_version"] == 2
        and "line two" in current["content"]
    )
    first = (await client.get(f"{base}/report", params={"version": 1})).json()
    assert first["version"] == 1 and "line one" in first["content"] and first["change"] == "create"
    versions = (await client.get(f"{base}/report/versions")).json()
    assert [v["version"] for v in versions["versions"]] == [1, 2]
    diff = (await client.get(f"{base}/report/diff", params={"from": 1})).json()
    assert diff["from_version"] == 1 and diff["to_version"] == 2
    assert "-line one" in diff["diff"] and "+line two" in diff["diff"]
    same = (await client.get(f"{base}/report/diff", params={"from": 2, "to": 2})).json()
    assert same["diff"] == ""
    export = await client.get(f"{base}/report/export")
    assert export.status_code == 200 and export.headers["content-type"].startswith("text/markdown")
    assert 'filename="report.md"' in export.headers["content-disposition"]
    assert export.text.startswith("# Report") and "line two" in export.text
    old = await client.get(f"{base}/report/export", params={"version": 1})
    assert "line one" in old.text
    assert_error(await client.get(f"{base}/nope"), 404, "not_found")
    assert_error(await client.get(f"{base}/report", params={"version": 9}), 404, "not_found")
    assert_error(await client.get(f"{base}/report/diff"), 422, "validation_error")
    assert_error(await client.get(f"{API}/conversations/nope/artifacts"), 404, "not_found")


# --- auth --------------------------------------------------------------------------------------


async def test_auth_isolates_users(api: Api, llm: Any) -> None:
    client, af = await api(yaml_text="auth:\n  enabled: true\n")
    _, alice = await af.admin.store.create_token("alice")
    _, bob = await af.admin.store.create_token("bob")
    as_alice = {"Authorization": f"Bearer {alice}"}
    as_bob = {"Authorization": f"Bearer {bob}"}

    error = assert_error(await client.get(f"{API}/conversations"), 401, "unauthorized")
    assert "token" in error["message"]
    bad = await client.get(f"{API}/conversations", headers={"Authorization": "Bearer af_wrong"})
    assert_error(bad, 401, "unauthorized")
    assert_error(await client.post(f"{API}/chat", json={"content": "hi"}), 401, "unauthorized")

    client.headers.update(as_alice)
    llm.script(
        ToolCalls([Call("create_artifact", {"id": "notes", "title": "Notes", "content": "n"})]),
        ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]),
    )
    ids = await chat(client, "alice's work")
    await af.admin.wait(ids["message_id"])
    assert (await client.get(f"{API}/messages/{ids['message_id']}")).json()["status"] == "waiting"
    conversation = await af.admin.store.get_conversation(ids["conversation_id"])
    assert conversation["user_id"] is not None

    mid, cid = ids["message_id"], ids["conversation_id"]
    client.headers.update(as_bob)
    for method, url, body in [
        ("GET", f"{API}/conversations/{cid}", None),
        ("DELETE", f"{API}/conversations/{cid}", None),
        ("GET", f"{API}/messages/{mid}", None),
        ("GET", f"{API}/messages/{mid}/events", None),
        ("GET", f"{API}/stream/{mid}", None),
        ("POST", f"{API}/chat/{mid}/resume", {"decisions": "approve"}),
        ("POST", f"{API}/chat/{mid}/cancel", None),
        ("POST", f"{API}/messages/{mid}/retry", None),
        ("GET", f"{API}/conversations/{cid}/artifacts", None),
        ("GET", f"{API}/conversations/{cid}/artifacts/notes", None),
        ("GET", f"{API}/conversations/{cid}/artifacts/notes/versions", None),
        ("GET", f"{API}/conversations/{cid}/artifacts/notes/diff?from=1", None),
        ("GET", f"{API}/conversations/{cid}/artifacts/notes/export", None),
        ("POST", f"{API}/chat", {"content": "x", "conversation_id": cid}),
        ("POST", f"{API}/chat", {"content": "x", "parent_message_id": mid}),
    ]:
        assert_error(await client.request(method, url, json=body), 404, "not_found")
    assert (await client.get(f"{API}/conversations")).json()["total"] == 0
    del client.headers["Authorization"]
    assert_error(
        await client.get(f"{API}/stream/{mid}", params={"access_token": bob}), 404, "not_found"
    )
    assert_error(await client.get(f"{API}/stream/{mid}"), 401, "unauthorized")

    # alice still sees everything, and EventSource-style ?access_token= works on the stream
    events = events_of(
        await read_stream(client, f"{API}/stream/{mid}", params={"access_token": alice})
    )
    assert events[-1]["event"] == "permission_request"
    client.headers.update(as_alice)
    page = (await client.get(f"{API}/conversations")).json()
    assert page["total"] == 1 and page["items"][0]["id"] == cid
    assert (await client.get(f"{API}/conversations/{cid}/artifacts/notes")).status_code == 200
    assert (await client.post(f"{API}/chat/{mid}/cancel")).json()["cancelled"] is True


async def test_auth_default_depends_on_the_bind_address(make_client: Any) -> None:
    af = await make_client()
    assert create_app(client=af, host="127.0.0.1").state.auth_enabled is False
    assert create_app(client=af, host="::1").state.auth_enabled is False
    assert create_app(client=af, host="0.0.0.0").state.auth_enabled is True


async def test_not_started_is_503() -> None:
    app = create_app()  # no lifespan has run: no client yet
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as client:
        assert_error(await client.get(f"{API}/conversations"), 503, "unavailable")
        assert_error(await client.post(f"{API}/chat", json={"content": "x"}), 503, "unavailable")


async def test_openapi_and_page(api: Api) -> None:
    client, _ = await api()
    schema = (await client.get("/openapi.json")).json()
    assert f"{API}/chat" in schema["paths"] and f"{API}/stream/{{message_id}}" in schema["paths"]
    assert (await client.get("/docs")).status_code == 200
    page = await client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert (await client.get("/static/app.js")).status_code == 200


async def test_render_is_sanitised_highlighted_markdown(api: Api) -> None:
    client, _ = await api()
    text = (
        "**bold** and `code`\n\n```python\nx = 1\n```\n\n"
        '<img src="x" onerror="alert(1)"><script>alert(2)</script>'
        '<a href="javascript:alert(3)">link</a> <details><summary>more</summary>kept</details>'
    )
    response = await client.post(f"{API}/render", json={"text": text})
    assert response.status_code == 200
    html = response.json()["html"]
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert '<pre><code class="language-python"><span class="n">x</span>' in html
    assert "<details><summary>more</summary>kept</details>" in html
    assert "onerror" not in html and "<script" not in html and "javascript:" not in html
    assert "<a" in html and "link</a>" in html  # the link is kept, without its href
    css = await client.get("/highlight.css")
    assert css.status_code == 200 and ".md .k {" in css.text


async def test_docs_are_served_from_this_server_and_the_favicon_answers(api: Api) -> None:
    client, _ = await api()
    for path in ("/docs", "/redoc"):
        html = (await client.get(path)).text
        urls = re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)""", html)
        assert urls and all(url.startswith("/") for url in urls), urls
        for url in urls:
            assert (await client.get(url)).status_code == 200, url
    favicon = await client.get("/favicon.ico")
    assert favicon.status_code == 200 and favicon.headers["content-type"] == "image/svg+xml"


async def test_a_conversation_is_titled_by_its_first_sentence(api: Api, llm: Any) -> None:
    client, _ = await api()
    llm.script(Text("a"), Text("b"))
    long_task = (
        "Compare the storage engines of SQLite and PostgreSQL for a write-heavy event log"
        " with many small rows"
    )
    for content in ("Plan the trip to Oslo. Book trains, not planes.", long_task):
        await read_stream(client, (await chat(client, content))["stream_url"])  # to its end
    titles = [c["title"] for c in (await client.get(f"{API}/conversations")).json()["items"]]
    assert titles == [
        "Compare the storage engines of SQLite and PostgreSQL for a write-heavy event…",
        "Plan the trip to Oslo",
    ]


# --- over a real socket ------------------------------------------------------------------------


async def test_sse_over_a_real_socket_reconnects_without_loss(
    make_client: Any, llm: Any
) -> None:
    af = await make_client(
        extra_tools=TOOLS, lead_tools=LEAD_TOOLS, yaml_text="server:\n  heartbeat_seconds: 0.1\n"
    )
    app = create_app(client=af)
    server = server_for(app, "127.0.0.1", 0, log_config=None, log_level="warning")
    serving = asyncio.create_task(server.serve())
    try:

        async def started() -> bool:
            return server.started

        await wait_until(started)
        port = server.servers[0].sockets[0].getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        llm.script(
            Delay(
                0.4, ToolCalls([Call("create_artifact", {"id": "a", "title": "A", "content": "x"})])
            ),
            Text("chunked answer " * 10, chunk_size=5, chunk_delay=0.03),
        )
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            ids = await chat(client, "go")
            first: list[dict[str, Any]] = []
            pings = 0
            async with client.stream("GET", ids["stream_url"]) as response:
                assert response.status_code == 200
                buffer = ""
                async for text in response.aiter_text():  # read a few events, then drop
                    buffer += text
                    pings += buffer.count(": ping")
                    *blocks, buffer = buffer.split("\n\n")
                    first += events_of(parse_sse("\n\n".join(blocks)))
                    if len([e for e in first if e["id"]]) >= 3 and pings:
                        break
            last_seen = max(e["id"] for e in first if e["id"])
            rest = events_of(
                parse_sse(
                    (
                        await client.get(
                            ids["stream_url"], headers={"Last-Event-ID": str(last_seen)}
                        )
                    ).text
                )
            )
            stored = [e["id"] for e in first + rest if e["id"] is not None]
            assert stored == list(range(1, len(stored) + 1))  # nothing lost, nothing repeated
            assert rest[-1]["event"] == "complete"
            assert pings >= 1

            # shutdown ends an open stream at once instead of waiting for it
            llm.script(Delay(5.0, Text("never")))
            slow = await chat(client, "slow")
            async with client.stream("GET", slow["stream_url"]) as response:
                server.should_exit = True
                async for _ in response.aiter_bytes():
                    pass
            await asyncio.wait_for(serving, 5)
            await af.runs.cancel(slow["message_id"])
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, ceiling(60))


async def test_server_owns_its_client_and_cancels_runs_on_shutdown(
    tmp_path: Any, make_client: Any, llm: Any, caplog: Any
) -> None:
    config = make_config(tmp_path, lead_tools=["create_artifact"])
    app = create_app(load_settings(config, tmp_path / "data"))  # the lifespan opens the client
    llm.script(Delay(5.0, Text("never")))
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    server = server_for(app, "127.0.0.1", 0, log_config=None, log_level="info")
    serving = asyncio.create_task(server.serve())

    async def started() -> bool:
        return server.started

    await wait_until(started)
    port = server.servers[0].sockets[0].getsockname()[1]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        ids = await chat(client, "slow")
        url = f"{ids['stream_url']}?access_token=af_not_logged"
        async with client.stream("GET", url) as response:
            assert response.status_code == 200
            server.should_exit = True  # as on SIGTERM
            async for _ in response.aiter_bytes():
                pass
    await asyncio.wait_for(serving, 10)
    assert app.state.client is None  # closed by the lifespan
    assert "access_token=[redacted]" in caplog.text and "af_not_logged" not in caplog.text

    reopened = await make_client(config_dir=config, data_dir=tmp_path / "data")
    message = await reopened.admin.store.get_message(ids["message_id"])
    assert message["status"] == "cancelled"  # not left "running"
    assert (await reopened.runs.events(ids["message_id"]))[-1].type == "cancelled"
