"""The public facade end to end: `Client`, one `Run` handle, typed requests.

Every run here goes through the real engine against the scripted OpenAI-compatible server:
a task to completion, a CONFIRM pause answered on the handle and from a second client on the
same data folder (another process's worth), reattaching by event id, retry, a workflow that
pauses and resumes elsewhere, cancel, and `async with run` cancelling an early exit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scripted_llm import Call, Error, Text, ToolCalls
from waiting import wait_until
from wf_helpers import workflow_config

from artifactflow import (
    Client,
    InvalidResumeError,
    MessageStatus,
    NotFoundError,
    Resume,
    ResumeConflictError,
    Retry,
    Run,
    Task,
    WorkflowTask,
    tool,
)

GUARDED: list[str] = []
# An answer that streams for a minute unless cancelled.
SLOW = Text("z" * 1200, chunk_size=1, chunk_delay=0.05)


@tool(permission="confirm")
def guarded(text: str) -> str:
    """Needs approval; records each run."""
    GUARDED.append(text)
    return f"guarded {text}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    GUARDED.clear()


def kinds(events) -> list[str]:
    return [e.type for e in events if e.type != "llm_chunk"]


async def paused(client: Client, llm, *calls: Call) -> Run:
    llm.script(ToolCalls(list(calls)), Text("done"))
    run = await client.runs.start("write it")
    result = await run.result()
    assert result.status is MessageStatus.WAITING, result
    return run


async def second_client(make_client, first: Client) -> Client:
    """Another client on the same config and data folder (what a second process opens)."""
    settings = first.settings
    return await make_client(config_dir=settings.config_dir, data_dir=settings.data_dir, extra_tools=[guarded])


async def test_a_task_runs_to_completion(make_client, llm):
    client = await make_client()
    llm.script(Text("a haiku"), Text("second"))
    run = await client.runs.start("Write a haiku")
    events = [e async for e in run]
    assert kinds(events)[0] == "metadata" and kinds(events)[-1] == "complete"
    assert "".join(e.data.delta for e in events if e.type == "llm_chunk") == "a haiku"
    assert run.events_seen == len(kinds(events))
    assert [e.event_id for e in events if e.type != "llm_chunk"] == list(range(1, run.events_seen + 1))
    result = await run.result()  # already at the end: nothing more to read
    assert (result.status, result.response, result.outcome) == (MessageStatus.COMPLETED, "a haiku", "completed")
    assert result.message_id == run.message_id and result.conversation_id == run.conversation_id
    assert kinds(result.events) == kinds(events) and result.pending_calls is None
    assert result.metrics and result.metrics["llm_calls"] == 1

    # `client.run` is start + result; a Task continues the same conversation.
    again = await client.run(Task("and another", conversation_id=run.conversation_id))
    assert (again.status, again.response) == ("completed", "second")
    assert again.conversation_id == run.conversation_id and llm.request_count == 2
    tree = await client.conversations.tree(run.conversation_id)
    assert tree["active_message_id"] == again.message_id
    assert [m["id"] for m in await client.conversations.messages(run.conversation_id)] == [
        run.message_id, again.message_id,
    ]
    assert await client.runs.last_event_id(run.message_id) == run.events_seen


async def test_a_task_with_a_message_id_starts_once(make_client, llm):
    """`Task(message_id=X)`: the message gets that id; a second start with X is refused and
    nothing changes (no second message, no model call), whoever asks."""
    client = await make_client()
    llm.script(Text("once"), Text("never"))
    run = await client.runs.start(Task("only once", message_id="m-fixed-1"))
    assert run.message_id == "m-fixed-1"
    assert (await run.result()).response == "once"
    with pytest.raises(ResumeConflictError, match="m-fixed-1"):
        await client.runs.start(Task("again", conversation_id=run.conversation_id, message_id="m-fixed-1"))
    assert [m["id"] for m in await client.conversations.messages(run.conversation_id)] == ["m-fixed-1"]
    assert llm.request_count == 1


async def test_a_pause_is_answered_on_the_handle(make_client, llm):
    client = await make_client(extra_tools=[guarded], lead_tools=["guarded"])
    run = await paused(client, llm, Call("guarded", {"text": "x"}, id="c1"))
    result = await run.result()
    assert [c["tool_call_id"] for c in result.pending_calls] == ["c1"]
    assert kinds(result.events)[-1] == "permission_request" and GUARDED == []
    assert [m["id"] for m in await client.runs.pending()] == [run.message_id]

    with pytest.raises(InvalidResumeError):
        await run.respond({"nope": "approve"})  # refused; the run stays paused
    assert await run.respond("approve") is run
    resumed = await run.result()
    assert resumed.status == "completed" and resumed.response == "done"
    assert kinds(resumed.events)[0] == "permission_result" and kinds(resumed.events)[-1] == "complete"
    assert "tool_complete" in kinds(resumed.events)
    assert GUARDED == ["x"] and llm.request_count == 2
    with pytest.raises(ResumeConflictError, match="it has completed"):
        await run.respond("approve")


async def test_a_handle_first_read_after_its_run_ended_still_has_every_chunk(make_client, llm):
    """A slow reader (a busy machine, an SSE response that starts late) reads a run that already
    finished: the chunks, never stored, come from the segment the handle started, for a new run
    and for a resumed one."""
    client = await make_client(extra_tools=[guarded], lead_tools=["guarded"])
    llm.script(
        ToolCalls([Call("guarded", {"text": "x"}, id="c1")], content="Let me write."),
        Text("all written down", chunk_size=3),
    )
    run = await client.runs.start("write it")

    async def ended(status: str) -> bool:
        message = await client.conversations.message(run.message_id)
        return message["status"] == status and run.message_id not in client._engine.rt.runs

    await wait_until(lambda: ended("waiting"))  # the segment is over and gone from the runtime
    first = [e async for e in run]
    assert kinds(first)[-1] == "permission_request"
    assert "".join(e.data.delta for e in first if e.type == "llm_chunk") == "Let me write."

    await run.respond("approve")
    await wait_until(lambda: ended("completed"))
    second = [e async for e in run]
    assert kinds(second)[0] == "permission_result" and kinds(second)[-1] == "complete"
    assert "".join(e.data.delta for e in second if e.type == "llm_chunk") == "all written down"
    ids = [e.event_id for e in first + second if e.type != "llm_chunk"]
    assert ids == list(range(1, len(ids) + 1))


async def test_a_pause_is_answered_from_a_second_client(make_client, llm):
    first = await make_client(extra_tools=[guarded], lead_tools=["guarded"])
    run = await paused(first, llm, Call("guarded", {"text": "a"}, id="c1"), Call("guarded", {"text": "b"}, id="c2"))
    pause_id = run.events_seen
    second = await second_client(make_client, first)

    answer = await second.runs.start(
        Resume(run.message_id, {"c1": "approve", "c2": {"action": "deny", "reason": "not b"}})
    )
    result = await answer.result()
    assert result.status == "completed" and result.response == "done" and GUARDED == ["a"]
    assert kinds(result.events)[0] == "permission_result"
    assert result.events[0].event_id == pause_id + 1  # the new segment, read from the pause on
    denied = [m for m in llm.requests[1]["messages"] if m.get("tool_call_id") == "c2"]
    assert "not b" in denied[0]["content"]

    # The first client's handle, iterated again, sees nothing new (its segment ended at the
    # pause); a handle from `runs.get` reads the whole log.
    assert [e async for e in run] == []
    whole = [e async for e in await first.runs.get(run.message_id)]
    assert kinds(whole).count("permission_request") == 1 and kinds(whole)[-1] == "complete"
    with pytest.raises(ResumeConflictError):
        await first.runs.start(Resume(run.message_id, "approve"))
    assert GUARDED == ["a"]


async def test_reattach_by_event_id(make_client, llm):
    client = await make_client()
    llm.script(Text("abcdefghij" * 6, chunk_size=2, chunk_delay=0.01))
    run = await client.runs.start("stream")
    seen = []
    async for event in run:  # stop early: the run goes on (no `async with`)
        if event.type != "llm_chunk":
            seen.append(event)
        if len(seen) == 2:
            break
    cursor = seen[-1].event_id
    other = await client.runs.get(run.message_id, after_event_id=cursor)
    rest = [e async for e in other if e.type != "llm_chunk"]
    assert rest[0].event_id == cursor + 1 and rest[-1].type == "complete"
    ids = [e.event_id for e in [*seen, *rest]]
    assert ids == list(range(1, len(ids) + 1))
    assert other.events_seen == len(rest)
    assert (await other.result()).response == "abcdefghij" * 6

    # The first handle continues after what it yielded.
    more = [e async for e in run if e.type != "llm_chunk"]
    assert [e.event_id for e in more] == [e.event_id for e in rest]
    with pytest.raises(NotFoundError):
        await client.runs.get("no-such-message")
    assert [e.event_id for e in await client.runs.events(run.message_id, after_event_id=cursor)] == [
        e.event_id for e in rest
    ]


async def test_retry_of_a_failed_run(make_client, llm):
    client = await make_client()
    llm.route(lambda request: Error(500, "upstream exploded"))
    failed = await client.run("try this")
    llm.clear_routes()
    assert failed.status == "failed" and failed.error and kinds(failed.events)[-1] == "error"

    llm.script(Text("worked"))
    run = await client.runs.start(Retry(failed.message_id))
    result = await run.result()
    assert run.message_id != failed.message_id and run.conversation_id == failed.conversation_id
    assert (result.status, result.response) == ("completed", "worked")
    message = await client.conversations.message(run.message_id)
    assert message["content"] == "try this"
    with pytest.raises(ResumeConflictError, match="cannot be retried"):
        await client.runs.start(Retry(run.message_id))


STAMP = """
name: stamp
input:
  type: object
  properties: {text: {type: string}}
