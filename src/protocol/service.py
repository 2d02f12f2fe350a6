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
import logging
import time
from typing import TYPE_CHECKING, Any

from ..client import Run
from ..core.conversations import ACTIVE_BRANCH
from ..core.store.schema import conversations as conversation_table
from ..errors import NotFoundError
from . import assistants_store, catalog, starting, webhooks
from .catalog import Assistant
from .records import FINAL, ProtocolRecords
from .thread_ids import shown
from .views import run_view
from .wire import RunCreate

if TYPE_CHECKING:
    from ..client import Client

log = logging.getLogger("artifactflow.protocol")

MESSAGE_TO_RUN = {
    "waiting": "success",
    "completed": "success",
    "failed": "error",
    "cancelled": "interrupted",
}


class Protocol:
    """One per app: the client, the protocol's records, and the tasks watching runs here."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.records = ProtocolRecords(client.admin.store)
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._settled: dict[str, asyncio.Future[dict[str, Any]]] = {}  # by run id, see `watch`
        self._quiet: set[str] = set()  # runs started here without a webhook, until they end

    # --- assistants ----------------------------------------------------------------------------

    def assistants(self) -> list[Assistant]:
        return catalog.assistants(self.client)

    def assistant(self, assistant_id: str) -> Assistant:
        return catalog.assistant(self.client, assistant_id)

    def graph_ids(self, name: str) -> set[str]:
        return catalog.graph_ids(self.client, name)

    # --- threads -------------------------------------------------------------------------------

    async def conversation(self, thread_id: str, user: str | None) -> dict[str, Any]:
        try:
            return dict(await self.client.conversations.get(thread_id, user_id=user))
        except NotFoundError:
            await self.records.forget_if_orphan(thread_id)  # deleted below us: drop its rows
            raise NotFoundError(f"thread {shown(thread_id)} not found") from None

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
        restart_after = self.client.settings.server.queued_start_seconds
        for row in rows:
            if row["status"] == "starting" and row["updated_at"] < time.time() - restart_after:
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
            moved = await self.records.update_run(run["run_id"], when=("running",), status=status)
            if moved is None:  # another reader settled it first: the row as they left it
                return {**run, **(await self.records.run(run["run_id"]) or {})}
            settled = {**run, "status": status, "updated_at": moved}
            self.ended(settled)  # this reader ended it: its webhook goes out here
            return settled
        return run

    async def settle_running(self) -> None:
        """Settle every `running` run (the maintenance loop's part): a run whose worker was
        killed and that another worker recovered ends, and sends its webhook, even when no
        client reads it."""
        for row in await self.records.running_runs():
            await self.settle(row)

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
        self, thread_id: str | None, body: RunCreate, user: str | None
    ) -> tuple[dict[str, Any], Run | None]:
        """Start (or queue) the run `body` asks for; its row and, when it started, its handle."""
        return await starting.create(self, thread_id, body, user)

    # --- watching, queueing, stopping ----------------------------------------------------------

    def watch(
        self,
        run: dict[str, Any],
        message_id: str,
        cursor: int,
        *,
        handle: Run | None = None,
        webhook: bool = True,
    ) -> None:
        """Follow the run here to its end, then settle it and start the thread's next queued
        run. `handle`: the run's handle from starting it here, whose segment is awaited without
        reading its events (else they are followed from `cursor`); `webhook` False: the run was
        started here without one, so its end sends none (no claim on the deliveries table)."""
        run_id = run["run_id"]
        if not webhook:
            self._quiet.add(run_id)
        settled: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        async def follow() -> None:
            try:
                if handle is None or not await handle.finished_here():
                    await (await self.client.runs.get(message_id, after_event_id=cursor)).result()
                # the row as started: settling is a compare-and-set on its status, so one
                # moved meanwhile (a cancel, another reader) is read then, not before
                row = await self.settle(run)
                settled.set_result(row)
                await self.dispatch(run["thread_id"])
            except Exception:  # a watcher must never take the server down
                log.exception("watching protocol run %s", run_id)
            finally:
                if not settled.done():
                    settled.cancel()
                self._watchers.pop(run_id, None)
                self._settled.pop(run_id, None)
                self._quiet.discard(run_id)

        self._settled[run_id] = settled
        self._watchers[run_id] = asyncio.create_task(follow(), name=f"protocol-run-{run_id}")

    async def settled_here(self, run_id: str) -> dict[str, Any] | None:
        """The run's settled row once the watcher here has settled it (a stream ending here
        needs no read of its own); None when no watcher here follows it."""
        settled = self._settled.get(run_id)
        if settled is None:
            return None
        try:
            return await asyncio.shield(settled)
        except asyncio.CancelledError:
            if settled.cancelled():  # the watcher failed: the caller settles it itself
                return None
            raise

    def ended(self, run: dict[str, Any]) -> None:
        """The run has ended: its webhook, if it has one, in a task of its own (webhooks.py)."""
        if run["run_id"] in self._quiet:  # started here without one
            return
        key = f"webhook:{run['run_id']}"

        async def send() -> None:
            view = run_view(run)
            if view["thread_id"] == run["thread_id"]:  # no request maps it here: its row does
                with contextlib.suppress(Exception):  # the database away: the key, as sent
                    row = await self.records.thread_row(run["thread_id"])
                    view["thread_id"] = (row or {}).get("public_id") or run["thread_id"]
            await webhooks.send(self.client, view)

        task = self._watchers[key] = asyncio.create_task(send())
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
        try:
            body = RunCreate.model_validate(
                {"assistant_id": run["assistant_id"], **(run["request"] or {})}
            )
            assistant: Any = await assistants_store.find(
                self, run["assistant_id"], user=run["user_id"]
            )
            values = dict(
                thread_id=thread_id,
                user_id=run["user_id"],
                assistant_id=run["assistant_id"],
                multitask_strategy=run["multitask_strategy"],
                metadata=run["metadata"],
            )
            await starting.close_pause(self, thread_id)
            await starting.start(
                self,
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
            if await self.records.set_run(run["run_id"], when=("running",), status="interrupted"):
                self.ended({**run, "status": "interrupted"})  # its owner may be gone
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
