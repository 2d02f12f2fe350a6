"""The protocol's runs over the facade: start, queue, watch, cancel, join.

A protocol run is one segment of one of our messages, started through `client.runs.start`
(a `Task`, a `Resume` or a `WorkflowTask`): the engine, its workers, leases, permissions and
event log do the work; this module only keeps the protocol's run rows (`records.py`) in step.

- Status: `running` until the segment's final event; then `success` (completed, or paused:
  the thread is `interrupted`), `error` (failed) or `interrupted` (cancelled). It is read off
  the message, so any worker answers the same.
- Double-texting on a busy thread: `reject` (409), `enqueue` (a `pending` row, started by
  whoever sees the thread idle first: a compare-and-set on the row decides), `interrupt` (the
  active run is cancelled; its message stays on the branch) and `rollback` (cancelled too, its
  run row deleted, and the new message answers after the cancelled one's parent).
- A new input on a thread paused for a decision closes the pause (as a cancel does).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from ..client import Resume, Run, Task, WorkflowTask
from ..core.conversations import ACTIVE_BRANCH
from ..core.store.schema import conversations as conversation_table
from ..errors import NotFoundError, ResumeConflictError, UserError
from . import assistants_store, webhooks
from .convert import decisions_of, task_text
from .records import FINAL, ProtocolRecords
from .views import ROOT, run_view

if TYPE_CHECKING:
    from ..client import Client

log = logging.getLogger("artifactflow.protocol")

STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")
STARTING_SECONDS = 30.0  # a claimed queued run not started by then is queued again
MESSAGE_TO_RUN = {
    "waiting": "success",
    "completed": "success",
    "failed": "error",
    "cancelled": "interrupted",
}


class ConflictError(ResumeConflictError):
    """A thread is busy and the run asked for `reject`, or a run cannot do what was asked."""


class Assistant:
    def __init__(
        self, assistant_id: str, graph_id: str, kind: str, name: str, description: str
    ) -> None:
        self.assistant_id, self.graph_id, self.kind = assistant_id, graph_id, kind
        self.name, self.description = name, description


class Protocol:
    """One per app: the client, the protocol's records, and the tasks watching runs here."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.records = ProtocolRecords(client.admin.store)
        self._watchers: dict[str, asyncio.Task[None]] = {}

    # --- assistants ----------------------------------------------------------------------------

    def assistants(self) -> list[Assistant]:
        services = self.client.admin.services
        lead = services.lead
        out = [
            Assistant(
                lead.name, lead.name, "agent", lead.name, getattr(lead, "description", "") or ""
            )
        ]
        for workflow in self.client.workflows.list():
            if not workflow.get("problems"):
                out.append(
                    Assistant(
                        f"workflow:{workflow['name']}",
                        f"workflow:{workflow['name']}",
                        "workflow",
                        workflow["name"],
                        workflow.get("description") or "",
                    )
                )
        return out

    def assistant(self, assistant_id: str) -> Assistant:
        for assistant in self.assistants():
            if assistant_id in (assistant.assistant_id, assistant.graph_id, assistant.name):
                return assistant
        if assistant_id == "agent":  # LangGraph's template graph name: the lead agent
            return self.assistants()[0]
        raise NotFoundError(
            f"assistant {assistant_id} not found; GET /assistants/search lists them"
        )

    # --- threads -------------------------------------------------------------------------------

    async def conversation(self, thread_id: str, user: str | None) -> dict[str, Any]:
        try:
            return dict(await self.client.conversations.get(thread_id, user_id=user))
        except NotFoundError:
            await self.records.forget_if_orphan(thread_id)  # deleted below us: drop its rows
            raise NotFoundError(f"thread {thread_id} not found") from None

    async def tip(self, conversation: dict[str, Any]) -> dict[str, Any] | None:
        active = conversation.get("active_message_id")
        return None if active is None else dict(await self.client.conversations.message(active))

    async def busy(self, thread_id: str) -> bool:
        """Whether the thread has a queued or running run; a queued one whose turn has come is
        started here (its dispatcher may be gone: any reader moves the queue on)."""
        active = await self.active_runs(thread_id)
        if active and active[0]["status"] == "pending":
            await self.dispatch(thread_id)
            active = await self.active_runs(thread_id)
        return bool(active)

    async def active_runs(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's pending and running runs, after settling those that ended."""
        rows = await self.records.thread_runs(
            thread_id, statuses=("pending", "starting", "running"), oldest_first=True
        )
        out = []
        for row in rows:
            if row["status"] == "starting" and row["updated_at"] < time.time() - STARTING_SECONDS:
                # its starter died between claiming it and starting it: queue it again
                await self.records.set_run(row["run_id"], when=("starting",), status="pending")
                row = {**row, "status": "pending"}
            row = await self.settle(row)
            if row["status"] not in FINAL:
                out.append(row)
        return out

    # --- run status ----------------------------------------------------------------------------

    async def settle(self, run: dict[str, Any]) -> dict[str, Any]:
        """The run with its status brought up to date from its message."""
        if run["status"] != "running" or run["message_id"] is None:
            return run
        message = await self.client.conversations.message(run["message_id"])
        status = MESSAGE_TO_RUN.get(message["status"])
        if status is None and message["status"] == "running":
            later = [
                r
                for r in await self.records.thread_runs(run["thread_id"])
                if r["message_id"] == run["message_id"] and r["cursor"] > run["cursor"]
            ]
            status = "success" if later else None  # a later segment (a resume) took over
        if status is not None:
            await self.records.set_run(run["run_id"], when=("running",), status=status)
            return {**run, **(await self.records.run(run["run_id"]) or {})}
        return run

    async def run_row(self, thread_id: str, run_id: str, user: str | None) -> dict[str, Any]:
        run = await self.records.run(run_id)
        if (
            run is None
            or run["thread_id"] != thread_id
            or (user is not None and run["user_id"] != user)
        ):
            raise NotFoundError(f"run {run_id} not found")
        if run["status"] == "pending":
            await self.dispatch(thread_id)
            run = await self.records.run(run_id) or run
        return await self.settle(run)

    # --- starting ------------------------------------------------------------------------------

    async def create(
        self, thread_id: str | None, body: dict[str, Any], user: str | None
    ) -> tuple[dict[str, Any], Run | None]:
        """Start (or queue) the run `body` asks for; its row and, when it started, its handle."""
        await self.records.ready()
        # platform (issue 35): saved assistants, the run's agent configuration, its webhook
        assistant: Any = await assistants_store.find(self, str(body.get("assistant_id") or ""))
        assistants_store.run_config(self, assistant, body)  # checked before anything is stored
        webhook = await webhooks.check(self.client.settings.webhooks, body.get("webhook"))
        strategy = body.get("multitask_strategy") or "reject"
        if strategy not in STRATEGIES:
            raise UserError(f"multitask_strategy must be one of {', '.join(STRATEGIES)}")
        thread_id = await self._thread_for(thread_id, body, user)
        await self.records.merge_thread_metadata(
            thread_id, user, await self._first_run_metadata(thread_id, assistant)
        )
        command = body.get("command") or {}
        if command.get("update") is not None or command.get("goto") is not None:
            raise UserError(
                "command.update and command.goto are not supported; resume with command.resume"
            )
        values = dict(
            thread_id=thread_id,
            user_id=user,
            assistant_id=assistant.assistant_id,
            multitask_strategy=strategy,
            metadata=body.get("metadata") or {},
        )
        if "resume" in command:
            values["request"] = _streaming(body)
            resumed = await self._resume(thread_id, command["resume"], values, user)
            if webhook is not None:
                await webhooks.register(self.client.admin.store, resumed[0]["run_id"], webhook)
            return resumed
        active = await self.active_runs(thread_id)
        parent: Any = ACTIVE_BRANCH
        if body.get("checkpoint_id") or (body.get("checkpoint") or {}).get("checkpoint_id"):
            parent = await self._fork_point(
                thread_id, body.get("checkpoint_id") or body["checkpoint"]["checkpoint_id"]
            )
        delay = float(body.get("after_seconds") or 0)
        if delay > 0:  # queued now, started by the first to see it due (see `dispatch`)
            request = {**_request(body), "not_before": time.time() + delay}
            row = await self.records.add_run(status="pending", request=request, **values)
            self.later(thread_id, delay)
            return row, None
        if active:
            if strategy == "reject":
                raise ConflictError(
                    f"thread {thread_id} is busy with run {active[0]['run_id']}; "
                    'pass multitask_strategy "enqueue", "interrupt" or "rollback"'
                )
            if strategy == "enqueue":
                row = await self.records.add_run(status="pending", request=_request(body), **values)
                return row, None
            for run in reversed(active):
                rolled = await self._stop(run, rollback=strategy == "rollback")
                if rolled is not None and parent is ACTIVE_BRANCH:
                    parent = rolled or None
        await self._close_pause(thread_id)
        return await self._start(thread_id, assistant, body, parent, values, user)

    async def _thread_for(
        self, thread_id: str | None, body: dict[str, Any], user: str | None
    ) -> str:
        store = self.client.admin.store
        if thread_id is None:
            return (await store.create_conversation(None, user_id=user))["id"]
        existing = await store.get_conversation(thread_id)
        if existing is None and body.get("if_not_exists") == "create":
            await store.create_conversation(thread_id, user_id=user)
            return thread_id
        await self.conversation(thread_id, user)
        return thread_id

    async def _first_run_metadata(self, thread_id: str, assistant: Assistant) -> dict[str, Any]:
        row = await self.records.thread_row(thread_id)
        meta = row["metadata"] if row else {}
        return {
            k: v
            for k, v in (("assistant_id", assistant.assistant_id), ("graph_id", assistant.graph_id))
            if k not in meta
        }

    async def _fork_point(self, thread_id: str, checkpoint_id: str) -> str | None:
        if checkpoint_id == ROOT:
            return None
        try:
            message = await self.client.conversations.message(checkpoint_id)
        except NotFoundError:
            message = None
        if message is None or message["conversation_id"] != thread_id:
            raise NotFoundError(f"checkpoint {checkpoint_id} not found in thread {thread_id}")
        return checkpoint_id

    async def _close_pause(self, thread_id: str) -> None:
        tip = await self.tip(await self.conversation(thread_id, None))
        if tip is not None and tip["status"] == "waiting":
            await self.client.runs.cancel(tip["id"])

    async def _start(
        self,
        thread_id: str,
        assistant: Assistant,
        body: dict[str, Any],
        parent: Any,
        values: dict[str, Any],
        user: str | None,
        *,
        run_id: str | None = None,
    ) -> tuple[dict[str, Any], Run]:
        if assistant.kind == "workflow":
            data = body.get("input")
            run = await self.client.runs.start(
                WorkflowTask(
                    assistant.name,
                    data if isinstance(data, dict) else None,
                    conversation_id=thread_id,
                ),
                user_id=user,
            )
        else:
            config = assistants_store.run_config(self, assistant, body)  # platform (issue 35)
            config_keys = None if config is None else config.set()
            task = Task(task_text(body.get("input")), thread_id, parent, config=config_keys)
            run = await self.client.runs.start(task, user_id=user)
        if run_id is None:
            row = await self.records.add_run(
                status="running",
                message_id=run.message_id,
                cursor=0,
                request=_streaming(body),
                **values,
            )
        else:
            await self.records.set_run(
                run_id,
                status="running",
                message_id=run.message_id,
                cursor=0,
                request=json.dumps(_streaming(body)),
            )
            row = await self.records.run(run_id) or {}
        if body.get("webhook"):  # platform (issue 35): checked when the run was asked for
            await webhooks.register(self.client.admin.store, row["run_id"], body["webhook"])
        self.watch(row, run.message_id, 0)
        return row, run

    async def _resume(
        self, thread_id: str, resume: Any, values: dict[str, Any], user: str | None
    ) -> tuple[dict[str, Any], Run]:
        tip = await self.tip(await self.conversation(thread_id, user))
        if tip is None or tip["status"] != "waiting":
            raise ConflictError(f"thread {thread_id} is not interrupted: nothing to resume")
        decisions = decisions_of(resume, tip.get("waiting_for") or {})
        run = await self.client.runs.start(Resume(tip["id"], decisions), user_id=user)
        row = await self.records.add_run(
            status="running", message_id=tip["id"], cursor=run.cursor, **values
        )
        self.watch(row, tip["id"], run.cursor)
        return row, run

    # --- watching, queueing, stopping ----------------------------------------------------------

    def watch(self, run: dict[str, Any], message_id: str, cursor: int) -> None:
        """Follow the run here to its end, then settle it and start the thread's next queued run."""

        async def follow() -> None:
            try:
                handle = await self.client.runs.get(message_id, after_event_id=cursor)
                await handle.result()
                settled = await self.settle(await self.records.run(run["run_id"]) or run)
                self.ended(settled)  # platform (issue 35): its webhook
                await self.dispatch(run["thread_id"])
            except Exception:  # a watcher must never take the server down
                log.exception("watching protocol run %s", run["run_id"])
            finally:
                self._watchers.pop(run["run_id"], None)

        self._watchers[run["run_id"]] = asyncio.create_task(
            follow(), name=f"protocol-run-{run['run_id']}"
        )

    def ended(self, run: dict[str, Any]) -> None:
        """The run has ended: its webhook, if it has one, in a task of its own (webhooks.py)."""
        key = f"webhook:{run['run_id']}"
        task = self._watchers[key] = asyncio.create_task(webhooks.send(self.client, run_view(run)))
        task.add_done_callback(lambda _: self._watchers.pop(key, None))

    async def move_head(self, thread_id: str, message_id: str | None) -> None:
        """Make `message_id` the thread's head (None: before its first message), so its state
        and the next run's parent follow."""
        table = conversation_table
        await self.client.admin.store.write(
            table.update().where(table.c.id == thread_id).values(active_message_id=message_id)
        )

    async def dispatch(self, thread_id: str) -> None:
        """Start the oldest queued run of an idle thread (the first worker to claim it does)."""
        active = await self.active_runs(thread_id)
        if not active or active[0]["status"] != "pending":
            return
        run = active[0]
        not_before = (run["request"] or {}).get("not_before") or 0
        if not_before > time.time():
            return
        if not await self.records.set_run(run["run_id"], when=("pending",), status="starting"):
            return
        body = run["request"] or {}
        try:
            assistant: Any = await assistants_store.find(self, run["assistant_id"])
            values = dict(
                thread_id=thread_id,
                user_id=run["user_id"],
                assistant_id=run["assistant_id"],
                multitask_strategy=run["multitask_strategy"],
                metadata=run["metadata"],
            )
            await self._close_pause(thread_id)
            await self._start(
                thread_id,
                assistant,
                body,
                ACTIVE_BRANCH,
                values,
                run["user_id"],
                run_id=run["run_id"],
            )
        except Exception:
            log.exception("starting queued protocol run %s", run["run_id"])
            await self.records.set_run(run["run_id"], status="error")

    async def _stop(self, run: dict[str, Any], *, rollback: bool) -> str | None:
        """Cancel an active run; with `rollback`, also drop its row. Returns, for a rolled-back
        run with a message, that message's parent id ('' for the root); else None."""
        parent: str | None = None
        if run["status"] == "pending":
            await self.records.set_run(run["run_id"], when=("pending",), status="interrupted")
        elif run["message_id"] is not None:
            await self.client.runs.cancel(run["message_id"])
            await self.client.admin.wait(run["message_id"])
            await self.records.set_run(run["run_id"], when=("running",), status="interrupted")
            if rollback:
                message = await self.client.conversations.message(run["message_id"])
                parent = message["parent_id"] or ""
                await self.move_head(run["thread_id"], message["parent_id"])
        if rollback:
            await self.records.delete_run(run["run_id"])
        return parent

    async def cancel(self, run: dict[str, Any], *, action: str, wait: bool) -> dict[str, Any]:
        if run["status"] in FINAL:
            return run
        await self._stop(run, rollback=action == "rollback")
        if wait and run["message_id"]:
            with contextlib.suppress(Exception):
                await self.client.admin.wait(run["message_id"])
        await self.dispatch(run["thread_id"])
        return await self.records.run(run["run_id"]) or {**run, "status": "interrupted"}

    async def join(self, run: dict[str, Any]) -> dict[str, Any]:
        """Wait for the run's end (here or on any worker); its settled row."""
        while True:
            run = await self.settle(await self.records.run(run["run_id"]) or run)
            if run["status"] in FINAL:
                return run
            if run["status"] in ("pending", "starting") or run["message_id"] is None:
                await self.dispatch(run["thread_id"])
                await asyncio.sleep(0.05)
                continue
            handle = await self.client.runs.get(run["message_id"], after_event_id=run["cursor"])
            await handle.result()
            await asyncio.sleep(0.01)  # the status write may trail the final event

    def later(self, thread_id: str, delay: float) -> None:
        async def due() -> None:
            await asyncio.sleep(delay)
            try:
                await self.dispatch(thread_id)
            except Exception:
                log.exception("starting a delayed protocol run on thread %s", thread_id)

        task = asyncio.create_task(due(), name=f"protocol-later-{thread_id}")
        self._watchers[f"later:{id(task)}"] = task
        task.add_done_callback(lambda _: self._watchers.pop(f"later:{id(task)}", None))

    async def aclose(self) -> None:
        for task in list(self._watchers.values()):
            task.cancel()
        for task in list(self._watchers.values()):
            with contextlib.suppress(BaseException):
                await task


def _streaming(body: dict[str, Any]) -> dict[str, Any]:
    """What a join or a reconnect needs of the request: its stream modes."""
    return {k: body[k] for k in ("stream_mode", "stream_subgraphs") if body.get(k) is not None}


def _request(body: dict[str, Any]) -> dict[str, Any]:
    """A queued run's request, to start it later."""
    return {
        k: body.get(k)
        for k in (
            "input",
            "assistant_id",
            "metadata",
            "config",
            "context",
            "stream_mode",
            "stream_subgraphs",
            "webhook",
        )
        if body.get(k) is not None
    }
