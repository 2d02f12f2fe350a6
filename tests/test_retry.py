"""Retrying a failed or cancelled message (controller and HTTP), the conflict messages that
say who runs a message, a cancel that arrives after the final event, and the missing-key
messages of `ModelRegistry.resolve`."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from scripted_llm import Call, Error, Text, ToolCalls

from artifactflow import MissingCredentialsError, ResumeConflictError, tool
from artifactflow.agents.model import ModelRegistry, ProfileSpec
from artifactflow.api.app import create_app
from artifactflow.core.run import segment

API = "/api/v1"


@tool(permission="confirm")
async def guarded(text: str) -> str:
    """Needs approval."""
    return text


async def failed_message(controller: Any, llm: Any, content: str, **kwargs: Any) -> str:
    llm.route(lambda request: Error(500, "upstream exploded"))
    result = await controller.execute(content, **kwargs)
    llm.clear_routes()
    assert result.status == "failed"
    return result.message_id


async def test_retry_starts_a_sibling_with_the_same_parent_and_content(make_controller, llm):
    controller = await make_controller()
    llm.script(Text("first"))
    first = await controller.execute("first question")
    failed_id = await failed_message(
        controller, llm, "second question", conversation_id=first.conversation_id
    )
    llm.script(Text("second, at last"))
    ids = await controller.retry(failed_id)
    assert ids["conversation_id"] == first.conversation_id and ids["message_id"] != failed_id
    events = [e async for e in controller.follow(ids["message_id"], from_start=True)]
    assert events[0].type == "metadata" and events[-1].type == "complete"
    assert "".join(e.data.delta for e in events if e.type == "llm_chunk") == "second, at last"
    new = await controller.get_message(ids["message_id"])
    old = await controller.get_message(failed_id)
    assert (new["parent_id"], new["content"], new["status"]) == (
        first.message_id,
        "second question",
        "completed",
    )
    assert old["status"] == "failed" and old["error"]  # the failed try is kept as it was
    tree = await controller.conversation_tree(first.conversation_id)
    assert tree["active_message_id"] == ids["message_id"]

    with pytest.raises(ResumeConflictError, match="cannot be retried.*it has completed"):
        await controller.retry(ids["message_id"])


async def test_retry_refuses_paused_and_running_messages(make_controller, llm):
    controller = await make_controller(extra_tools=[guarded], lead_tools=["guarded"])
    llm.script(ToolCalls([Call("guarded", {"text": "x"}, id="c1")]))
    paused = await controller.execute("pause")
    assert paused.status == "waiting"
    with pytest.raises(ResumeConflictError, match="waiting for a decision; answer it with resume"):
        await controller.retry(paused.message_id)

    llm.script(Text("slow " * 50, chunk_size=5, chunk_delay=0.1))
    stream = controller.stream_execute("talk")
    first = await anext(stream)  # metadata
    async for event in stream:  # the model call is under way (its reply is being consumed)
        if event.type == "llm_chunk":
            break
    with pytest.raises(ResumeConflictError, match="it is running in this process"):
        await controller.retry(first.message_id)
    with pytest.raises(ResumeConflictError, match="not waiting for a decision: it is running in"):
        await controller.resume_start(first.message_id, {"decisions": "approve"})
    await stream.aclose()  # cancels the run it started
    cancelled = await controller.get_message(first.message_id)
    assert cancelled["status"] == "cancelled"
    llm.script(Text("quick"))
    ids = await controller.retry(first.message_id)  # a cancelled message is retried too
    events = [e async for e in controller.follow(ids["message_id"], from_start=True)]
    assert events[-1].type == "complete" and events[-1].data.response == "quick"


async def test_cancel_after_the_final_event_keeps_the_outcome(make_controller, llm, monkeypatch):
    controller = await make_controller()
    gate = asyncio.Event()
    original = segment.cleanup_checkpoints

    async def held_cleanup(rt: Any, message: dict[str, Any]) -> None:
        await gate.wait()  # the run has emitted `complete` and is still cleaning up
        await original(rt, message)

    monkeypatch.setattr(segment, "cleanup_checkpoints", held_cleanup)
    llm.script(Text("finished"))
    message_id = (await controller.start("finish"))["message_id"]
    async for event in controller.follow(message_id, from_start=True):
        if event.type == "complete":
            break
    cancelling = asyncio.create_task(controller.cancel(message_id))
    await asyncio.sleep(0)  # the cancel reaches the run before its cleanup ends
    gate.set()
    assert await cancelling is False
    message = await controller.get_message(message_id)
    assert message["status"] == "completed" and message["response"] == "finished"
    assert [e.type for e in await controller.events(message_id)][-1] == "complete"


async def test_http_retry_is_202_like_chat_then_409_and_404(make_controller, llm):
    controller = await make_controller()
    failed_id = await failed_message(controller, llm, "try me")
    app = create_app(controller=controller)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver"
    ) as client:
        llm.script(Text("worked"))
        response = await client.post(f"{API}/messages/{failed_id}/retry")
        assert response.status_code == 202, response.text
        ids = response.json()
        assert set(ids) == {"conversation_id", "message_id", "thread_id", "stream_url"}
        assert ids["stream_url"] == f"{API}/stream/{ids['message_id']}"
        await controller.wait(ids["message_id"])
        message = (await client.get(f"{API}/messages/{ids['message_id']}")).json()
        assert message["status"] == "completed" and message["response"] == "worked"
        again = await client.post(f"{API}/messages/{ids['message_id']}/retry")
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
        assert "cannot be retried" in again.json()["error"]["message"]
        missing = await client.post(f"{API}/messages/nope/retry")
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
