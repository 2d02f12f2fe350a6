"""Retrying a failed or cancelled message (client and HTTP), the conflict messages that
say who runs a message, a cancel that arrives after the final event, and the missing-key
messages of `ModelRegistry.resolve`."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from scripted_llm import Call, Error, Text, ToolCalls

from artifactflow import MissingCredentialsError, ResumeConflictError, Retry, Task, tool
from artifactflow.agents.model import ModelRegistry, ProfileSpec
from artifactflow.api.app import create_app
from artifactflow.core.run import segment

API = "/api/v1"


@tool(permission="confirm")
async def guarded(text: str) -> str:
    """Needs approval."""
    return text


async def failed_message(client: Any, llm: Any, content: str, **kwargs: Any) -> str:
    llm.route(lambda request: Error(500, "upstream exploded"))
    result = await client.run(Task(content, **kwargs))
    llm.clear_routes()
    assert result.status == "failed"
    return result.message_id


async def test_retry_starts_a_sibling_with_the_same_parent_and_content(make_client, llm):
    client = await make_client()
    llm.script(Text("first"))
    first = await client.run("first question")
    failed_id = await failed_message(
        client, llm, "second question", conversation_id=first.conversation_id
    )
    llm.script(Text("second, at last"))
    run = await client.runs.start(Retry(failed_id))
    assert run.conversation_id == first.conversation_id and run.message_id != failed_id
    events = [e async for e in run]
    assert events[0].type == "metadata" and events[-1].type == "complete"
    assert "".join(e.data.delta for e in events if e.type == "llm_chunk") == "second, at last"
    new = await client.conversations.message(run.message_id)
    old = await client.conversations.message(failed_id)
    assert (new["parent_id"], new["content"], new["status"]) == (
        first.message_id,
        "second question",
        "completed",
    )
    assert old["status"] == "failed" and old["error"]  # the failed try is kept as it was
    tree = await client.conversations.tree(first.conversation_id)
    assert tree["active_message_id"] == run.message_id

    with pytest.raises(ResumeConflictError, match="cannot be retried.*it has completed"):
        await client.runs.start(Retry(run.message_id))


async def test_retry_refuses_paused_and_running_messages(make_client, llm):
    client = await make_client(extra_tools=[guarded], lead_tools=["guarded"])
    llm.script(ToolCalls([Call("guarded", {"text": "x"}, id="c1")]))
    paused = await client.run("pause")
    assert paused.status == "waiting"
    with pytest.raises(ResumeConflictError, match="waiting for a decision; answer it with resume"):
        await client.runs.start(Retry(paused.message_id))

    llm.script(Text("slow " * 50, chunk_size=5, chunk_delay=0.1))
    async with await client.runs.start("talk") as first:
        async for event in first:  # the model call is under way (its reply is being consumed)
            if event.type == "llm_chunk":
                break
        with pytest.raises(ResumeConflictError, match="it is running in this process"):
            await client.runs.start(Retry(first.message_id))
        with pytest.raises(ResumeConflictError, match="not waiting for a decision: it is running in"):
            await first.respond("approve")
    # leaving the block cancels the run it started
    cancelled = await client.conversations.message(first.message_id)
    assert cancelled["status"] == "cancelled"
    llm.script(Text("quick"))
    retried = await client.runs.start(Retry(first.message_id))  # a cancelled message is retried too
    events = [e async for e in retried]
    assert events[-1].type == "complete" and events[-1].data.response == "quick"


async def test_cancel_after_the_final_event_keeps_the_outcome(make_client, llm, monkeypatch):
    client = await make_client()
    gate = asyncio.Event()
    original = segment.cleanup_checkpoints

    async def held_cleanup(rt: Any, message: dict[str, Any]) -> None:
        await gate.wait()  # the run has emitted `complete` and is still cleaning up
        await original(rt, message)

    monkeypatch.setattr(segment, "cleanup_checkpoints", held_cleanup)
    llm.script(Text("finished"))
    run = await client.runs.start("finish")
    message_id = run.message_id
    async for event in run:
        if event.type == "complete":
            break
    cancelling = asyncio.create_task(run.cancel())
    await asyncio.sleep(0)  # the cancel reaches the run before its cleanup ends
    gate.set()
    assert await cancelling is False
    message = await client.conversations.message(message_id)
    assert message["status"] == "completed" and message["response"] == "finished"
    assert [e.type for e in await client.runs.events(message_id)][-1] == "complete"


async def test_http_retry_is_202_like_chat_then_409_and_404(make_client, llm):
    client = await make_client()
    failed_id = await failed_message(client, llm, "try me")
    app = create_app(client=client)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver"
    ) as http:
        llm.script(Text("worked"))
        response = await http.post(f"{API}/messages/{failed_id}/retry")
        assert response.status_code == 202, response.text
        ids = response.json()
        assert set(ids) == {"conversation_id", "message_id", "thread_id", "stream_url"}
        assert ids["stream_url"] == f"{API}/stream/{ids['message_id']}"
        await client.admin.wait(ids["message_id"])
        message = (await http.get(f"{API}/messages/{ids['message_id']}")).json()
        assert message["status"] == "completed" and message["response"] == "worked"
        again = await http.post(f"{API}/messages/{ids['message_id']}/retry")
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
        assert "cannot be retried" in again.json()["error"]["message"]
        missing = await http.post(f"{API}/messages/nope/retry")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_missing_key_messages_name_the_variable_and_the_endpoint():
    local = ModelRegistry(env={"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"})
    with pytest.raises(MissingCredentialsError) as err:
        local.resolve("qwen")
    assert "no API key for the endpoint OPENAI_BASE_URL=http://127.0.0.1:8080/v1" in str(err.value)
    assert "set OPENAI_API_KEY" in str(err.value)
    with pytest.raises(MissingCredentialsError, match="no model endpoint configured"):
        ModelRegistry(env={}).resolve("gpt-4o-mini")
    profile = ProfileSpec(model="m", base_url="http://127.0.0.1:8000/v1", api_key_env="LOCAL_KEY")
    with pytest.raises(MissingCredentialsError) as err:
        ModelRegistry({"local": profile}, env={}).resolve("local")
    assert "profile 'local' needs an API key for http://127.0.0.1:8000/v1: set LOCAL_KEY" in str(
        err.value
    )
