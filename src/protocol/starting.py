"""Starting a protocol run: check the whole request first, then act.

Everything a request can be refused for (an unknown assistant, an input without a user
message, a resume that does not fit the pause, a checkpoint not in the thread) is checked
before anything is stored, started, resumed or cancelled: a refused request changes nothing.
Only then is the thread made (threadless runs, `if_not_exists="create"`), its first-run
metadata written, a busy thread's runs stopped (double-texting) and the run started.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from ..client import Resume, Run, Task, WorkflowTask
from ..core.conversations import ACTIVE_BRANCH
from ..errors import NotFoundError, ResumeConflictError
from .catalog import Assistant
from .convert import decisions_of, task_text
from .views import ROOT
from .wire import RunCreate

if TYPE_CHECKING:
    from .service import Protocol


class ConflictError(ResumeConflictError):
    """A thread is busy and the run asked for `reject`, or a run cannot do what was asked."""


JSON = dict[str, Any]


async def create(
    p: Protocol, thread_id: str | None, body: RunCreate, user: str | None
) -> tuple[JSON, Run | None]:
    assistant = p.assistant(body.assistant_id)
    if assistant.kind != "workflow" and not (body.command and body.command.resuming):
        task_text(body.input)  # 422 for an input without a user message, before anything
    exists = thread_id is not None and (await p.client.admin.store.get_conversation(thread_id))
    if thread_id is not None and not exists and body.if_not_exists != "create":
        raise NotFoundError(f"thread {thread_id} not found")
    if exists and thread_id is not None:
        await p.conversation(thread_id, user)  # another user's thread: 404
    parent: Any = ACTIVE_BRANCH
    if body.checkpoint_at is not None:
        if not exists or thread_id is None:
            raise NotFoundError(f"checkpoint {body.checkpoint_at} not found")
        parent = await _fork_point(p, thread_id, body.checkpoint_at)
    if body.command is not None and body.command.resuming:
        if not exists or thread_id is None:
            raise ConflictError("a new thread is not interrupted: nothing to resume")
        return await _resume(p, thread_id, assistant, body, user)
    if thread_id is None or not exists:
        thread_id = (await p.client.admin.store.create_conversation(thread_id, user_id=user))["id"]
    values = _values(thread_id, user, assistant, body)
    await p.records.merge_thread_metadata(thread_id, user, await _first_run_metadata(p, thread_id, assistant))
    active = await p.active_runs(thread_id)
    if body.after_seconds:  # queued now, started by the first to see it due (see `dispatch`)
        request = {**body.queued(), "not_before": time.time() + body.after_seconds}
        row = await p.records.add_run(status="pending", request=request, **values)
        p.later(thread_id, body.after_seconds)
        return row, None
    if active:
        if body.strategy == "reject":
            raise ConflictError(
                f"thread {thread_id} is busy with run {active[0]['run_id']}; "
                'pass multitask_strategy "enqueue", "interrupt" or "rollback"'
            )
        if body.strategy == "enqueue":
            row = await p.records.add_run(status="pending", request=body.queued(), **values)
            return row, None
        for run in reversed(active):
            rolled = await p._stop(run, rollback=body.strategy == "rollback")
            if rolled is not None and parent is ACTIVE_BRANCH:
                parent = rolled or None
    await close_pause(p, thread_id)
    return await start(p, thread_id, assistant, body, parent, values, user)


def _values(thread_id: str, user: str | None, assistant: Assistant, body: RunCreate) -> JSON:
    return dict(
        thread_id=thread_id,
        user_id=user,
        assistant_id=assistant.assistant_id,
        multitask_strategy=body.strategy,
        metadata=body.metadata or {},
    )


async def _first_run_metadata(p: Protocol, thread_id: str, assistant: Assistant) -> JSON:
    row = await p.records.thread_row(thread_id)
    meta = row["metadata"] if row else {}
    return {
        k: v
        for k, v in (("assistant_id", assistant.assistant_id), ("graph_id", assistant.graph_id))
        if k not in meta
    }


async def _fork_point(p: Protocol, thread_id: str, checkpoint_id: str) -> str | None:
    if checkpoint_id == ROOT:
        return None
    try:
        message = await p.client.conversations.message(checkpoint_id)
    except NotFoundError:
        message = None
    if message is None or message["conversation_id"] != thread_id:
        raise NotFoundError(f"checkpoint {checkpoint_id} not found in thread {thread_id}")
    return checkpoint_id


async def close_pause(p: Protocol, thread_id: str) -> None:
    """A new input on a thread paused for a decision closes the pause (as a cancel does)."""
    tip = await p.tip(await p.conversation(thread_id, None))
    if tip is not None and tip["status"] == "waiting":
        await p.client.runs.cancel(tip["id"])


async def start(
    p: Protocol,
    thread_id: str,
    assistant: Assistant,
    body: RunCreate,
    parent: Any,
    values: JSON,
    user: str | None,
    *,
    run_id: str | None = None,
) -> tuple[JSON, Run]:
    if assistant.kind == "workflow":
        data = body.input
        task: Any = WorkflowTask(
            assistant.name, data if isinstance(data, dict) else None, conversation_id=thread_id
        )
    else:
        task = Task(task_text(body.input), thread_id, parent)
    run = await p.client.runs.start(task, user_id=user)
    if run_id is None:
        row = await p.records.add_run(
            status="running", message_id=run.message_id, cursor=0, request=body.streaming(), **values
        )
    else:
        await p.records.set_run(
            run_id,
            status="running",
            message_id=run.message_id,
            cursor=0,
            request=json.dumps(body.streaming()),
        )
        row = await p.records.run(run_id) or {}
    p.watch(row, run.message_id, 0)
    return row, run


async def _resume(
    p: Protocol, thread_id: str, assistant: Assistant, body: RunCreate, user: str | None
) -> tuple[JSON, Run]:
    assert body.command is not None
    tip = await p.tip(await p.conversation(thread_id, user))
    if tip is None or tip["status"] != "waiting":
        raise ConflictError(f"thread {thread_id} is not interrupted: nothing to resume")
    decisions = decisions_of(body.command.resume, tip.get("waiting_for") or {})
    run = await p.client.runs.start(Resume(tip["id"], decisions), user_id=user)
    values = _values(thread_id, user, assistant, body)
    row = await p.records.add_run(
        status="running", message_id=tip["id"], cursor=run.cursor, request=body.streaming(), **values
    )
    p.watch(row, tip["id"], run.cursor)
    return row, run
