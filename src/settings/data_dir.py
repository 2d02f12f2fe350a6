"""Where the databases live when nobody says: the user's data folder.

Before, the default was `./data` of the current directory, so running from another folder
silently started an empty history. The default is now the platform's per-user data folder
(`platformdirs.user_data_dir("artifactflow")`: `~/.local/share/artifactflow` on Linux, or
`$XDG_DATA_HOME/artifactflow`), the same from every directory. An explicit folder still wins
(`--data-dir`, `ARTIFACTFLOW_DATA_DIR`, `data_dir:` in `artifactflow.yaml`, `load_settings(...,
data_dir)`).

A `./data` folder holding an app database from an older version is never moved or read
silently: when no folder is configured, its path is logged once per process (a warning on the
`artifactflow.settings` logger, which the CLI prints) with how to keep using it.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("artifactflow.settings")

APP_NAME = "artifactflow"
APP_DB_NAME = "artifactflow.db"  # the app store's file in a data folder
LEGACY_DATA_DIR = Path("data")  # the old default, relative to the current directory

_noticed: set[Path] = set()


def default_data_dir() -> Path:
    """The user's data folder for artifactflow (created by the store when first opened)."""
    from platformdirs import user_data_dir  # a few ms: only when no folder is configured

    return Path(user_data_dir(APP_NAME, appauthor=False))


def legacy_data_dir(cwd: Path | None = None) -> Path | None:
    """`./data` when it holds an app database from an older version, else None."""
    folder = ((cwd or Path.cwd()) / LEGACY_DATA_DIR).resolve()
    return folder if (folder / APP_DB_NAME).is_file() else None


def notice_legacy_data_dir(default: Path, cwd: Path | None = None) -> Path | None:
    """Log (once per process and folder) that `./data` of an older version was found and the
    user data folder is used instead; returns the old folder, or None when there is none."""
    old = legacy_data_dir(cwd)
    if old is None or old == default.resolve() or old in _noticed:
        return old
    _noticed.add(old)
    log.warning(
        "found data of an older artifactflow in %s; it is no longer the default, so this "
        "run uses %s. Nothing was moved. To keep using the old folder, set "
        "ARTIFACTFLOW_DATA_DIR=%s (or data_dir: %s in artifactflow.yaml, or --data-dir).",
        old,
        default,
        old,
        old,
    )
    return old
