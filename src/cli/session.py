"""Driving one message from the command line: stream it, answer its pauses, resume, repeat.

A pause (a `permission_request` as the stream's last word) is answered one of three ways:
`--yes` approves everything; at a terminal the person decides (`approvals.ask`) and the run
resumes in this process with `client.runs.start(Resume(...))`; otherwise the
command prints how to continue and exits 3. A refused decision (`InvalidResumeError`) is shown
and asked again. `retry` starts a sibling of a failed or cancelled message and drives it like
a run. The exit code comes from the stream's last event (see `exitcodes`); once that event
is seen, no later Ctrl-C or SIGTERM changes it (`InterruptGuard.settle`).

Prompts block the event loop on purpose: while a message is paused nothing of it runs in this
process, and a thread blocked reading stdin could not be abandoned cleanly when the person
presses Ctrl-C (a daemon thread holding stdin breaks interpreter shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from rich.console import Console
from rich.text import Text

from ..client import Client, Request, Resume, Retry, Run, Task
from ..core.permissions import decisions_from_body
from ..errors import InvalidResumeError
from ..events.envelope import Event, EventType
from ..events.payloads import CompleteData, PermissionRequestData
from ..shapes import AskedCall
from . import exitcodes
from .approvals import PromptAborted, ResumeData, ask, print_paused
from .interrupts import current_guard
from .options import Globals
from .render import Renderer


@dataclass
class Policy:
    interactive: bool  # a person can answer prompts (stdin is a TTY and not --no-input)
    auto_approve: bool  # --yes


class Session:
    def __init__(
        self,
        client: Client,
        renderer: Renderer,
        *,
        notices: Console,
        prompts: Console,
        policy: Policy,
        options: Globals,
    ) -> None:
        self.client = client
        self.renderer = renderer
        self.notices = notices  # pause instructions: stdout, or stderr in --json mode
        self.prompts = prompts  # questions and their errors: stderr
        self.policy = policy
        self.options = options
        self.message_id: str | None = None
        self.guard = current_guard(prompts)
        self._task: asyncio.Task[Any] | None = None
        self._cancelling: asyncio.Future[Any] | None = None

    # --- entry points ----------------------------------------------------------------------

    async def run(
        self, content: str, conversation_id: str | None, parent: Any, *,
        project: str | None = None, assistant: str | None = None,
    ) -> int:
        return await self.start(
            Task(content, conversation_id, parent, project=project, assistant=assistant)
        )

    async def start(self, request: Request) -> int:
        """Start `request` (a task, a workflow) and drive its run, answering its pauses."""
        return await self._guarded(self._start(request))

    async def retry(self, message_id: str) -> int:
        """Run a failed or cancelled message again, as a sibling on the same branch."""
        return await self._guarded(self._retry(message_id))

    async def resume(
        self, message_id: str, decide: Callable[[list[AskedCall]], ResumeData | None]
    ) -> int:
        """Continue a paused message; `decide(pending_calls)` turns the flags into resume
        data (None: no decision flags were given)."""
        return await self._guarded(self._resume(message_id, decide))

    # --- internals -------------------------------------------------------------------------

    async def _guarded(self, work: Coroutine[Any, Any, int]) -> int:
        self._task = asyncio.current_task()
        with self.guard.handling(self._interrupt):
            try:
                return await work
            except asyncio.CancelledError:
                if not self.guard.interrupted:
                    raise
                if self._task is not None:
                    self._task.uncancel()
                self.prompts.print("[yellow]✗ cancelled before the run started[/yellow]")
                return self.guard.exit_code
            finally:
                if self._cancelling is not None:
                    with contextlib.suppress(Exception):
                        await self._cancelling

    def _interrupt(self) -> None:
        if self.message_id is not None:
            self.renderer.cancelling()
        else:
            self.renderer.break_line()
        if self.message_id is not None:
            if self._cancelling is None:
                self._cancelling = asyncio.ensure_future(self.client.runs.cancel(self.message_id))
        elif self._task is not None:
            self._task.cancel()

    async def _start(self, request: Request) -> int:
        return await self._drive(await self.client.runs.start(request))

    async def _retry(self, message_id: str) -> int:
        run = await self.client.runs.start(Retry(message_id))
        self.message_id = run.message_id
        self.notices.print(
            Text(f"retrying message {message_id} as message {run.message_id}", style="dim")
        )
        return await self._drive(run, cancel_on_exit=False)

    async def _resume(
        self, message_id: str, decide: Callable[[list[AskedCall]], ResumeData | None]
    ) -> int:
        message = await self.client.conversations.message(message_id)
        self.message_id = message_id
        self.notices.print(
            Text(
                f"message {message_id} · conversation {message['conversation_id']} · {message['status']}",
                style="dim",
            )
        )
        if message["status"] == "failed" and _storage_failure(message.get("error")):
            # ended after a full disk or an outage: say so, with `run`'s failure code
            self.prompts.print(
                Text(f"✗ message {message_id} failed: {message.get('error') or 'no reason stored'}; "
                     f"run it again with: {self.options.command('retry', message_id)}", style="red")
            )
            return exitcodes.FAILED
        calls: list[AskedCall] = (message.get("waiting_for") or {}).get("calls") or []
        data = decide(calls)
        if data is None:
            if message["status"] == "waiting":
                return await self._settle(await self._answer(message_id, calls))
            # Not paused: the client recovers a run whose process died, or says why not.
            data = {"decisions": "approve"}
        run = await self.client.runs.start(Resume(message_id, decisions_from_body(data)))
        return await self._drive(run)

    async def _drive(self, run: Run, *, cancel_on_exit: bool = True) -> int:
        return await self._settle(await self._consume(run, cancel_on_exit=cancel_on_exit))

    async def _consume(self, run: Run, *, cancel_on_exit: bool = True) -> Event | None:
        """Render every event; return the last final one (None if the stream had none).
        With `cancel_on_exit`, a run left before its segment ended (an error, a cancelled
        task) is cancelled."""
        final = None
        stream = aiter(run)
        async with contextlib.AsyncExitStack() as stack:
            if cancel_on_exit:
                await stack.enter_async_context(run)
            await stack.enter_async_context(contextlib.aclosing(stream))  # type: ignore[type-var]
            try:
                async for event in stream:
                    if self.message_id is None:
                        self.message_id = event.message_id
                    if event.is_final and event.type != EventType.PERMISSION_REQUEST:
                        self.guard.settle(self._code(event))  # no later signal changes the outcome
                    self.renderer.event(event)
                    if event.is_final:
                        final = event
            finally:
                self.renderer.idle()  # the spinner never outlives the stream
        return final

    async def _settle(self, outcome: Event | int | None) -> int:
        while isinstance(outcome, Event) and isinstance(outcome.data, PermissionRequestData):
            outcome = await self._answer(outcome.message_id, [cast(AskedCall, c.to_dict()) for c in outcome.data.calls])
        if isinstance(outcome, int):
            return outcome
        if outcome is None:
            self.prompts.print("[red]✗ the run ended without a final event[/red]")
            return exitcodes.FAILED
        return self._code(outcome)

    def _code(self, final: Event) -> int:
        if final.type == EventType.CANCELLED and self.guard.interrupted:
            return self.guard.exit_code  # 130 after Ctrl-C, 143 after SIGTERM
        outcome = final.data.outcome if isinstance(final.data, CompleteData) else None
        return exitcodes.for_outcome(final.type, outcome)

    async def _answer(self, message_id: str, calls: list[AskedCall]) -> Event | int | None:
        """Answer one pause; returns the resumed segment's last word, or an exit code."""
        continue_cmd = self.options.command("resume", message_id, "--approve")
        if self.guard.interrupted:
            return self.guard.exit_code
        if self.policy.auto_approve:
            self.prompts.print(f"[dim]approving {len(calls)} tool call(s) (--yes)[/dim]")
            return await self._consume(await self.client.runs.start(Resume(message_id, "approve")))
        if not self.policy.interactive:
            print_paused(self.notices, message_id, calls, continue_cmd)
            return exitcodes.PAUSED
        while True:
            try:
                with self.guard.suspended():
                    data = ask(self.prompts, calls)
            except PromptAborted:
                self.prompts.print(
                    Text(f"left paused; continue later with: {continue_cmd}", style="yellow")
                )
                return self.guard.exit_code
            try:
                run = await self.client.runs.start(Resume(message_id, decisions_from_body(data)))
                return await self._consume(run)
            except InvalidResumeError as exc:
                self.prompts.print(Text(f"✗ {exc}", style="red"))


def _storage_failure(error: str | None) -> bool:
    """Whether a failed message's stored error is a database that refused writes."""
    return bool(error) and str(error).startswith(("disk full", "read-only", "database unavailable"))
