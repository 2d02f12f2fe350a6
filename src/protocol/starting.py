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
import uuid
from typing import TYPE_CHECKING, Any, cast
from typing import Protocol as TypingProtocol

from ..client import Resume, Run, Task, WorkflowTask
from ..core.conversations import ACTIVE_BRANCH
from ..errors import NotFoundError, ResumeConflictError, UserError
from . import assistants_store, webhooks
from .catalog import Assistant
from .convert import decisions_of, task_text
from .history import state_at
from .thread_ids import shown
from .views import ROOT
from .wire import RunCreate

JSON = dict[str, Any]

if TYPE_CHECKING:
    from ..client import Client
    from .records import ProtocolRecords


class Protocol(TypingProtocol):
    """What starting a run needs of `service.Protocol` (typed here, so the two modules do not
    import each other)."""

    client: Client
    records: ProtocolRecords

    def assistants(self) -> list[Any]: ...
    def assistant(self, assistant_id: str) -> Assistant: ...
    async def conversation(self, thread_id: str, user: str | None) -> JSON: ...
    async def tip(self, conversation: JSON) -> JSON | None: ...
    async def active_runs(self, thread_id: str) -> list[JSON]: ...
    def watch(
        self, run: JSON, message_id: str, cursor: int, *, handle: Run | None = ..., webhook: bool = ...
    ) -> None: ...
    def later(self, thread_id: str, delay: float) -> None: ...
    async def _stop(self, run: JSON, *, rollback: bool) -> str | None: ...


class ConflictError(ResumeConflictError):
    """A thread is busy and the run asked for `reject`, or a run cannot do what was asked."""



async def create(
    p: Protocol, thread_id: str | None, body: RunCreate, user: str | None
) -> tuple[JSON, Run | None]:
    # platform (issue 35): saved assistants, the run's agent configuration and its webhook,
    # checked before anything is stored
    assistant: Any = await assistants_store.find(p, body.assistant_id, user=user)
    _agent_config(p, assistant, body)
    await webhooks.check(p.client.settings.webhooks, body.webhook)
    exists = thread_id is not None and (await p.client.admin.store.get_conversation(thread_id))
    if thread_id is not None and not exists and body.if_not_exists != "create":
        raise NotFoundError(f"thread {shown(thread_id)} not found")
    if exists and thread_id is not None and user is not None:
        await p.conversation(thread_id, user)  # another user's thread: 404 (no user: no owner)
    parent: Any = ACTIVE_BRANCH
    again: str | None = None  # the question of a turn re-run from inside it (Regenerate)
    if body.checkpoint_at is not None:
        if not exists or thread_id is None:
            raise NotFoundError(f"checkpoint {body.checkpoint_at} not found")
        parent, again = await _fork_point(p, thread_id, body.checkpoint_at)
    resuming = body.command is not None and body.command.resuming
    if again is not None and body.input is not None:
        raise UserError(
            f"checkpoint {body.checkpoint_at} is inside a turn: a new input forks after a turn's "
            "end (the checkpoint before its input); without input the turn runs again"
        )
    if assistant.kind != "workflow" and not resuming and again is None:
        task_text(body.input)  # 422 for an input without a user message, before anything
    if body.command is not None and body.command.resuming:
        if not exists or thread_id is None:
            raise ConflictError("a new thread is not interrupted: nothing to resume")
        return await _resume(p, thread_id, assistant, body, user)
    if thread_id is None or not exists:
        thread_id = (await p.client.admin.store.create_conversation(thread_id, user_id=user))["id"]
    values = _values(thread_id, user, assistant, body)
    await p.records.add_thread_defaults(
        thread_id,
        user,
        {"assistant_id": assistant.assistant_id, "graph_id": assistant.graph_id},
        public_id=shown(thread_id),
    )
    active = await p.active_runs(thread_id)
    if body.after_seconds:  # queued now, started by the first to see it due (see `dispatch`)
        request = {**body.queued(), "not_before": time.time() + body.after_seconds}
        row = await p.records.add_run(status="pending", request=request, **values)
        p.later(thread_id, body.after_seconds)
        return row, None
    if active:
        if body.strategy == "reject":
            raise ConflictError(
                f"thread {shown(thread_id)} is busy with run {active[0]['run_id']}; "
                'pass multitask_strategy "enqueue", "interrupt" or "rollback"'
            )
        if body.strategy == "enqueue":
            row = await p.records.add_run(status="pending", request=body.queued(), **values)
            return row, None
        for run in reversed(active):
            rolled = await p._stop(run, rollback=body.strategy == "rollback")
            if rolled is not None and parent is ACTIVE_BRANCH:
                parent = rolled or None
    # a thread made just now has no pause to close; one with nothing stopped is as read above,
    # so only a thread whose runs were stopped is read again
    if exists:
        await close_pause(p, thread_id, None if active else dict(exists))
    return await start(p, thread_id, assistant, body, parent, values, user, text=again)


