"""The Typer application: the root command with its global options, shared option types,
and `execute`, which opens a `Client` for one command and turns its result into an exit
code (`read` and `show` open a `Reader` instead: the stored data without the run engine).
Commands live in `commands_run` (run, resume), `commands_data` (reading stored data) and
`commands_admin` (gc, serve, tokens); `main` is the entry point.

Start-up time matters (`--help`, listing commands): this package imports the engine, the
settings and the stores inside the commands that use them, never at module level, and
`tests/test_startup_imports.py` keeps it so.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

import typer

from . import exitcodes, views
from .options import (
    GLOBALS,
    ConfigDirOption,
    DataDirOption,
    DebugOption,
    ModelOption,
    with_globals,
)
from .text import console

if TYPE_CHECKING:
    from ..agents.spec import AgentSpec
    from ..client import Client, Reader
    from ..client.quick import StoreAt
    from ..settings import Settings
    from .session import Session

app = typer.Typer(
    name="artifactflow",
    help="A LangGraph multi-agent orchestrator: run tasks, approve tool calls, inspect results.",
    epilog=exitcodes.HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help and usage errors (click's own formatting): typer's rich help imports
    # rich.markdown, markdown-it, pygments and rich.traceback (~40% of `--help`'s CPU, issue 38)
    rich_markup_mode=None,
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


def _print_version(value: bool) -> None:
    if value:
        from ..version import __version__

        typer.echo(f"artifactflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    config_dir: ConfigDirOption = None,
    data_dir: DataDirOption = None,
    model: ModelOption = None,
    debug: DebugOption = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    GLOBALS.update(config_dir=config_dir, data_dir=data_dir, model=model, debug=debug)


# --- helpers -------------------------------------------------------------------------------

T = TypeVar("T")


class _Closable(Protocol):
    async def aclose(self) -> None: ...


Opened = TypeVar("Opened", bound=_Closable)  # a Client or a Reader


def command(
    name: str | None = None, *, group: typer.Typer = app, **options: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`@group.command(name, **options)` for a command that also takes the global options."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        return group.command(name, **options)(with_globals(func))

    return register


def execute(
    work: Callable[[Client], Awaitable[int | None]],
    check: Callable[[Settings], object] | None = None,
) -> None:
    """Open a client from the global options, run `work`, close; exit with its code.

    Ctrl-C and SIGTERM are handled for the whole command (`InterruptGuard`): during a run they
    cancel it cleanly; otherwise they stop the command (130 / 143); once `work` has returned,
    its exit code stands whatever arrives while the client closes. `check(settings)` runs
    first, under the same guard: the cheap checks before the engine loads (`preflight`).
    """

    async def open_client(settings: Settings) -> Client:
        from ..client import Client

        return await Client.open(settings)

    _execute(open_client, work, check)


def read(work: Callable[[Reader], Awaitable[int | None]]) -> None:
    """`execute` for a command that only reads stored data: it opens a `Reader` (the app store
    alone), so it starts without importing the run engine, LangGraph or the model client."""

    async def open_reader(settings: Settings) -> Reader:
        from ..client.stored import Reader

        check_config_files(settings)
        return await Reader.open(settings)

    _execute(open_reader, work)


def store_location() -> StoreAt:
    """Where the store is, for the quick readers: remembered from an earlier command with the
    same flags, environment and config files (`settings_cache`: no pydantic), else the checked
    settings (then remembered)."""
    from . import settings_cache

    remembered = settings_cache.cached(GLOBALS)
    if remembered is not None:
        return remembered
    settings = GLOBALS.settings()
    check_config_files(settings)
    settings_cache.remember(GLOBALS, settings)
    return settings


def check_config_files(settings: Settings) -> dict[str, AgentSpec]:
    """Refuse a broken config (`ConfigError`, exit 2) in a command that only reads, as every
    command did when each opened the whole engine: the agent files must parse and the plugins
    import. That costs milliseconds; building the tools, models and graph is left to the
    commands that run something."""
    from ..agents.spec import load_agents
    from ..settings import packaged_config_dir

    folder = settings.config_dir / "agents"
    agents = load_agents(folder if folder.is_dir() else packaged_config_dir() / "agents")
    if settings.plugins:
        from ..tools.registry import ToolRegistry

        ToolRegistry().load_plugins(settings.plugins, settings.config_dir)
    return agents


@contextlib.contextmanager
def checking() -> Iterator[None]:
    """Ctrl-C or SIGTERM while the settings load and the checks run (a plugin may take its
    time) as a command's `InterruptGuard` takes them, without the asyncio and rich it needs
    (a refused command never loads them): the first signal is noted and acted on once the
    checks end (one line, exit 130 or 143; nothing is cut in the middle of a plugin's import),
    a second one exits at once."""
    import signal

    seen: list[int] = []

    def note(signum: int, frame: object) -> None:
        seen.append(signum)
        if len(seen) > 1:
            os._exit(exitcodes.CANCELLED if seen[0] == signal.SIGINT else exitcodes.TERMINATED)

    previous: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread: no signals to take
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, note)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if seen:
        ctrl_c = seen[0] == signal.SIGINT
        _stopped("interrupted (Ctrl-C)" if ctrl_c else "terminated (SIGTERM)")
        raise typer.Exit(exitcodes.CANCELLED if ctrl_c else exitcodes.TERMINATED)


def _stopped(what: str) -> None:
    sys.stdout.flush()
    print(plain_color(f"✗ {what}: stopped", "33"), file=sys.stderr, flush=True)


def plain_color(text: str, sgr: str) -> str:
    """`text` in an ANSI colour on a terminal that takes it (not with NO_COLOR or TERM=dumb),
    as rich would print it, without importing rich."""
    if not sys.stderr.isatty() or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return text
    return f"\x1b[{sgr}m{text}\x1b[0m"


def _execute(
    opener: Callable[[Settings], Awaitable[Opened]],
    work: Callable[[Opened], Awaitable[int | None]],
    check: Callable[[Settings], object] | None = None,
) -> None:
    with checking():  # before asyncio, rich and the guard: a refusal costs none of them
        settings = GLOBALS.settings()
        if check is not None:
            check(settings)

    import asyncio

    from .interrupts import InterruptGuard

    async def main() -> int | None:
        with InterruptGuard(console(stderr=True)) as guard:
            try:
                opened = await opener(settings)
                try:
                    code = await work(opened)
                    guard.settle(code or exitcodes.OK)
                except Exception:
                    guard.settle(exitcodes.FAILED)  # the error decides the code (`main._report`)
                    raise
                finally:
                    await opened.aclose()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not guard.interrupted or task is None or task.uncancel() > 0:
                    raise
                guard.report_stopped()  # one line; a run's session reports its own
                return guard.exit_code
            return code

    code = asyncio.run(main())
    if code:
        raise typer.Exit(code)


def present(
    value: T,
    view: Callable[[Any, T], int | None],
    json_: bool,
    as_json: Callable[[T], Any] | None = None,
) -> int | None:
    """Print `value` as JSON with `--json` (through `as_json` when given), else draw it with
    `view` on the console; returns the exit code (`view`'s)."""
    if json_:
        views.print_json(value if as_json is None else as_json(value))
        return None
    return view(console(), value)


def show(
    fetch: Callable[[Reader], Awaitable[T]],
    view: Callable[[Any, T], int | None],
    json_: bool,
    as_json: Callable[[T], Any] | None = None,
    *,
    quick: Callable[[StoreAt], T | None] | None = None,
) -> None:
    """`read` one stored thing and `present` it. `quick(store)`, when given, may answer
    first without opening a `Reader` (`artifactflow.client.quick`; None: it cannot)."""
    if quick is not None:
        value = quick(store_location())
        if value is not None:
            code = present(value, view, json_, as_json)
            if code:
                raise typer.Exit(code)
            return

    async def work(reader: Reader) -> int | None:
        return present(await fetch(reader), view, json_, as_json)

    read(work)


def drive(
    start: Callable[[Session], Awaitable[int]],
    *,
    json_: bool,
    no_input: bool,
    yes: bool,
    check: Callable[[Settings], object] | None = None,
) -> None:
    """`execute` a command that drives a message: `start` gets the session for these flags."""

    async def work(client: Client) -> int:
        return await start(make_session(client, json_=json_, no_input=no_input, yes=yes))

    execute(work, check)


def make_session(
    client: Client, *, json_: bool, no_input: bool, yes: bool
) -> Session:
    from .render import JsonRenderer, LiveRenderer, Renderer
    from .session import Policy, Session

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
