"""`artifactflow`: run tasks, answer permission pauses, inspect conversations and artifacts.

Every command is a thin call into `artifactflow.Client` (see `session` for run/resume).
Settings errors and missing credentials print one short message and exit 2; any other
unexpected error prints a one-line reason and exits 1 (the traceback only with `--debug` or
`ARTIFACTFLOW_DEBUG=1`).

Exit codes (stable; see `exitcodes`):
    0    success
    1    the run failed (`error` event) or an unexpected error
    2    bad usage or settings, missing credentials, invalid resume decisions, unknown id
    3    paused waiting for approval and nobody could answer (no TTY or --no-input)
    4    the run stopped at max_tool_rounds, or by the loop guard
    5    conflict: already resumed, the message is running, or not retryable
    6    the run stopped at a token, cost or time budget (the partial answer is saved)
    130  cancelled with Ctrl-C (the partial answer is saved)
    143  cancelled by SIGTERM, as Ctrl-C
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

# Only the standard library above: the console script imports this module before `main()` can
# catch anything, so a Ctrl-C while typer, rich and pydantic load must land inside `main()`.
COMMAND_MODULES = (
    "commands_run", "commands_data", "commands_tools", "commands_replay", "commands_admin",
    "commands_workflows", "commands_memory", "commands_knowledge", "commands_demo",
    "commands_platform",
)
STARTUP_INTERRUPTED = "✗ interrupted (Ctrl-C)"  # before (or after) a command's own handling
# Where each command is registered: a command line naming one loads that module alone (typer
# then builds one command, not all of them: `run` refuses a missing key sooner). Anything else
# (`--help`, a group such as `token`, a misspelled command) loads every module.
# `tests/test_startup_imports.py` checks this against what the modules register.
COMMAND_HOMES = {
    "run": "commands_run", "resume": "commands_run", "retry": "commands_run",
    "artifact": "commands_data", "artifacts": "commands_data", "conversations": "commands_data",
    "events": "commands_data", "history": "commands_data", "pending": "commands_data",
    "tools": "commands_tools", "eval": "commands_replay", "export": "commands_replay",
    "replay": "commands_replay", "gc": "commands_admin", "serve": "commands_admin",
    "lineage": "commands_workflows", "workflow": "commands_workflows",
    "workflows": "commands_workflows", "memory": "commands_memory",
    "knowledge": "commands_knowledge", "demo": "commands_demo", "assistants": "commands_platform",
    "crons": "commands_platform", "mcp": "commands_platform",
}
_VALUED = ("--config-dir", "--data-dir", "--model")  # the root's options that take a value

__all__ = ["main"]  # `app` too, loaded on first use (`__getattr__`)


def _load(argv: list[str] | None = None) -> typer.Typer:
    """The Typer app with the module of the command `argv` names registered, or every command
    (importing a command module registers its commands; `--help` lists them in this order)."""
    import importlib

    from .app import app

    home = COMMAND_HOMES.get(_command_name(argv or []) or "")
    for module in (home,) if home else COMMAND_MODULES:
        importlib.import_module(f"{__package__}.{module}")
    return app


def _command_name(argv: list[str]) -> str | None:
    """The first word of `argv` that is not a root option or its value (None: there is none,
    or `--help`/`--version` comes first)."""
    words = iter(argv)
    for word in words:
        if word in _VALUED:
            next(words, None)
        elif word in ("--help", "--version"):
            return None
        elif not word.startswith("-"):
            return word
    return None


def __getattr__(name: str) -> Any:
    if name == "app":
        return _load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _LogFormatter(logging.Formatter):
    """One line per record; the traceback only in debug mode."""

    def format(self, record: logging.LogRecord) -> str:
        from .options import GLOBALS

        if GLOBALS.debug:
            return super().format(record)
        line = f"{record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and getattr(record, "unhandled", False):  # a bug: its traceback always
            line += "\n" + self.formatException(record.exc_info)
        return line


def _log_filter(record: logging.LogRecord) -> bool:
    """Our warnings always; other libraries' only from ERROR up, unless debugging."""
    from .options import GLOBALS

    if GLOBALS.debug or record.name == "artifactflow" or record.name.startswith("artifactflow."):
        return True
    return record.levelno >= logging.ERROR


def _configure_logging(debug: bool) -> None:
    root = logging.getLogger()
    if root.handlers:  # the host application (or pytest) configured logging already
        return
    handler = logging.StreamHandler()
    handler.setFormatter(_LogFormatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_log_filter)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    if debug:
        logging.getLogger("artifactflow").setLevel(logging.DEBUG)


def _report(exc: BaseException) -> int:
    import traceback

    from ..client.faults import store_fault  # only on this error path: start-up stays lean
    from ..errors import ArtifactFlowError, scrub_secrets
    from . import exitcodes
    from .app import plain_color
    from .options import GLOBALS

    if isinstance(exc, Exception):  # a database that is away is said so, in one line
        exc = store_fault(exc) or exc
    code = exitcodes.for_exception(exc)
    if GLOBALS.debug:
        traceback.print_exception(exc)
    if isinstance(exc, ArtifactFlowError):
        message = str(exc)
    else:
        message = " ".join(scrub_secrets(f"{type(exc).__name__}: {exc}").split())  # one line
        if not GLOBALS.debug:
            message += " (run with --debug for the traceback)"
    sys.stdout.flush()  # printed plainly: a refused command never loads rich
    print(plain_color(f"error: {message}", "31"), file=sys.stderr, flush=True)
    return code


def _interrupted() -> int:
    """Ctrl-C outside a command's own handling (loading, parsing, the last teardown): one
    line, exit 130."""
    sys.stdout.flush()
    print(STARTUP_INTERRUPTED, file=sys.stderr, flush=True)
    return 130  # exitcodes.CANCELLED, without importing it here


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code.

    Ctrl-C at any moment ends cleanly: while the command line loads or parses its arguments
    it prints one line and exits 130; once a command runs, its `InterruptGuard` decides
    (see `interrupts`)."""
    try:
        app = _load(sys.argv[1:] if argv is None else argv)
        from . import exitcodes
        from .options import GLOBALS

        GLOBALS.reset()
        _configure_logging(GLOBALS.debug)
    except KeyboardInterrupt:
        return _interrupted()
    excepthook = sys.excepthook  # typer installs its own; errors are reported here instead
    try:
        app(args=argv, prog_name="artifactflow")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return exitcodes.FAILED
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as exc:
        return _report(exc)
    finally:
        sys.excepthook = excepthook
    return exitcodes.OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
