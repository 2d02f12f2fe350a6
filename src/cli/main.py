"""`artifactflow`: run tasks, answer permission pauses, inspect conversations and artifacts.

Every command is a thin call into `ExecutionController` (see `session` for run/resume).
Settings errors and missing credentials print one short message and exit 2; any other
unexpected error prints a one-line reason and exits 1 (the traceback only with `--debug` or
`ARTIFACTFLOW_DEBUG=1`).

Exit codes (stable; see `exitcodes`):
    0    success
    1    the run failed (`error` event) or an unexpected error
    2    bad usage or settings, missing credentials, invalid resume decisions, unknown id
    3    paused waiting for approval and nobody could answer (no TTY or --no-input)
    4    the run stopped at max_tool_rounds
    5    resume conflict: already resumed, or the message is running
    130  cancelled with Ctrl-C (the partial answer is saved)
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ..core.controller import ExecutionController
from ..core.conversations import ACTIVE_BRANCH
from ..errors import ArtifactFlowError, UserError
from . import exitcodes, views
from .approvals import decisions_from_flags
from .options import (
    GLOBALS,
    ConfigDirOption,
    DataDirOption,
    DebugOption,
    ModelOption,
    with_globals,
)
from .render import JsonRenderer, LiveRenderer, Renderer, console
from .session import Policy, Session

app = typer.Typer(
    name="artifactflow",
    help="A LangGraph multi-agent orchestrator: run tasks, approve tool calls, inspect results.",
    epilog=exitcodes.HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
token_app = typer.Typer(help="Manage API tokens for `artifactflow serve`.", no_args_is_help=True)
app.add_typer(token_app, name="token")

JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
NoInputOption = Annotated[
    bool, typer.Option("--no-input", help="Never prompt: on a pause print how to continue and exit 3.")
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Approve every tool call automatically.")]


@app.callback()
def _root(
    config_dir: ConfigDirOption = None,
    data_dir: DataDirOption = None,
    model: ModelOption = None,
    debug: DebugOption = False,
) -> None:
    GLOBALS.update(config_dir=config_dir, data_dir=data_dir, model=model, debug=debug)


# --- helpers -------------------------------------------------------------------------------


def _execute(work: Callable[[ExecutionController], Awaitable[int | None]]) -> None:
    """Open a controller from the global options, run `work`, close; exit with its code."""

    async def main() -> int | None:
        controller = await ExecutionController.open(GLOBALS.settings())
        try:
            return await work(controller)
        finally:
            await controller.aclose()

    code = asyncio.run(main())
    if code:
        raise typer.Exit(code)


def _session(controller: ExecutionController, *, json_: bool, no_input: bool, yes: bool) -> Session:
    out, err = console(), console(stderr=True)
    renderer: Renderer = JsonRenderer(err) if json_ else LiveRenderer(out, err)
    policy = Policy(interactive=sys.stdin.isatty() and not no_input, auto_approve=yes)
    return Session(
        controller, renderer, notices=err if json_ else out, prompts=err, policy=policy, options=GLOBALS
    )


# --- run / resume --------------------------------------------------------------------------


@app.command(epilog=exitcodes.HELP)
@with_globals
def run(
    task: Annotated[str, typer.Argument(help="What the agents should do.", show_default=False)],
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Continue this conversation.", show_default=False)
    ] = None,
    parent: Annotated[
        str | None,
        typer.Option("--parent", help="Branch from this message (default: the active branch).", show_default=False),
    ] = None,
    new_root: Annotated[bool, typer.Option("--new-root", help="Start a new root in the conversation.")] = False,
    json_: JsonOption = False,
    no_input: NoInputOption = False,
    yes: YesOption = False,
) -> None:
    """Run a task and show the agents at work; stops for approval of risky tool calls.

    At a terminal you are asked about each call (approve, deny with a reason, edit its
    arguments, always allow the tool); with --yes everything is approved; with --no-input or
    without a terminal the command prints the message id and exits 3. Ctrl-C cancels (the
    partial answer is saved); a second Ctrl-C quits at once.
    """
    if parent is not None and new_root:
        raise UserError("use either --parent or --new-root, not both")
    parent_id: Any = None if new_root else (parent if parent is not None else ACTIVE_BRANCH)

    async def work(controller: ExecutionController) -> int:
        session = _session(controller, json_=json_, no_input=no_input, yes=yes)
        return await session.run(task, conversation, parent_id)

    _execute(work)


@app.command(epilog=exitcodes.HELP)
@with_globals
def resume(
    message_id: Annotated[str, typer.Argument(help="The paused message.", show_default=False)],
    approve: Annotated[bool, typer.Option("--approve", help="Approve every pending call.")] = False,
    deny: Annotated[bool, typer.Option("--deny", help="Deny every pending call.")] = False,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (sent to the model) for denied calls.", show_default=False)
    ] = None,
    always: Annotated[
        bool, typer.Option("--always", help="Approve and always allow these tools in this conversation.")
    ] = False,
    decision: Annotated[
        list[str] | None,
        typer.Option(
            "--decision",
            help="Per call: CALL_ID=approve|deny|always (repeat for each pending call).",
            show_default=False,
        ),
    ] = None,
    json_: JsonOption = False,
    yes: YesOption = False,
    no_input: NoInputOption = False,
) -> None:
    """Continue a paused message (from any process) and show the rest of the run.

    Without decision flags you are asked at a terminal, as in `run`. A message that is not
    waiting is a conflict (exit 5); bad decisions exit 2 and leave the message paused.
    """

    def decide(calls: list[dict[str, Any]]) -> dict[str, Any] | None:
        return decisions_from_flags(
            approve=approve, deny=deny, always=always, reason=reason, decision=decision or [], calls=calls
        )

    decide([])  # reject contradictory flags before opening anything

    async def work(controller: ExecutionController) -> int:
        session = _session(controller, json_=json_, no_input=no_input, yes=yes)
        return await session.resume(message_id, decide)

    _execute(work)


# --- inspection ----------------------------------------------------------------------------


@app.command()
@with_globals
def pending(json_: JsonOption = False) -> None:
    """List paused messages and the tool calls they wait for."""

    async def work(controller: ExecutionController) -> None:
        messages = await controller.pending()
        if json_:
            views.print_json([views.public_message(m) for m in messages])
        else:
            views.pending(console(), messages)

    _execute(work)


@app.command()
@with_globals
def conversations(
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many to show.")] = 20,
    offset: Annotated[int, typer.Option("--offset", min=0, help="How many to skip.")] = 0,
    json_: JsonOption = False,
) -> None:
    """List conversations, newest first."""

    async def work(controller: ExecutionController) -> None:
        rows = await controller.store.list_conversations(limit=limit, offset=offset)
        total = await controller.store.count_conversations()
        if json_:
            views.print_json({"items": rows, "total": total, "limit": limit, "offset": offset})
        else:
            views.conversations(console(), rows, total, offset)

    _execute(work)


@app.command()
@with_globals
def history(
    conversation_id: Annotated[str, typer.Argument(help="The conversation.", show_default=False)],
    json_: JsonOption = False,
) -> None:
    """Show a conversation as a tree of messages, branches and the active branch marked."""

    async def work(controller: ExecutionController) -> None:
        tree = await controller.conversations.tree(conversation_id)
        if json_:
            views.print_json(tree)
        else:
            views.history(console(), tree)

    _execute(work)


@app.command()
@with_globals
def events(
    message_id: Annotated[str, typer.Argument(help="The message.", show_default=False)],
    after: Annotated[int, typer.Option("--after", min=0, help="Only events after this event id.")] = 0,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object per event.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep following a running message.")] = False,
) -> None:
    """Replay a message's stored events (and follow it live with --follow)."""
    out = console()

    async def work(controller: ExecutionController) -> None:
        if follow:
            async for event in controller.follow(message_id, after_event_id=after):
                _print_event(out, event, json_)
        else:
            for event in await controller.events(message_id, after_event_id=after):
                _print_event(out, event, json_)

    _execute(work)


