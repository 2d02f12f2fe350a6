"""Global options (`--config-dir`, `--data-dir`, `--model`, `--debug`), accepted both before
the command (`artifactflow --data-dir d run ...`) and after it (`artifactflow run ... --data-dir
d`). The root callback records the first kind; `with_globals` adds the same options to a
command's signature and merges them in, the command's own value winning.
"""

from __future__ import annotations

import functools
import inspect
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ..settings import Settings


def option(*names: str, help: str, **details: Any) -> Any:
    """A `typer.Option` whose default --help does not show (None, or plain from the help)."""
    return typer.Option(*names, help=help, show_default=False, **details)


def argument(help: str) -> Any:
    """A required `typer.Argument` (--help shows no default for it)."""
    return typer.Argument(help=help, show_default=False)


ConfigDirOption = Annotated[
    Path | None,
    typer.Option(
        "--config-dir",
        help="Config folder (agents, artifactflow.yaml, models.yaml). Default: "
        "$ARTIFACTFLOW_CONFIG_DIR, ./config, or the packaged defaults.",
        show_default=False,
    ),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Folder for the databases. Default: $ARTIFACTFLOW_DATA_DIR, data_dir in "
        "artifactflow.yaml, or the user data folder (~/.local/share/artifactflow on Linux).",
        show_default=False,
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Default model (a profile from models.yaml or a model name); sets settings.model.",
        show_default=False,
    ),
]
DebugOption = Annotated[
    bool,
    typer.Option(
        "--debug", help="Show tracebacks (also ARTIFACTFLOW_DEBUG=1).", show_default=False
    ),
]


@dataclass
class Globals:
    config_dir: Path | None = None
    data_dir: Path | None = None
    model: str | None = None
    debug: bool = False

    def update(self, **given: Any) -> None:
        for name, value in given.items():
            if value is not None and value is not False:
                setattr(self, name, value)

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, f.default)
        self.debug = debug_from_env()

    def settings(self) -> Settings:
        from ..errors import UserError
        from ..settings import load_settings  # pydantic and YAML: only for a command that runs

        if self.config_dir is not None and not self.config_dir.expanduser().is_dir():
            raise UserError(f"--config-dir {self.config_dir}: no such folder")
        return load_settings(self.config_dir, self.data_dir, model=self.model)

    def as_args(self) -> list[str]:
        """The options given explicitly, to repeat in a suggested follow-up command."""
        args: list[str] = []
        if self.config_dir is not None:
            args += ["--config-dir", str(self.config_dir)]
        if self.data_dir is not None:
            args += ["--data-dir", str(self.data_dir)]
        if self.model is not None:
            args += ["--model", self.model]
        return args

    def command(self, *words: str) -> str:
        """A shell-ready `artifactflow ...` command line carrying these options."""
        return shlex.join(["artifactflow", *words, *self.as_args()])


GLOBALS = Globals()


def debug_from_env() -> bool:
    return os.environ.get("ARTIFACTFLOW_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}


_EXTRA = [
    inspect.Parameter(
        "config_dir", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigDirOption
    ),
    inspect.Parameter(
        "data_dir", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=DataDirOption
    ),
    inspect.Parameter(
        "model", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ModelOption
    ),
    inspect.Parameter(
        "debug", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=DebugOption
    ),
]
_NAMES = [p.name for p in _EXTRA]


def with_globals(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the global options too (typer reads `__signature__`)."""
    signature = inspect.signature(func, eval_str=True)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        GLOBALS.update(**{name: kwargs.pop(name, None) for name in _NAMES})
        return func(*args, **kwargs)

    params = [*signature.parameters.values(), *_EXTRA]
    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper
