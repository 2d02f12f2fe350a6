"""Where the store is, remembered between commands, so a listing starts without pydantic.

`artifactflow conversations` and `pending` read a SQLite store with the standard library
(`client.quick`); what they need of the settings is the data folder. Loading the settings
(pydantic, pydantic-settings, YAML, the config models and their validation) is about 100 ms of
CPU, a third of the command. After a full load whose config passed its checks, the data folder
is written to a small JSON file in the user's cache folder, with what it was derived from: the
command's flags, the `ARTIFACTFLOW_*` environment, the folders the defaults depend on (`HOME`,
the XDG folders, the working directory), the interpreter and the version, and the size,
modification time and inode of every file the settings and the config check read
(`artifactflow.yaml`, the agent files and their folder, `./config`, `./data`). The next listing
uses it only when all of that is unchanged; any difference is a miss and a full load, which
then writes the file anew. Nothing is remembered for a config with plugins (their code is
checked by importing it) or a `database_url` (only a `Reader` reads PostgreSQL), nor while an
older version's `./data` is noticed (the notice must keep showing).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..version import __version__

if TYPE_CHECKING:
    from ..settings import Settings
    from .options import Globals

ENV_INPUTS = ("HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
APP_DB_NAME = "artifactflow.db"  # settings.data_dir.APP_DB_NAME (that package imports pydantic)


@dataclass(frozen=True)
class StoreLocation:
    """The store a listing reads, as `Settings` names it (`client.quick` reads these two)."""

    data_dir: Path
    database_url: None = None

    @property
    def app_db_path(self) -> Path:
        return self.data_dir / APP_DB_NAME  # as Settings.app_db_path, without importing it


def _inputs(options: Globals) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k.startswith("ARTIFACTFLOW_") or k in ENV_INPUTS}
    return {
        "version": __version__,
        "python": sys.prefix,  # the environment (its packages), however the interpreter is named
        "cwd": os.getcwd(),
        "flags": [str(options.config_dir or ""), str(options.data_dir or ""), options.model or ""],
        "env": sorted(env.items()),
    }


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino, int(path.is_dir())]


def _read_paths(config_dir: Path) -> list[Path]:
    """Every path whose change could change the settings or the config check's verdict."""
    cwd = Path.cwd()
    agents = config_dir / "agents"
    paths = [cwd / "config", cwd / "data" / APP_DB_NAME, config_dir / "artifactflow.yaml", agents]
    with contextlib.suppress(OSError):
        paths += sorted(agents.iterdir())
    return paths


def _signature(config_dir: Path) -> list[list[Any]]:
    return [[str(p), _stat(p)] for p in _read_paths(config_dir)]


def _file(inputs: dict[str, Any]) -> Path:
    from platformdirs import user_cache_dir  # honours XDG_CACHE_HOME

    folder = Path(user_cache_dir("artifactflow", appauthor=False))
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]
    return folder / f"settings-{key}.json"


def cached(options: Globals) -> StoreLocation | None:
    """The remembered store of these options, or None (never seen, or anything changed)."""
    inputs = _inputs(options)
    try:
        saved = json.loads(_file(inputs).read_text(encoding="utf-8"))
        if saved["inputs"] != json.loads(json.dumps(inputs)):
            return None
        if saved["signature"] != _signature(Path(saved["config_dir"])):
            return None
        return StoreLocation(Path(saved["data_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(options: Globals, settings: Settings) -> None:
    """Write what `cached` needs after a full load whose config passed its checks (best
    effort: a cache folder that cannot be written is left alone)."""
    from ..settings.data_dir import legacy_data_dir

    if settings.plugins or settings.database_url:
        return
    legacy = legacy_data_dir()
    if legacy is not None and legacy != settings.data_dir:
        return
    inputs = _inputs(options)
    body = {
        "inputs": inputs,
        "config_dir": str(settings.config_dir),
        "signature": _signature(settings.config_dir),
        "data_dir": str(settings.data_dir),
    }
    target = _file(inputs)
    with contextlib.suppress(OSError):
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{os.getpid()}")
        temp.write_text(json.dumps(body), encoding="utf-8")
        os.replace(temp, target)