def _print_event(out: Any, event: Any, json_: bool) -> None:
    if json_:
        sys.stdout.write(event.model_dump_json() + "\n")
        sys.stdout.flush()
    elif event.type != "llm_chunk":
        out.print(views.event_line(event))


@app.command()
@with_globals
def gc(
    retention_hours: Annotated[
        float | None,
        typer.Option("--retention-hours", min=0, help="Abandon pauses idle longer than this.", show_default=False),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would be removed.")] = False,
    json_: JsonOption = False,
) -> None:
    """Delete checkpoints no run needs any more (finished and abandoned messages)."""

    async def work(controller: ExecutionController) -> None:
        result = await controller.gc(retention_hours, dry_run=dry_run)
        if json_:
            views.print_json(result)
        else:
            views.gc_report(console(), result)

    _execute(work)


@app.command("artifacts")
@with_globals
def list_artifacts(
    conversation_id: Annotated[str, typer.Argument(help="The conversation.", show_default=False)],
    json_: JsonOption = False,
) -> None:
    """List a conversation's artifacts."""

    async def work(controller: ExecutionController) -> None:
        from ..core.artifacts import ArtifactService

        items = await ArtifactService(controller.store).list(conversation_id)
        if json_:
            views.print_json(items)
        else:
            views.artifacts(console(), items)

    _execute(work)


@app.command("artifact")
@with_globals
def show_artifact(
    conversation_id: Annotated[str, typer.Argument(help="The conversation.", show_default=False)],
    artifact_id: Annotated[str, typer.Argument(help="The artifact.", show_default=False)],
    version: Annotated[
        int | None, typer.Option("--version", min=1, help="This version (default: current).", show_default=False)
    ] = None,
    diff: Annotated[
        int | None,
        typer.Option("--diff", min=1, help="Unified diff from version N to current (or --version).", show_default=False),
    ] = None,
    export: Annotated[
        Path | None, typer.Option("--export", help="Write the artifact as Markdown to PATH.", show_default=False)
    ] = None,
) -> None:
    """Show an artifact, diff two of its versions, or export it as Markdown."""
    out = console()

    async def work(controller: ExecutionController) -> None:
        from ..core.artifacts import ArtifactService

        service = ArtifactService(controller.store)
        if diff is not None:
            text = await service.diff(conversation_id, artifact_id, diff, version)
            views.diff(out, text, diff, version if version is not None else "current")
        if export is not None:
            path = await service.export_to(export, conversation_id, artifact_id, version)
            out.print(f"wrote {path}")
        if diff is None and export is None:
            views.artifact(out, await service.get(conversation_id, artifact_id, version))

    _execute(work)


# --- server and tokens ---------------------------------------------------------------------


@app.command()
@with_globals
def serve(
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8000,
) -> None:
    """Serve the HTTP/SSE API."""
    from ..api.app import serve as serve_app

    result = serve_app(GLOBALS.settings(), host=host, port=port)
    if inspect.isawaitable(result):
        asyncio.run(result)  # type: ignore[arg-type]


@token_app.command("create")
@with_globals
def token_create(name: Annotated[str, typer.Argument(help="User name.", show_default=False)]) -> None:
    """Create an API token for NAME; the token alone is printed on the last line."""

    async def work(controller: ExecutionController) -> None:
        user_id, token = await controller.store.create_token(name)
        console(stderr=True).print(
            f"Created a token for user {name!r} ({user_id}). Only its hash is stored: copy it now."
        )
        sys.stdout.write(token + "\n")
        sys.stdout.flush()

    _execute(work)


# --- entry point ---------------------------------------------------------------------------


class _LogFormatter(logging.Formatter):
    """One line per record; the traceback only in debug mode."""

    def format(self, record: logging.LogRecord) -> str:
        if GLOBALS.debug:
            return super().format(record)
        return f"{record.levelname.lower()}: {record.getMessage()}"


def _log_filter(record: logging.LogRecord) -> bool:
    """Our warnings always; other libraries' only from ERROR up, unless debugging."""
    if GLOBALS.debug or record.name == "artifactflow" or record.name.startswith("artifactflow."):
        return True
    return record.levelno >= logging.ERROR


def _configure_logging() -> None:
    root = logging.getLogger()
    if root.handlers:  # the host application (or pytest) configured logging already
        return
    handler = logging.StreamHandler()
    handler.setFormatter(_LogFormatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_log_filter)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if GLOBALS.debug else logging.WARNING)


def _report(exc: BaseException) -> int:
    code = exitcodes.for_exception(exc)
    err = console(stderr=True)
    if GLOBALS.debug:
        traceback.print_exception(exc)
    if isinstance(exc, ArtifactFlowError):
        message = str(exc)
    else:
        message = f"{type(exc).__name__}: {exc}"
        if not GLOBALS.debug:
            message += " (run with --debug for the traceback)"
    err.print(Text(f"error: {message}", style="red"))
    return code


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code."""
    GLOBALS.reset()
    _configure_logging()
    try:
        app(args=argv, prog_name="artifactflow")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return exitcodes.FAILED
    except KeyboardInterrupt:
        return exitcodes.CANCELLED
    except Exception as exc:
        return _report(exc)
    return exitcodes.OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