def _agent_config(p: Protocol, assistant: Any, body: RunCreate) -> Any:
    """The run's agent configuration (assistant, then `config.configurable`, then `context`)."""
    layers = body.model_dump(include={"config", "context"}, exclude_none=True)
    return assistants_store.run_config(p, assistant, layers)


def _values(thread_id: str, user: str | None, assistant: Assistant, body: RunCreate) -> JSON:
    return dict(
        thread_id=thread_id,
        user_id=user,
        assistant_id=assistant.assistant_id,
        multitask_strategy=body.strategy,
        metadata=body.metadata or {},
    )


async def _fork_point(p: Protocol, thread_id: str, checkpoint_id: str) -> tuple[Any, str | None]:
    """Where a run from `checkpoint_id` answers: (the parent message, None) after a turn's end
    or `root`; for a step inside a turn (after its input, a model turn or a tool round), its
    message's parent and the turn's question, to run the turn again (LangGraph re-runs from
    that step; we re-run the turn from its input, so its tool calls are asked again)."""
    if checkpoint_id == ROOT:
        return None, None
    messages = [cast(JSON, dict(m)) for m in await p.client.conversations.messages(thread_id)]
    state = await state_at(p.client, thread_id, messages, checkpoint_id)
    message_id = state["metadata"]["message_id"]
    if state["checkpoint"]["checkpoint_id"] == message_id:
        return message_id, None
    message = next(m for m in messages if m["id"] == message_id)
    return message["parent_id"], message["content"]


async def close_pause(p: Protocol, thread_id: str, conversation: JSON | None = None) -> None:
    """A new input on a thread paused for a decision closes the pause (as a cancel does).
    `conversation`: its row as just read (else read here)."""
    if conversation is None:
        conversation = await p.conversation(thread_id, None)
    tip = await p.tip(conversation)
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
    text: str | None = None,
) -> tuple[JSON, Run]:
    """Start the run: a workflow, or the lead on `text` (else the input's user message)."""
    if assistant.kind == "workflow":
        data = body.input
        task: Any = WorkflowTask(
            assistant.name, data if isinstance(data, dict) else None, conversation_id=thread_id
        )
    else:
        config = _agent_config(p, assistant, body)
        task = Task(
            text if text is not None else task_text(body.input),
            thread_id,
            parent,
            config=None if config is None else config.set(),
            message_id=None if run_id is None else queued_message_id(run_id),
        )
    try:
        run = await p.client.runs.start(task, user_id=user)
    except ResumeConflictError:
        if not isinstance(task, Task) or task.message_id is None:
            raise
        # A queued run's message exists: its earlier starter died between starting it and
        # recording it here. The row takes that message; it is not started twice.
        run = await p.client.runs.get(task.message_id)
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
    if body.webhook:  # platform (issue 35): checked when the run was asked for
        await webhooks.register(p.client.admin.store, row["run_id"], body.webhook)
    p.watch(row, run.message_id, 0, handle=run, webhook=bool(body.webhook))
    return row, run


QUEUED = uuid.UUID("0d8e4b0a-5b7e-4c1e-8f3a-2a9c6f1d7e55")  # uuid5 namespace of queued runs' messages


def queued_message_id(run_id: str) -> str:
    """The message id of queued run `run_id`: every starter of the row (after a kill, another
    one) asks for the same, so the engine refuses a second start."""
    return uuid.uuid5(QUEUED, run_id).hex


async def _resume(
    p: Protocol, thread_id: str, assistant: Assistant, body: RunCreate, user: str | None
) -> tuple[JSON, Run]:
    assert body.command is not None
    tip = await p.tip(await p.conversation(thread_id, user))
    if tip is None or tip["status"] != "waiting":
        raise ConflictError(f"thread {shown(thread_id)} is not interrupted: nothing to resume")
    decisions = decisions_of(body.command.resume, tip.get("waiting_for") or {})
    run = await p.client.runs.start(Resume(tip["id"], decisions), user_id=user)
    values = _values(thread_id, user, assistant, body)
    row = await p.records.add_run(
        status="running", message_id=tip["id"], cursor=run.cursor, request=body.streaming(), **values
    )
    if body.webhook:  # platform (issue 35)
        await webhooks.register(p.client.admin.store, row["run_id"], body.webhook)
    p.watch(row, tip["id"], run.cursor, handle=run, webhook=bool(body.webhook))
    return row, run