nodes:
  - {id: start, role: start}
  - {id: ask, role: linear, kind: agent, agent: scribe, instruction: "Say {{ input.text }}"}
  - id: mark
    role: linear
    kind: tool
    tool: guarded
    arguments: {text: "{{ nodes.ask.output }}"}
  - {id: done, role: exit, output: "{{ nodes.ask.output }}"}
edges:
  - {from: start, to: ask}
  - {from: ask, to: mark}
  - {from: mark, to: done}
"""


async def test_a_workflow_pauses_and_resumes_from_a_second_client(make_client, tmp_path: Path, llm):
    config = workflow_config(tmp_path, {"stamp": STAMP}, agents={"scribe": []})
    first = await make_client(config_dir=config, extra_tools=[guarded])
    assert [w["name"] for w in first.workflows.list()] == ["stamp"]
    assert first.workflows.get("stamp").name == "stamp"
    llm.script(Text("hello"))
    run = await first.runs.start(WorkflowTask("stamp", {"text": "hello"}))
    result = await run.result()
    assert result.status == "waiting" and GUARDED == []
    assert [c["tool"] for c in result.pending_calls] == ["guarded"]
    assert kinds(result.events)[0] == "metadata" and result.events[0].data.workflow == "stamp"

    second = await second_client(make_client, first)  # compiles the stored workflow afresh
    resumed = await (await second.runs.start(Resume(run.message_id, "approve"))).result()
    assert (resumed.status, resumed.response) == ("completed", "hello")
    assert GUARDED == ["hello"] and llm.request_count == 1
    assert [r["message_id"] for r in await second.workflows.runs("stamp")] == [run.message_id]
    assert {r["execution_id"] for r in await second.workflows.lineage(run.message_id)} >= {"ask#1", "mark#1"}


async def test_cancel_stops_a_running_run(make_client, llm):
    client = await make_client()
    llm.script(SLOW)
    run = await client.runs.start("go slowly")
    async for event in run:
        if event.type == "llm_chunk":
            break
    assert await run.cancel() is True
    result = await run.result()
    assert result.status == "cancelled" and kinds(result.events)[-1] == "cancelled"
    assert result.response and set(result.response) == {"z"}  # the partial answer is kept
    assert await client.runs.cancel(run.message_id) is False  # nothing left to stop
    assert client.admin.active_run_count() == 0


async def test_async_with_cancels_a_run_left_early(make_client, llm):
    client = await make_client()
    llm.script(SLOW)
    async with await client.runs.start("go slowly") as run:
        async for event in run:
            if event.type == "llm_chunk":
                break
    message = await client.conversations.message(run.message_id)
    assert message["status"] == "cancelled"
    events = await client.runs.events(run.message_id)
    assert events[-1].type == "cancelled"

    # Leaving the block after the final event cancels nothing.
    llm.script(Text("quick"))
    async with await client.runs.start("quick one") as quick:
        result = await quick.result()
    assert (await client.conversations.message(quick.message_id))["status"] == "completed"
    assert result.response == "quick"
