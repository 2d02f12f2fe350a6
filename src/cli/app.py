"""The Typer application: the root command with its global options, shared option types,
and `execute`, which opens a `Client` for one command and turns its result into an exit
code. Commands live in `commands_run` (run, resume), `commands_data` (reading stored data) and
`commands_admin` (gc, serve, tokens); `main` is the entry point.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated

import typer

from ..client import Client
from . import exitcodes
from .interrupts import InterruptGuard
from .options import GLOBALS, ConfigDirOption, DataDirOption, DebugOption, ModelOption
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
    bool,
    typer.Option("--no-input", help="Never prompt: on a pause print how to continue and exit 3."),
]
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Approve every tool call automatically.")
]


@app.callback()
def _root(
    config_dir: ConfigDirOption = None,
    data_dir: DataDirOption = None,
    model: ModelOption = None,
    debug: DebugOption = False,
) -> None:
    GLOBALS.update(config_dir=config_dir, data_dir=data_dir, model=model, debug=debug)


# --- helpers -------------------------------------------------------------------------------


def execute(work: Callable[[Client], Awaitable[int | None]]) -> None:
    """Open a client from the global options, run `work`, close; exit with its code.

    Ctrl-C and SIGTERM are handled for the whole command (`InterruptGuard`): during a run they
    cancel it cleanly; otherwise they stop the command (130 / 143); once `work` has returned,
    its exit code stands whatever arrives while the client closes.
    """

    async def main() -> int | None:
        with InterruptGuard(console(stderr=True)) as guard:
            try:
                client = await Client.open(GLOBALS.settings())
                try:
                    code = await work(client)
                    guard.settle(code or exitcodes.OK)
                except Exception:
                    guard.settle(exitcodes.FAILED)  # the error decides the code (`main._report`)
                    raise
                finally:
                    await client.aclose()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not guard.interrupted or task is None or task.uncancel() > 0:
                    raise
                return guard.exit_code
            return code

    code = asyncio.run(main())
    if code:
        raise typer.Exit(code)


def make_session(
    client: Client, *, json_: bool, no_input: bool, yes: bool
) -> Session:
    out, err = console(), console(stderr=True)
    renderer: Renderer = JsonRenderer(err) if json_ else LiveRenderer(out, err)
    policy = Policy(interactive=sys.stdin.isatty() and not no_input, auto_approve=yes)
    return Session(
        client,
        renderer,
        notices=err if json_ else out,
        prompts=err,
        policy=policy,
        options=GLOBALS,
    )
